"""The actor's CPU per document beside the engine, by stage (issue 57 item 4).

What an actor's batch thread spends besides generation decides how many CPU cores one GPU needs. Each stage is
timed in the thread's own CPU time (`time.thread_time`: the engine thread and the other batches' threads are not
counted), per batch:

- `prompt`: the prompt built and tokenized (retry feedback prompts included; a long document's windows planned:
  its pieces counted, each window's prompt made);
- `grounding`: each document's grounded schema (`schemas.grounding.ground`);
- `grammar_compile`: schemas compiled by the actor (a per-row schema's first appearance; the job's own schema is
  compiled before the first batch and reported as the actors' `schema_compile_s`). The grammar of each grounded
  request is compiled inside the engine, and counted there, not here;
- `classify_validate`: the output parsed, checked against the schema and the job's validators, typed;
- `calibration`: `output.calibration` applied to a row's confidences (inside classify; not counted twice);
- `staging`: the outcome table built and the batch's slice written.

A stage nested in another is counted in the inner one only. A batch's seconds per stage are divided among its
documents (a document's figure is its batch's mean), and added to fixed log-scale histograms (`Histogram`): the
run's desk merges them from every actor (`pipeline.stats`), so memory does not grow with the documents. The run's
summary and `extract bench` print p50 and p99 per stage, and the cores a GPU needs at N documents/s.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

STAGES = ("prompt", "grounding", "grammar_compile", "classify_validate", "calibration", "staging")
TOTAL = "total"  # a document's stages summed

_local = threading.local()

# Histogram buckets: 10 per decade from 100 ns to 1000 s (a bucket's bounds are 26% apart).
_PER_DECADE = 10
_LOW = 1e-7
_BUCKETS = 10 * _PER_DECADE + 2


class Histogram:
    """Counts of documents by seconds, in fixed log-scale buckets: merges by adding, and holds no document."""

    def __init__(self, counts: list[float] | None = None, seconds: float = 0.0) -> None:
        self.counts = list(counts) if counts else [0.0] * _BUCKETS
        self.seconds = seconds  # the documents' seconds summed (for the mean)

    @staticmethod
    def bucket(seconds: float) -> int:
        if seconds <= _LOW:
            return 0
        return min(_BUCKETS - 1, 1 + int(math.log10(seconds / _LOW) * _PER_DECADE))

    def add(self, seconds: float, documents: float = 1.0) -> None:
        self.counts[self.bucket(seconds)] += documents
        self.seconds += seconds * documents

    def merge(self, other: Histogram) -> None:
        self.counts = [a + b for a, b in zip(self.counts, other.counts, strict=True)]
        self.seconds += other.seconds

    @property
    def documents(self) -> float:
        return sum(self.counts)

    def mean(self) -> float:
        return self.seconds / self.documents if self.documents else 0.0

    def quantile(self, q: float) -> float:
        """The upper bound of the bucket holding the q-th document (within 26% above the true value)."""
        target, seen = q * self.documents, 0.0
        for index, count in enumerate(self.counts):
            seen += count
            if count and seen >= target:
                return _LOW * 10 ** (index / _PER_DECADE) if index else _LOW
        return 0.0

    def to_json(self) -> dict[str, Any]:
        return {"counts": {str(i): c for i, c in enumerate(self.counts) if c}, "seconds": self.seconds}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Histogram:
        counts = [0.0] * _BUCKETS
        for index, count in data.get("counts", {}).items():
            counts[int(index)] = count
        return cls(counts, data.get("seconds", 0.0))


class BatchClock:
    """One batch's CPU seconds per stage, on the thread that runs it."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = dict.fromkeys(STAGES, 0.0)
        self._open: list[list[float]] = []  # per open stage: [started, seconds of stages nested in it]


@contextmanager
def batch_clock() -> Iterator[BatchClock]:
    """Time the stages this thread runs until the block ends (`timed`), into the clock it yields."""
    clock = BatchClock()
    previous = getattr(_local, "clock", None)
    _local.clock = clock
    try:
        yield clock
    finally:
        _local.clock = previous


