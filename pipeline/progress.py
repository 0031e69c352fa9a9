"""The run's live display on the driver: stages (starting Ray → loading the model → compiling schemas →
generating), then documents done of total, docs/s, output tokens/s, dead letters by reason and an ETA.

Counts come from the actors as engine steps, requests and batches finish (the run's `pipeline.stats.RunDesk`),
polled by a thread here, so the display moves from the engine's first step: tokens/s at once, documents as
each request finishes, long before a unit's outcomes reach the driver. On a terminal the display
is a `rich.progress` panel; elsewhere (a pipe, `ray job logs`) it is a log line per stage and every
`every_seconds`.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from typing import Any, TextIO

import structlog

from workers import logs
from workers.outcome import Col, Kind

log = structlog.get_logger(__name__)

STAGES = ("starting Ray", "loading model", "compiling schemas", "generating")


def documents_done(snapshot: dict[str, Any]) -> int:
    """Classified documents, plus requests the engine finished whose batch is not classified yet. A long document's
    window requests are not documents: every window planned is taken off the finished requests (finished or not),
    so a windowed document counts once, when its batch is classified with its merged outcome, and never before."""
    classified = sum(snapshot.get("outcomes", {}).values())
    unclassified = (snapshot.get("requests", 0) - snapshot.get("classified_generated", 0)
                    - snapshot.get("window_requests", 0))
    return classified + max(0, unclassified)


class FailFastError(RuntimeError):
    """The run's first N outcomes were all dead letters (`--fail-fast-after N`)."""


class FailFast:
    """Watches outcomes in the order the driver sees them; raises once the first `n` are all dead letters."""

    def __init__(self, n: int | None) -> None:
        self.n = n
        self.seen = 0
        self.reasons: dict[str, int] = {}
        self.armed = bool(n and n > 0)

    def see(self, kinds: list[str], reasons: list[str | None]) -> None:
        if not self.armed or self.n is None:
            return
        for kind, reason in zip(kinds, reasons, strict=True):
            if kind == Kind.ROW:
                self.armed = False  # a row among the first N: the prompt works
                return
            self.seen += 1
            self.reasons[str(reason)] = self.reasons.get(str(reason), 0) + 1
            if self.seen >= self.n:
                top = ", ".join(f"{r} {c}" for r, c in sorted(self.reasons.items(), key=lambda kv: -kv[1]))
                raise FailFastError(f"--fail-fast-after {self.n}: the first {self.seen} outcomes were all dead "
                                    f"letters ({top}); stopped early, staged units are kept")


def rate_text(classified: int, dead: dict[str, int]) -> str:
    """Dead letters as a share of the classified documents (rows and dead letters), by reason, commonest first."""
    classified = max(classified, sum(dead.values()))
    if not classified or not dead:
        return "dead letters 0%"
    parts = [f"{reason} {100 * n / classified:.0f}%" for reason, n in sorted(dead.items(), key=lambda kv: -kv[1])]
    return f"dead letters {100 * sum(dead.values()) / classified:.0f}% (" + ", ".join(parts[:3]) + ")"


def clock(seconds: float | None) -> str | None:
    """Seconds as H:MM:SS (rich's ETA format), None for None."""
    if seconds is None:
        return None
    whole = int(round(seconds))
    return f"{whole // 3600}:{whole // 60 % 60:02d}:{whole % 60:02d}"


