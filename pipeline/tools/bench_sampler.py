"""What the bench samples from outside a pipeline run: the driver's and the extraction actors' peak RSS, the actors'
CPU seconds and the whole machine's busy CPU seconds over time (`RssSampler`), and from those, between two moments,
the actors' CPU and cores used and what every other process took (`actor_cpu`)."""

from __future__ import annotations

import threading
import time
from typing import Any

from pipeline.tools.machine import cpu_seconds


class RssSampler(threading.Thread):
    """Peak RSS of a process and of the extraction actors, sampled every 0.2 s."""

    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.pid = pid
        self.driver_peak = 0
        self.worker_peak = 0
        self.worker_cpu: list[tuple[float, float]] = []  # (unix time, the actors' CPU seconds so far)
        self.machine_cpu: list[tuple[float, float]] = []  # (unix time, the machine's busy CPU seconds since boot)
        self.stop = threading.Event()

    def run(self) -> None:
        import psutil

        workers: dict[int, Any] = {}
        last_scan = 0.0
        while not self.stop.is_set():
            try:
                self.driver_peak = max(self.driver_peak, psutil.Process(self.pid).memory_info().rss)
            except psutil.NoSuchProcess:
                pass
            # Looking for new actors reads every process's command line: every 2 s, not at each sample, so the
            # sampler takes little CPU from the arm it measures.
            if time.monotonic() - last_scan >= 2.0:
                last_scan = time.monotonic()
                for proc in psutil.process_iter(["cmdline"]):
                    try:
                        if "ExtractionActor" in " ".join(proc.info["cmdline"] or []):
                            workers.setdefault(proc.pid, proc)
                    except (psutil.NoSuchProcess, psutil.AccessDenied):
                        pass
            cpu = 0.0
            for pid, proc in list(workers.items()):
                try:
                    self.worker_peak = max(self.worker_peak, proc.memory_info().rss)
                    cpu += sum(proc.cpu_times()[:2])  # user + system seconds so far
                except (psutil.NoSuchProcess, psutil.AccessDenied):
                    del workers[pid]
            if workers:
                now, machine = time.time(), cpu_seconds()
                self.worker_cpu.append((now, cpu))
                if machine is not None:
                    self.machine_cpu.append((now, machine[0]))
            self.stop.wait(0.2)


def actor_cpu(samples: list[tuple[float, float]], start: float, end: float,
              machine: list[tuple[float, float]] | None = None) -> dict[str, float | None]:
    """The pipeline arm's actors' CPU seconds from `start` to `end` (Unix seconds), from the bench's samples of
    (time, CPU seconds so far), and the cores that is on average: to set beside this arm's `cores_used`. With the
    machine's samples (time, busy CPU seconds), also `others_cpu_s`: what every other process took meanwhile (the
    driver, Ray's own processes, anything else on the machine), which an engine on every core competes with."""
    cpu = _between(samples, start, end)
    others = others_cpu(_between(machine, start, end) if machine is not None else None, cpu)
    if cpu is None:
        return {"cpu_s": None, "cores_used": None, "others_cpu_s": others}
    return {"cpu_s": round(cpu, 3), "cores_used": round(cpu / (end - start), 3), "others_cpu_s": others}


def others_cpu(machine_busy: float | None, own: float | None) -> float | None:
    """What every other process took: the machine's busy CPU seconds over a span less the measured process's own,
    never below 0 (the two are read a moment apart); None when either is unknown."""
    if machine_busy is None or own is None:
        return None
    return round(max(machine_busy - own, 0.0), 3)


def _between(samples: list[tuple[float, float]], start: float, end: float) -> float | None:
    """The growth of a sampled running total from the last sample at or before `start` to the last at or before
    `end`; None without both, or for an empty span. Both ends use the same samples, so the two totals compare."""
    before = [value for t, value in samples if t <= start]
    until = [value for t, value in samples if t <= end]
    if not before or not until or end <= start:
        return None
    return until[-1] - before[-1]