@contextmanager
def timed(stage: str) -> Iterator[None]:
    """Count the thread's CPU time in the block to `stage` of the batch being timed (nothing outside one)."""
    clock: BatchClock | None = getattr(_local, "clock", None)
    if clock is None:
        yield
        return
    frame = [time.thread_time(), 0.0]
    clock._open.append(frame)
    try:
        yield
    finally:
        clock._open.pop()
        spent = time.thread_time() - frame[0]
        clock.seconds[stage] += spent - frame[1]
        if clock._open:
            clock._open[-1][1] += spent  # the enclosing stage does not count it again


class TimedCalibrator:
    """A calibrator whose `row` is timed as `calibration` (classify calls it for a row's confidences)."""

    def __init__(self, calibrator: Any) -> None:
        self._calibrator = calibrator

    def row(self, *args: Any, **kwargs: Any) -> Any:
        with timed("calibration"):
            return self._calibrator.row(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._calibrator, name)


def per_document(seconds: dict[str, float], documents: int) -> dict[str, float]:
    """A batch's seconds per stage as each document's share, with their `TOTAL`."""
    if documents <= 0:
        return {}
    shares = {stage: s / documents for stage, s in seconds.items()}
    shares[TOTAL] = sum(shares.values())
    return shares


class StageHistograms:
    """The documents' seconds per stage (and `TOTAL`), as histograms: the run's desk keeps one for all actors."""

    def __init__(self) -> None:
        self.by_stage: dict[str, Histogram] = {}

    def add(self, seconds: dict[str, float], documents: int) -> None:
        for stage, share in per_document(seconds, documents).items():
            self.by_stage.setdefault(stage, Histogram()).add(share, documents)

    def to_json(self) -> dict[str, Any]:
        return {stage: h.to_json() for stage, h in self.by_stage.items()}


def summarize(histograms: dict[str, Any]) -> dict[str, dict[str, float]]:
    """Per stage (and `TOTAL`): documents, mean, p50 and p99 CPU milliseconds per document, from
    `StageHistograms.to_json`."""
    out = {}
    for stage in (*STAGES, TOTAL):
        if stage not in histograms:
            continue
        h = Histogram.from_json(histograms[stage])
        out[stage] = {"documents": round(h.documents), "mean_ms": round(h.mean() * 1e3, 4),
                      "p50_ms": round(h.quantile(0.5) * 1e3, 4), "p99_ms": round(h.quantile(0.99) * 1e3, 4)}
    return out


def cores_per_gpu(summary: dict[str, dict[str, float]], documents_per_s: float) -> float | None:
    """CPU cores the actors' stages need to keep up with `documents_per_s` (an engine's rate on one GPU): the mean
    CPU seconds per document beside the engine, times the rate. None without figures."""
    total = summary.get(TOTAL)
    if not total or not total.get("documents"):
        return None
    return total["mean_ms"] / 1e3 * documents_per_s


def stage_lines(summary: dict[str, dict[str, float]], rates: tuple[float, ...] = (20.0, 50.0)) -> list[str]:
    """The summary's lines: p50/p99 ms per stage, and cores per GPU at each of `rates` documents/s."""
    if not summary:
        return []
    parts = [f"{stage} {v['p50_ms']:.3g}/{v['p99_ms']:.3g}" for stage, v in summary.items()
             if stage != TOTAL and v["mean_ms"] > 0]
    total = summary.get(TOTAL, {})
    lines = [f"CPU ms per document beside the engine, p50/p99: {', '.join(parts) or 'none'}; "
             f"total {total.get('p50_ms', 0):.3g}/{total.get('p99_ms', 0):.3g} (mean {total.get('mean_ms', 0):.3g})"]
    cores = [(rate, cores_per_gpu(summary, rate)) for rate in rates]
    shown = [f"{c:.2f} at {rate:g} documents/s" for rate, c in cores if c is not None]
    if shown:
        lines.append("cores per GPU (actor CPU beside the engine): " + ", ".join(shown))
    return lines
