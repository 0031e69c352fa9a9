"""What the bench samples from outside a pipeline run: the driver's and the extraction actors' peak RSS, and the
actors' CPU seconds over time (`RssSampler`), and the actors' CPU and cores used between two moments
(`actor_cpu`)."""

from __future__ import annotations

import threading
import time
from typing import Any


class RssSampler(threading.Thread):
    """Peak RSS of a process and of the extraction actors, sampled every 0.2 s."""

    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.pid = pid
        self.driver_peak = 0
        self.worker_peak = 0
        self.worker_cpu: list[tuple[float, float]] = []  # (unix time, the actors' CPU seconds so far)
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
                self.worker_cpu.append((time.time(), cpu))
            self.stop.wait(0.2)


def actor_cpu(samples: list[tuple[float, float]], start: float, end: float) -> dict[str, float | None]:
    """The pipeline arm's actors' CPU seconds from `start` to `end` (Unix seconds), from the bench's samples of
    (time, CPU seconds so far), and the cores that is on average: to set beside this arm's `cores_used`."""
    before = [cpu for t, cpu in samples if t <= start]
    until = [cpu for t, cpu in samples if t <= end]
    if not before or not until or end <= start:
        return {"cpu_s": None, "cores_used": None}
    cpu = until[-1] - before[-1]
    return {"cpu_s": round(cpu, 3), "cores_used": round(cpu / (end - start), 3)}
