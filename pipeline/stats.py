"""`RunStats`: a tiny Ray actor that extraction actors report their start-up and generation timings to; and
`ProgressBoard`: the live counts (stages, requests, outcomes) behind the driver's progress display."""

from __future__ import annotations

import threading
import time
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


# ---------------------------------------------------------------- live progress


@ray.remote(num_cpus=0)
class ProgressBoard:
    """Live counts for the driver's display, reported by the actors as requests and batches finish (not per
    unit, which reaches the driver much later). Kept apart from `RunStats` so a busy display never queues
    behind the run's bookkeeping."""

    def __init__(self) -> None:
        self.stages: dict[str, tuple[str, float]] = {}  # actor → (stage, since when, Unix seconds)
        self.requests = 0  # engine requests finished (per request, from the engine thread's hook)
        self.request_tokens = 0
        self.outcomes: dict[str, int] = {}  # "row" or a dead-letter reason → documents (per batch, classified)
        self.classified_generated = 0  # of those, how many went through the engine
        self.batch_tokens = 0
        self.step_tokens = 0  # tokens the engines made so far, counted per step (before any request finishes)
        self.first_count_unix: float | None = None  # the first documents counted
        self.first_tokens_unix: float | None = None  # the first tokens counted

    def stage(self, actor: str, stage: str, unix: float) -> None:
        self.stages[actor] = (stage, unix)

    def requests_done(self, n: int, output_tokens: int, unix: float) -> None:
        self.requests += n
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
        return {"stages": dict(self.stages), "requests": self.requests, "outcomes": dict(self.outcomes),
                "classified_generated": self.classified_generated,
                "output_tokens": max(self.request_tokens, self.batch_tokens, self.step_tokens),
                "first_count_unix": self.first_count_unix, "first_tokens_unix": self.first_tokens_unix}


class Reporter:
    """In an actor: counts finished requests (called on the engine thread, so it only adds under a lock) and
    sends them to the `ProgressBoard` from a thread of its own, at most every `every_s` seconds."""

    def __init__(self, board: Any, actor: str, every_s: float = 0.5) -> None:
        self.board = board
        self.actor = actor
        self.every_s = every_s
        self._lock = threading.Lock()
        self._requests = 0
        self._tokens = 0
        self._step_tokens = 0
        self._wake = threading.Event()
        threading.Thread(target=self._flush_loop, name="progress-reporter", daemon=True).start()

    def stage(self, stage: str) -> None:
        self.board.stage.remote(self.actor, stage, time.time())

    def request_done(self, output: Any) -> None:
        """The engine thread's per-request hook: `output` is vLLM's finished RequestOutput."""
        tokens = sum(len(c.token_ids) for c in getattr(output, "outputs", None) or [])
        with self._lock:
            self._requests += 1
            self._tokens += tokens
        self._wake.set()

    def tokens(self, n: int) -> None:
        """The engine thread's per-step hook: `n` tokens were made in the step (any request, finished or not)."""
        with self._lock:
            self._step_tokens += n
        self._wake.set()

    def batch_done(self, table: Any) -> None:
        """A batch's outcomes, classified: counts by row/reason, and how many went through the engine."""
        kinds = table.column("_kind").to_pylist()
        reasons = table.column("_reason").to_pylist()
        finish = table.column("_finish_reason").to_pylist()
        tokens = table.column("_output_tokens").to_pylist()
        counts: dict[str, int] = {}
        for kind, reason in zip(kinds, reasons, strict=True):
            key = "row" if kind == "row" else str(reason)
            counts[key] = counts.get(key, 0) + 1
        generated = sum(1 for f in finish if f not in (None, "refused"))
        self.board.batch_done.remote(counts, generated, sum(t or 0 for t in tokens), time.time())

    def _flush_loop(self) -> None:
        while True:
            self._wake.wait()
            time.sleep(self.every_s)  # gather what finishes meanwhile into one call
            self.flush()

    def flush(self) -> None:
        """Send the requests counted since the last flush, if any."""
        with self._lock:
            n, tokens, self._requests, self._tokens = self._requests, self._tokens, 0, 0
            step_tokens, self._step_tokens = self._step_tokens, 0
            self._wake.clear()
        try:
            if step_tokens:
                self.board.tokens_made.remote(step_tokens, time.time())
            if n:
                self.board.requests_done.remote(n, tokens, time.time())
        except Exception:  # noqa: BLE001 - the display is best effort; the run does not depend on it
            pass


def board_name(run_id: str) -> str:
    return f"extract-progress-{run_id}"


def reporter_for(run_id: str, actor: str) -> Reporter | None:
    """In an actor: a `Reporter` to the run's named `ProgressBoard`, or None when there is none (tests, tools)."""
    try:
        return Reporter(ray.get_actor(board_name(run_id)), actor)
    except Exception:  # noqa: BLE001 - no board: no live counts, the run goes on
        return None
