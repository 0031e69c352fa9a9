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
    return vllm_compat.cache_drafter_kernel()


def count_each_row(x: Any, values: Any, out: Any) -> None:
    """`out[i]` = how many of row `i` of `x` are >= `values[i, 0]` (the body numba compiles)."""
    for i in range(x.shape[0]):
        v = values[i, 0]
        n = 0
        for j in range(x.shape[1]):
            n += x[i, j] >= v
        out[i] = n


_count_kernel: Any = None


def _kernel() -> Any:
    """`count_each_row` compiled by numba, kept in numba's disk cache where numba finds a folder it can write
    (beside this file, else the user's cache); where it finds none, compiled in this process only."""
    global _count_kernel
    if _count_kernel is None:
        import numba

        try:  # no fastmath: -inf (a token the grammar forbids) must compare as such
            _count_kernel = numba.njit(cache=True, nogil=True)(count_each_row)
        except RuntimeError:  # numba: "cannot cache function ...: no locator available" (read-only folders)
            _count_kernel = numba.njit(nogil=True)(count_each_row)
    return _count_kernel


def count_at_least(x: Any, values: Any) -> Any:
    """Per row of `x`, how many entries are >= that row's value in `values` (shape (rows, 1)): vLLM's
    `batched_count_greater_than` (the rank of a sampled token's log-probability), as a numba kernel kept in
    numba's disk cache.

    vLLM wraps this one line in `torch.compile`, which every process compiles at its first log-probability
    request: the sample's warm-up with `_confidence` took 4.42 and 4.73 s with it, 3.59 and 3.15 s with this
    kernel (2.1 s without `_confidence`; 2026-12-03, alternating runs). Eager torch makes an int64 copy of the
    (rows × vocabulary) boolean at every step (35 MB at 80 rows), which the kernel never makes. Measured per
    call, 49,152 tokens: 0.11 ms at 16 rows against the compiled kernel's 0.14 ms, 0.62 ms at 80 rows against
    0.48 ms (one thread against two); the first call of a process 0.4-0.5 s. The counts are the same integers
    (`tests/integration/test_logprob_ranks.py`)."""
    import torch

    if x.dtype not in (torch.float32, torch.float64) or values.dtype != x.dtype or x.device.type != "cpu":
        return (x >= values).sum(-1)  # numpy has no bfloat16; vLLM's sampler hands float32 on CPU
    out = torch.empty(x.shape[0], dtype=torch.int64)
    _kernel()(x.detach().numpy(), values.detach().numpy(), out.numpy())
    return out


def _install_rank_counter() -> None:
    """`count_at_least` in vLLM's sampler, its kernel loaded (or compiled, once per machine) now: numba is
    imported before the engine starts (as for the drafter's kernel), not inside its first step."""
    import torch

    count_at_least(torch.zeros((1, 2), dtype=torch.float32), torch.zeros((1, 1), dtype=torch.float32))
    vllm_compat.install_logprob_ranks(count_at_least)


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
    - the ranks of sampled tokens' log-probabilities counted by a numba kernel in numba's disk cache, not by a
      kernel torch compiles in every process (`count_at_least`);
    - the prompt-lookup drafter's kernel in numba's disk cache (imports numba, hence llvmlite: first);
    - the kernel-scan guard that lets a second engine start in a process where the first speculated, and
      the shield that lets one start where Flask is loaded."""
    if accelerator:
        return {"mask_kernel": "device", "penalty_kernel": "vllm", "logprob_ranks": "vllm", "drafter_cache": False,
                "kernel_scan_guard": False}
    from workers import bitmask, penalties

    mask_kernel = bitmask.use(os.environ.get("EXTRACT_MASK_KERNEL", "fast"))
    penalty_kernel = penalties.use(os.environ.get("EXTRACT_PENALTY_KERNEL", "lean"))
    cached = _cache_drafter_kernel(llm_args)
    _install_rank_counter()
    vllm_compat.guard_kernel_scan()
    vllm_compat.shield_kernel_rebind()
    return {"mask_kernel": mask_kernel, "penalty_kernel": penalty_kernel, "logprob_ranks": "numba",
            "drafter_cache": cached, "kernel_scan_guard": True}
