"""`RunStats`: a tiny Ray actor that extraction actors report their start-up and generation timings to."""

from __future__ import annotations

from typing import Any

import ray


@ray.remote(num_cpus=0)
class RunStats:
    def __init__(self) -> None:
        self.actors: list[dict[str, Any]] = []
        self.spans: dict[str, list[tuple[float, float]]] = {}  # actor → (start, end) of each batch's generation
        self.batches = 0

    def record_actor(self, report: dict[str, Any]) -> None:
        self.actors.append(report)

    def record_compiles(self, actor: str, seconds: dict[str, float]) -> None:
        """Schemas an actor compiled after start-up (per-row schemas, as they first appear)."""
        for report in self.actors:
            if report["actor"] == actor:
                report.setdefault("schema_compile_s", {}).update(seconds)

    def record_batch(self, actor: str, started: float, ended: float) -> None:
        self.spans.setdefault(actor, []).append((started, ended))
        self.batches += 1

    def snapshot(self) -> dict[str, Any]:
        return {"actors": list(self.actors), "generation_s": busy_seconds(self.spans), "batches": self.batches}


def busy_seconds(spans: dict[str, list[tuple[float, float]]]) -> float:
    """Seconds each actor's engine was generating, summed over actors. An actor's batches overlap when
    several are in flight, so its time is the union of their spans, not their sum."""
    total = 0.0
    for intervals in spans.values():
        end = float("-inf")
        for start, stop in sorted(intervals):
            if stop > end:
                total += stop - max(start, end)
                end = stop
    return total
