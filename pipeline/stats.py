"""A run's one bookkeeping actor, `RunDesk`, owned by the driver: the extraction actors report their start-up and
generation timings to it (`Stats`), the live counts behind the driver's progress display (`Board`), and which
batches and documents are in flight (`workers.crashes.Journal`, so that a poison document is isolated).

They were three actors until 2026-12-03: each an idle Ray worker process, started with every run and waking
through it on cores the engine's OpenMP threads share (docs/performance.md). Their calls are a few
microseconds each, so one process serves all three without a queue worth the name."""

from __future__ import annotations

from typing import Any

import ray

from workers.crashes import Journal
from workers.reporter import Reporter, board_name, reporter_for
from workers.stages import StageHistograms, summarize
from workers.windows import windows_figures

__all__ = ["Board", "Reporter", "RunDesk", "Stats", "board_name", "busy_seconds", "new_desk", "reporter_for"]


class Stats:
    """The actors' start-up reports and each batch's generation span, for the run record."""

    def __init__(self) -> None:
        self.actors: list[dict[str, Any]] = []
        self.spans: dict[str, list[tuple[float, float]]] = {}  # actor → (start, end) of each batch's generation
        self.batches = 0
        self.documents: dict[str, int] = {}  # actor → documents of its batches (a batch redone counts again)
        self.stage_cpu = StageHistograms()  # documents by CPU seconds per stage beside the engine (workers.stages)
        self.windows: dict[int, int] = {}  # window count → documents read in that many (workers.windows)

    def record_actor(self, report: dict[str, Any]) -> None:
        self.actors.append(report)

    def record_compiles(self, actor: str, seconds: dict[str, float]) -> None:
        """Schemas an actor compiled after start-up (per-row schemas, as they first appear)."""
        for report in self.actors:
            if report["actor"] == actor:
                report.setdefault("schema_compile_s", {}).update(seconds)

    def record_batch(self, actor: str, started: float, ended: float, documents: int = 0,
                     stages: dict[str, float] | None = None, windows: dict[int, int] | None = None) -> None:
        self.spans.setdefault(actor, []).append((started, ended))
        self.batches += 1
        self.documents[actor] = self.documents.get(actor, 0) + documents
        if stages:
            self.stage_cpu.add(stages, documents)
        for count, n in (windows or {}).items():
            self.windows[int(count)] = self.windows.get(int(count), 0) + n

    def run_snapshot(self) -> dict[str, Any]:
        """The actors' reports, each with the documents and batches it generated, for the run record."""
        actors = [{**report, "documents": self.documents.get(report["actor"], 0),
                   "batches": len(self.spans.get(report["actor"], []))} for report in self.actors]
        return {"actors": actors, "generation_s": busy_seconds(self.spans), "batches": self.batches,
                "stage_cpu_ms": summarize(self.stage_cpu.to_json()), "windows": windows_figures(self.windows)}


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


# ---------------------------------------------------------------- live progress


class Board:
    """Live counts for the driver's display, reported by the actors as requests and batches finish (not per
    unit, which reaches the driver much later)."""

    def __init__(self) -> None:
        self.stages: dict[str, tuple[str, float]] = {}  # actor → (stage, since when, Unix seconds)
        self.requests = 0  # engine requests finished (per request, from the engine thread's hook)
        self.window_requests = 0  # of the requests sent, how many were windows of a long document (as planned)
        self.request_tokens = 0
        self.outcomes: dict[str, int] = {}  # "row" or a dead-letter reason → documents (per batch, classified)
        self.classified_generated = 0  # of those, how many went through the engine
        self.batch_tokens = 0
        self.step_tokens = 0  # tokens the engines made so far, counted per step (before any request finishes)
        self.first_count_unix: float | None = None  # the first documents counted
        self.first_tokens_unix: float | None = None  # the first tokens counted

    def stage(self, actor: str, stage: str, unix: float) -> None:
        self.stages[actor] = (stage, unix)

    def requests_done(self, n: int, output_tokens: int, unix: float, windows: int = 0) -> None:
        self.requests += n
        self.window_requests += windows
        self.request_tokens += output_tokens
        if n and self.first_count_unix is None:
            self.first_count_unix = unix

    def tokens_made(self, n: int, unix: float) -> None:
        self.step_tokens += n
        if n and self.first_tokens_unix is None:
            self.first_tokens_unix = unix

    def batch_done(self, outcomes: dict[str, int], generated: int, output_tokens: int, unix: float) -> None:
        for key, n in outcomes.items():
            self.outcomes[key] = self.outcomes.get(key, 0) + n
        self.classified_generated += generated
        self.batch_tokens += output_tokens
        if outcomes and self.first_count_unix is None:
            self.first_count_unix = unix

    def snapshot(self) -> dict[str, Any]:
        return {"stages": dict(self.stages), "requests": self.requests, "window_requests": self.window_requests,
                "outcomes": dict(self.outcomes),
                "classified_generated": self.classified_generated,
                "output_tokens": max(self.request_tokens, self.batch_tokens, self.step_tokens),
                "first_count_unix": self.first_count_unix, "first_tokens_unix": self.first_tokens_unix}


class _Desk(Stats, Board, Journal):
    """`Stats`, `Board` and `Journal` in one object: their attributes and methods are disjoint
    (tests/unit/test_progress.py checks it)."""

    def __init__(self) -> None:
        Stats.__init__(self)
        Board.__init__(self)
        Journal.__init__(self)


RunDesk = ray.remote(num_cpus=0, max_restarts=0)(_Desk)


def new_desk(run_id: str) -> Any:
    """The run's desk, named so that an actor finds it by the run's id (`reporter_for`); on the driver, so that it
    outlives every extraction actor (the journal must).

    Placed on the driver's node explicitly: an actor that needs no CPU may otherwise land on any node, and a desk on
    a worker node that died took the run down with it although every document was committed."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    here = NodeAffinitySchedulingStrategy(node_id=ray.get_runtime_context().get_node_id(), soft=False)
    return RunDesk.options(name=board_name(run_id), scheduling_strategy=here).remote()
