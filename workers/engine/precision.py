"""The CPU engine's dtype where the job sets none: float32 on a CPU without native half-precision arithmetic.

vLLM runs a model in the dtype of its `config.json` (bfloat16 for most models, the bundled one too) and takes
every x86 CPU to do bfloat16 natively. Only those with AVX512-BF16 or AMX do; on the others (AVX2, or AVX-512
without BF16) torch converts each operand, and the matrix multiplications that are prefill and decode run several
times slower than in float32. Measured on a 2-core AMD EPYC with AVX2 and FMA (2026-12-04): a 512×576 by
576×1536 product took 74.2 ms in bfloat16 and 10.2 ms in float32, and `extract run` of the sample's first 8
documents 127 s against 50 s (generation about 80 s against 18 s), every field of the 8 rows the same.

So where the job's `engine_kwargs` has no `dtype`, the model's dtype is a half type, and the CPU has no native
arithmetic for it, the engine runs in float32, provided float32 weights take at most `FLOAT32_SHARE` of free
memory (a large model keeps its dtype rather than fail to fit). The KV cache follows the model's dtype, so its
budget (`workers.memory`) counts 4 bytes a value. A job that wants the model's own dtype says
`engine_kwargs: {dtype: bfloat16}`. Accelerators are untouched.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import structlog

from workers.memory import free_memory

log = structlog.get_logger("workers.engine")

# The flags (/proc/cpuinfo) of native arithmetic in each half type: x86's, then aarch64's.
NATIVE = {"bfloat16": ("avx512_bf16", "amx_bf16", "bf16"), "float16": ("avx512_fp16", "amx_fp16", "fphp")}
HALF = {"bfloat16": "bfloat16", "bf16": "bfloat16", "float16": "float16", "half": "float16", "fp16": "float16"}
FLOAT32_SHARE = 0.5
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth")
CPUINFO = Path("/proc/cpuinfo")


def cpu_flags(text: str | None = None) -> frozenset[str]:
    """The CPU's feature flags (x86 `flags`, aarch64 `Features`) from /proc/cpuinfo's text; empty where unknown."""
    if text is None:
        try:
            text = CPUINFO.read_text()
        except OSError:
            return frozenset()
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip().lower() in ("flags", "features"):
            return frozenset(value.split())
    return frozenset()


def model_dtype(model_path: str) -> str | None:
    """The dtype in the model folder's `config.json` (`torch_dtype`, or `dtype` in newer configs), or None."""
    config_file = Path(model_path) / "config.json"
    if not config_file.is_file():
        return None
    config = json.loads(config_file.read_text())
    text = config.get("text_config", {})
    name = config.get("torch_dtype") or config.get("dtype") or text.get("torch_dtype") or text.get("dtype")
    return str(name).removeprefix("torch.") if name else None


def weight_bytes(model_path: str) -> int:
    """The bytes of the model folder's weight files (as stored, in the model's dtype)."""
    folder = Path(model_path)
    return sum(f.stat().st_size for f in folder.iterdir() if f.is_file() and f.name.endswith(WEIGHT_SUFFIXES))


def cpu_dtype(model_path: str, engine_kwargs: dict[str, Any], free: int | None = None,
              flags: frozenset[str] | None = None) -> dict[str, Any]:
    """`{"dtype": "float32"}` where the CPU engine should run in float32 (the module's rule), else `{}`. `free`
    (bytes) and `flags` are measured when not given."""
    if "dtype" in engine_kwargs:  # the job's own choice, "auto" (vLLM's) included
        return {}
    half = HALF.get(model_dtype(model_path) or "")
    if half is None:  # float32 already, or no local config to read
        return {}
    flags = cpu_flags() if flags is None else flags
    if not flags or any(flag in flags for flag in NATIVE[half]):  # native, or a CPU we cannot read: vLLM's choice
        return {}
    free = free_memory() if free is None else free
    needed = 2 * weight_bytes(model_path)  # the half-type weights, widened to 4 bytes a value
    if needed > FLOAT32_SHARE * free:
        log.warning("engine.dtype", dtype=half, reason=f"no native {half} on this CPU, but float32 weights "
                    f"({needed / 2**30:.1f} GiB) would take over {FLOAT32_SHARE:.0%} of free memory "
                    f"({free / 2**30:.1f} GiB): expect slow matrix products")
        return {}
    log.info("engine.dtype", dtype="float32", model_dtype=half,
             reason=f"no native {half} arithmetic on this CPU (set model.engine_kwargs.dtype to keep {half})")
    return {"dtype": "float32"}