class Rates:
    """Documents done over time, for the log lines a pipe shows: the steady rate, from the first documents done to
    now (the start-up before them left out), and the rate of the last `window_s`. Holds one sample per
    `every_s` at most within the window: a bounded deque, however long the run."""

    def __init__(self, window_s: float = 60.0, every_s: float = 1.0) -> None:
        self.window = window_s
        self.every = every_s
        self.first: tuple[float, int] | None = None  # (when, done) the first documents were done
        self.samples: deque[tuple[float, int]] = deque()

    def add(self, now: float, done: int) -> None:
        if done and self.first is None:
            self.first = (now, done)
        if not self.samples or now - self.samples[-1][0] >= self.every:
            self.samples.append((now, done))
        while len(self.samples) > 2 and now - self.samples[1][0] >= self.window:
            self.samples.popleft()  # the oldest kept is the last at or before the window's start

    def steady(self, now: float, done: int) -> float | None:
        """Documents per second since the first were done; None until a second has passed and more were done."""
        if self.first is None or now - self.first[0] < 1.0 or done <= self.first[1]:
            return None
        return (done - self.first[1]) / (now - self.first[0])

    def recent(self, now: float, done: int) -> float | None:
        """Documents per second over the last `window_s` (over what there is of it early in a run)."""
        if not self.samples or now - self.samples[0][0] < 1.0:
            return None
        return (done - self.samples[0][1]) / (now - self.samples[0][0])

    def eta_s(self, now: float, done: int, total: int) -> float | None:
        """Seconds left at the steady rate: 0 once every document is done, None before the rate is known."""
        if total and done >= total:
            return 0.0
        rate = self.steady(now, done)
        return (total - done) / rate if rate else None


