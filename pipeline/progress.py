"""A progress line on the driver: documents done, docs/s and the dead-letter rate."""

from __future__ import annotations

import sys
import time
from typing import TextIO

import structlog

log = structlog.get_logger(__name__)


class Progress:
    def __init__(self, total: int, name: str, stream: TextIO | None = None, every_seconds: float = 10.0) -> None:
        self.total = total
        self.name = name
        self.stream = stream or sys.stderr
        self.live = self.stream.isatty()
        self.every = every_seconds
        self.started = time.perf_counter()
        self.first_output_s: float | None = None
        self.marks: dict[str, float] = {}  # the first time each named event happened, seconds from the start
        self._last = 0.0
        self.done = 0
        self.dead = 0

    def mark(self, name: str) -> None:
        self.marks.setdefault(name, round(time.perf_counter() - self.started, 3))

    def update(self, done: int, dead: int) -> None:
        now = time.perf_counter()
        if self.first_output_s is None and done:
            self.first_output_s = now - self.started
        self.done, self.dead = done, dead
        if self.live:
            self.stream.write("\r" + self.line() + " " * 4)
            self.stream.flush()
        elif now - self._last >= self.every or done >= self.total:
            self._last = now
            log.info("progress", job=self.name, done=done, total=self.total, docs_per_s=round(self.rate(), 2),
                     dead_letter_rate=round(self.dead_rate(), 3))

    def rate(self) -> float:
        elapsed = time.perf_counter() - self.started
        return self.done / elapsed if elapsed > 0 else 0.0

    def dead_rate(self) -> float:
        return self.dead / self.done if self.done else 0.0

    def line(self) -> str:
        pct = 100.0 * self.done / self.total if self.total else 100.0
        return (f"[{self.name}] {self.done}/{self.total} docs ({pct:.0f}%) · {self.rate():.2f} docs/s · "
                f"dead letters {100 * self.dead_rate():.1f}%")

    def close(self) -> None:
        if self.live:
            self.stream.write("\n")
            self.stream.flush()
