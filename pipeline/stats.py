"""`RunStats`: a tiny Ray actor that extraction actors report their start-up timings to."""

from __future__ import annotations

from typing import Any

import ray


@ray.remote(num_cpus=0)
class RunStats:
    def __init__(self) -> None:
        self.actors: list[dict[str, Any]] = []
        self.generation_s = 0.0
        self.batches = 0

    def record_actor(self, report: dict[str, Any]) -> None:
        self.actors.append(report)

    def record_compiles(self, actor: str, seconds: dict[str, float]) -> None:
        """Schemas an actor compiled after start-up (per-row schemas, as they first appear)."""
        for report in self.actors:
            if report["actor"] == actor:
                report.setdefault("schema_compile_s", {}).update(seconds)

    def record_batch(self, seconds: float) -> None:
        self.generation_s += seconds
        self.batches += 1

    def snapshot(self) -> dict[str, Any]:
        return {"actors": list(self.actors), "generation_s": self.generation_s, "batches": self.batches}