class Progress:
    def __init__(self, total: int, name: str, stream: TextIO | None = None, every_seconds: float = 10.0,
                 live: bool | None = None, fail_fast_after: int | None = None) -> None:
        self.total = total
        self.name = name
        self.stream = stream or logs.terminal()
        self.live = (self.stream.isatty() and not logs.json_mode()) if live is None else live  # JSON: lines only
        self.every = every_seconds
        self.started = time.perf_counter()
        self.started_unix = time.time()
        self.first_output_s: float | None = None
        self.marks: dict[str, float] = {}  # the first time each named event happened, seconds from the start
        self._last = 0.0
        self.done = 0  # documents whose outcomes reached the driver
        self.dead = 0
        self.reasons: dict[str, int] = {}  # the driver's dead letters by reason
        self.stage_name: str | None = None
        self.board: Any = None
        self.counts: dict[str, Any] = {}  # the board's latest snapshot
        self._stop = threading.Event()
        self._poller: threading.Thread | None = None
        self._rich: Any = None
        self._task: Any = None
        self.fail_fast = FailFast(fail_fast_after)
        self.rates = Rates()

    # -- the driver's side -------------------------------------------------------------------------------

    def mark(self, name: str) -> None:
        self.marks.setdefault(name, round(time.perf_counter() - self.started, 3))

    def stage(self, name: str) -> None:
        """The run moved to stage `name` (one of `STAGES`)."""
        if name == self.stage_name:
            return
        self.stage_name = name
        self.mark("stage." + name.replace(" ", "_") + "_s")
        if self.live and self._rich is None:
            self._start_rich()
        if self._rich is not None:
            self._rich.update(self._task, description=f"[bold]{self.name}[/bold] · {name}")
        else:
            log.info("stage", job=self.name, stage=name, seconds=round(time.perf_counter() - self.started, 1))

    def watch(self, board: Any, poll_s: float = 0.5) -> None:
        """Poll the run's `RunDesk` from a thread until `close`: every `poll_s`, or, with no live display
        once the first documents are done (its first marks taken), every `_quiet_poll_s` (each poll is a
        `ray.get`, about 1.3 ms of the driver's CPU, whatever the throughput)."""
        self.board = board
        self._poller = threading.Thread(target=self._poll, args=(poll_s,), name="progress-poll", daemon=True)
        self._poller.start()

    def see(self, batch: Any) -> None:
        """An outcome batch reached the driver: its dead letters are counted by reason, and `--fail-fast-after`
        looks at its outcomes in order."""
        import pyarrow.compute as pc

        kind = batch.column(Col.KIND)
        dead = pc.not_equal(kind, Kind.ROW.value).fill_null(True)  # a null kind is not a row (as `!=` said)
        if pc.any(dead).as_py():
            for entry in pc.value_counts(batch.column(Col.REASON).filter(dead)).to_pylist():
                reason = str(entry["values"])
                self.reasons[reason] = self.reasons.get(reason, 0) + entry["counts"]
        if self.fail_fast.armed:
            self.fail_fast.see(kind.to_pylist(), batch.column(Col.REASON).to_pylist())

    def update(self, done: int, dead: int) -> None:
        """Outcomes that reached the driver (per unit/batch): never less than what the display shows."""
        if self.first_output_s is None and done:
            self.first_output_s = time.perf_counter() - self.started
        self.done, self.dead = done, dead
        self._show()

    # -- counts ------------------------------------------------------------------------------------------

    def documents(self) -> int:
        return max(self.done, min(self.total, documents_done(self.counts))) if self.counts else self.done

    def _from_driver(self) -> bool:
        """Whether the driver's outcome counts are the ones to show: once it has seen as many as the board (which
        the actors update on their own schedule, and which counts a batch redone after an actor restart twice),
        and always once every document reached it. So the last lines agree with the run's summary."""
        board = sum(self.counts.get("outcomes", {}).values())
        return bool(self.done) and (self.done >= board or self.done >= self.total)

    def classified(self) -> int:
        """Documents with an outcome (rows and dead letters), from the same source as `dead_by_reason`."""
        return self.done if self._from_driver() else sum(self.counts.get("outcomes", {}).values())

    def dead_by_reason(self) -> dict[str, int]:
        if self._from_driver():
            return dict(self.reasons) if sum(self.reasons.values()) == self.dead else {"dead_letter": self.dead}
        return {k: v for k, v in self.counts.get("outcomes", {}).items() if k != Kind.ROW}

    def rate(self) -> float:
        elapsed = time.perf_counter() - self._generating_since()
        return self.documents() / elapsed if elapsed > 0 else 0.0

    def tokens_rate(self) -> float:
        elapsed = time.perf_counter() - self._generating_since()
        return self.counts.get("output_tokens", 0) / elapsed if elapsed > 0 else 0.0

    def dead_rate(self) -> float:
        classified = self.classified()
        return sum(self.dead_by_reason().values()) / classified if classified else 0.0

    def _generating_since(self) -> float:
        mark = self.marks.get("stage.generating_s")
        return self.started + mark if mark is not None else self.started

    def line(self) -> str:
        done = self.documents()
        pct = 100.0 * done / self.total if self.total else 100.0
        return (f"[{self.name}] {done}/{self.total} docs ({pct:.0f}%) · {self.rate():.2f} docs/s · "
                f"{self.tokens_rate():.0f} tok/s · {rate_text(self.classified(), self.dead_by_reason())}")

    # -- polling and showing -----------------------------------------------------------------------------

    def _poll(self, poll_s: float) -> None:
        import ray
        from ray.exceptions import GetTimeoutError

        while not self._stop.wait(self._quiet_poll_s(poll_s)):
            try:
                snapshot = ray.get(self.board.snapshot.remote(), timeout=10)
            except GetTimeoutError:
                continue  # a loaded machine: ask again
            except Exception:  # noqa: BLE001 - the board went away (run ending): the display just stops
                return
            self._take(snapshot)

    def _quiet_poll_s(self, poll_s: float) -> float:
        """`poll_s` while a live display shows the counts or until the first documents are done; then a quarter
        of the log line's interval (`every`, 10 s: 2.5 s), 2 s at most, so each line is at most that old."""
        if self.live or "first_document_s" not in self.marks:
            return poll_s
        return max(poll_s, min(self.every / 4, 2.0))

    def _take(self, snapshot: dict[str, Any]) -> None:
        self.counts = snapshot
        stages = [s for s, _ in snapshot.get("stages", {}).values()]
        if documents_done(snapshot) or "ready" in stages:
            self.stage("generating")
        elif "compiling schemas" in stages:
            self.stage("compiling schemas")
        elif "loading model" in stages:
            self.stage("loading model")
        if (documents_done(snapshot) or snapshot.get("output_tokens")) and "first_progress_s" not in self.marks:
            # The first counts on screen: the engines' tokens (counted per step) or finished documents.
            firsts = [u for u in (snapshot.get("first_tokens_unix"), snapshot.get("first_count_unix")) if u]
            self.mark("first_progress_s")
            if firsts:
                self.marks["first_count_s"] = round(min(firsts) - self.started_unix, 3)  # when an actor sent them
        if documents_done(snapshot) and "first_document_s" not in self.marks:
            self.mark("first_document_s")  # the first finished documents on screen
        self._show()

    def _show(self) -> None:
        now = time.perf_counter()
        done = self.documents()
        if self._rich is not None:
            self._rich.update(self._task, completed=done, total=self.total or None,
                              stats=f"{self.rate():.2f} docs/s over generation only · {self.tokens_rate():.0f} tok/s",
                              dead=rate_text(self.classified(), self.dead_by_reason()))
        else:
            self.rates.add(now, done)
            if (done or self.counts.get("output_tokens")) and (now - self._last >= self.every or done >= self.total
                                                               or self._last == 0.0):
                self._last = now
                self._log_line(now, done)

    def _log_line(self, now: float, done: int) -> None:
        """The `progress` line of a pipe or `ray job logs`: the whole run's docs/s beside the last minute's, and the
        ETA at the steady rate (seconds, and as H:MM:SS)."""
        recent = self.rates.recent(now, done)
        eta = self.rates.eta_s(now, done, self.total)
        log.info("progress", job=self.name, done=done, total=self.total, docs_per_s=round(self.rate(), 2),
                 docs_per_s_last_min=round(recent, 2) if recent is not None else None,
                 eta_s=round(eta) if eta is not None else None, eta=clock(eta),
                 output_tokens_per_s=round(self.tokens_rate(), 1),
                 dead_letter_rate=round(self.dead_rate(), 3), dead_letters=self.dead_by_reason())

    def _start_rich(self) -> None:
        self._rich = live_display(self.stream)
        self._task = self._rich.add_task(f"[bold]{self.name}[/bold] · starting", total=self.total or None,
                                         stats="", dead="")
        self._rich.start()

    def close(self) -> None:
        self._stop.set()
        if self._poller is not None:
            self._poller.join(timeout=2)
        if self.board is not None:
            try:
                import ray

                self._take(ray.get(self.board.snapshot.remote(), timeout=5))
            except Exception:  # noqa: BLE001 - best effort: the last counts
                pass
        if self._rich is not None:
            self._rich.stop()
            self._rich = None


