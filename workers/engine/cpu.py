"""The patches for vLLM's CPU backend, applied before a CPU engine starts (the hooks themselves are in
`workers.vllm_compat`)."""

from __future__ import annotations

import os
from typing import Any

from workers import vllm_compat
from workers.engine.args import speculation_method


def _cache_drafter_kernel(llm_args: dict[str, Any]) -> bool:
    """Keep the prompt-lookup drafter's compiled kernel on disk.

    vLLM's `ngram` drafter runs a numba kernel (`parallel=True`) that numba compiles on the first draft of
    every new process: 1.2 s here, paid by each actor, bench arm and test engine, inside the schema warm-up.
    With numba's own on-disk cache the next process loads it in 0.1 s."""
    if speculation_method(llm_args) != "ngram":
        return False
    vllm_compat.cache_drafter_kernel()
    return True


def _guard_kernel_scan() -> None:
    vllm_compat.guard_kernel_scan()


def _shield_kernel_rebind() -> bool:
    return vllm_compat.shield_kernel_rebind()


def cpu_patches(llm_args: dict[str, Any], accelerator: bool) -> dict[str, Any]:
    """Apply the patches that exist for vLLM's CPU backend, and only without an accelerator; returns what was
    applied. Each was measured on CPU only, and on a GPU vLLM masks logits on the device and its start-up
    scan and drafter differ, so there they would change what nobody measured.

    - the logits mask: our vectorised kernel unless EXTRACT_MASK_KERNEL=xgrammar (workers/bitmask.py);
    - the penalties: ours where only a presence penalty is set, unless EXTRACT_PENALTY_KERNEL=vllm
      (workers/penalties.py);
    - the prompt-lookup drafter's kernel in numba's disk cache (imports numba, hence llvmlite: first);
    - the kernel-scan guard that lets a second engine start in a process where the first speculated, and
      the shield that lets one start where Flask is loaded."""
    if accelerator:
        return {"mask_kernel": "device", "penalty_kernel": "vllm", "drafter_cache": False,
                "kernel_scan_guard": False}
    from workers import bitmask, penalties

    mask_kernel = bitmask.use(os.environ.get("EXTRACT_MASK_KERNEL", "fast"))
    penalty_kernel = penalties.use(os.environ.get("EXTRACT_PENALTY_KERNEL", "lean"))
    cached = _cache_drafter_kernel(llm_args)
    vllm_compat.guard_kernel_scan()
    vllm_compat.shield_kernel_rebind()
    return {"mask_kernel": mask_kernel, "penalty_kernel": penalty_kernel, "drafter_cache": cached,
            "kernel_scan_guard": True}
