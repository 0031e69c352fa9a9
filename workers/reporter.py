"""In an actor: the live counts it sends to the run's `RunDesk` (pipeline.stats), which the driver's display
polls. It lives under `workers/` because the actors use it, and `workers/` never imports `pipeline/`; the board
is found by its name (`board_name`), so this side needs nothing of the driver's."""

from __future__ import annotations

import threading
import time
from typing import Any

import ray

from workers.outcome import Col, Kind


class Reporter:
    """In an actor: counts finished requests (called on the engine thread, so it only adds under a lock) and
    sends them to the run's desk from a thread of its own, at most every `every_s` seconds."""

    def __init__(self, board: Any, actor: str, every_s: float = 0.5) -> None:
        self.board = board
        self.actor = actor
        self.every_s = every_s
        self._lock = threading.Lock()
        self._requests = 0
        self._tokens = 0
        self._step_tokens = 0
        self._windows = 0  # window requests planned since the last flush (sent with the requests, never after them)
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

    def windows_planned(self, n: int) -> None:
        """The extractor planned `n` window requests of a long document, before any of them goes to the engine.
        The board leaves them out of the finished requests it counts as documents: a windowed document counts
        once, when its batch is classified (`pipeline.progress.documents_done`)."""
        with self._lock:
            self._windows += n
        self._wake.set()

    def tokens(self, n: int) -> None:
        """The engine thread's per-step hook: `n` tokens were made in the step (any request, finished or not)."""
        with self._lock:
            self._step_tokens += n
        self._wake.set()

    def batch_done(self, table: Any) -> None:
        """A batch's outcomes, classified: counts by row/reason, and how many went through the engine."""
        kinds = table.column(Col.KIND).to_pylist()
        reasons = table.column(Col.REASON).to_pylist()
        finish = table.column(Col.FINISH_REASON).to_pylist()
        tokens = table.column(Col.OUTPUT_TOKENS).to_pylist()
        counts: dict[str, int] = {}
        for kind, reason in zip(kinds, reasons, strict=True):
            key = Kind.ROW.value if kind == Kind.ROW else str(reason)
            counts[key] = counts.get(key, 0) + 1
        windows = table.column(Col.WINDOWS).to_pylist() if Col.WINDOWS in table.column_names else [None] * len(finish)
        # Documents whose one request the engine answered; a windowed document's requests are counted apart
        # (`windows_planned`), so it is left out here.
        generated = sum(1 for f, w in zip(finish, windows, strict=True) if f not in (None, "refused") and (w or 1) == 1)
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
            windows, self._windows = self._windows, 0
            self._wake.clear()
        try:
            if step_tokens:
                self.board.tokens_made.remote(step_tokens, time.time())
            if n or windows:  # one call: the board never sees a window's request before the window was planned
                self.board.requests_done.remote(n, tokens, time.time(), windows)
        except Exception:  # noqa: BLE001 - the display is best effort; the run does not depend on it
            pass


def board_name(run_id: str) -> str:
    return f"extract-progress-{run_id}"


def reporter_for(run_id: str, actor: str) -> Reporter | None:
    """In an actor: a `Reporter` to the run's named `RunDesk`, or None when there is none (tests, tools)."""
    try:
        return Reporter(ray.get_actor(board_name(run_id)), actor)
    except Exception:  # noqa: BLE001 - no board: no live counts, the run goes on
        return None