def live_display(stream: TextIO, width: int | None = None) -> Any:
    """The terminal's display: a `rich.progress` panel of two lines per run, so that it fits 80 columns.

        ⠋ invoices · generating ━━━━━━━━━━━━━━━━━━━━     12/52 docs · 0:01:10 · ETA 0:03:40
          0.42 docs/s · 85 tok/s · dead letters 40% (semantic_invalid 30%, truncated 10%)
    """
    from rich.console import Console, Group
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        SpinnerColumn,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )
    from rich.progress import Progress as RichProgress
    from rich.text import Text

    class TwoLines(RichProgress):
        def get_renderables(self) -> Any:
            rows: list[Any] = [self.make_tasks_table(self.tasks)]
            for task in self.tasks:
                stats = " · ".join(str(part) for part in (task.fields.get("stats"), task.fields.get("dead")) if part)
                if stats:
                    rows.append(Text("  " + stats, overflow="ellipsis", no_wrap=True))
            yield Group(*rows)

    return TwoLines(
        SpinnerColumn(), TextColumn("{task.description}"), BarColumn(bar_width=None), MofNCompleteColumn(),
        TextColumn("docs ·"), TimeElapsedColumn(), TextColumn("· ETA"), TimeRemainingColumn(),
        console=Console(file=stream, width=width), transient=False, refresh_per_second=4,
        redirect_stdout=True, redirect_stderr=True, expand=False,
    )
