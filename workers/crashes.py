"""Poison documents: a document that kills its actor's process is isolated and dead-lettered `actor_crash`, and the
rest of its batch commits.

When an extraction actor's process dies (a segfault, the OOM killer, a user validator calling `os._exit`), Ray
restarts the actor and runs again every batch it held (`workers.max_restarts`). Without more, a document that
kills the process every time fails its batch on every restart until the restarts run out, and the run fails.

The `Journal` (kept by the run's one small bookkeeping actor, `pipeline.stats.RunDesk`, owned by the driver, so it
outlives any extraction actor) records
which batch each actor is working on, and which single document, when it works on one alone:

1. A batch starts with `begin(key)`, ends with `end(key)`. A batch that begins while an earlier attempt of it is
   still open was in flight when its actor died: that is one crash for the batch.
2. A batch that has crashed before is *isolated*: its actor runs no other batch meanwhile (`Gate`, exclusive;
   an attempt opens only once its batch has passed the gate, so a batch still waiting at a crash is not
   blamed), and it works through the batch's documents one at a time, recording each one as `alone` before it
   starts it and clearing it once done.
3. So a crash during an isolated batch names the one document that was in flight, alone in its process. On the
   next attempt that document becomes an `actor_crash` dead letter, with what is known of the crash; the batch's
   other documents are extracted one by one as before and commit.

A poison document so costs two crashes (two of `workers.max_restarts`): one with its batch, one alone. The
batch's key is a digest of its unit and document ids, which is the same for the block Ray runs again.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pyarrow as pa

from workers.classify import Outcome


def batch_key(batch: pa.Table, id_column: str, unit_column: str | None) -> str:
    """A batch's identity, the same when Ray runs the same block again: its unit(s) and document ids, in order."""
    units = batch.column(unit_column).to_pylist() if unit_column and unit_column in batch.column_names else []
    ids = batch.column(id_column).to_pylist()
    text = json.dumps([sorted(set(map(str, units))), [str(i) for i in ids]], ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:32]


class Journal:
    """Which batches and documents were in flight, for every extraction actor of a run (module docstring); it runs
    in the run's `RunDesk` Ray actor."""

    def __init__(self) -> None:
        self.open: dict[str, dict[str, Any]] = {}  # batch key → the attempt in flight: actor, started, alone doc
        self.crashes: dict[str, int] = {}  # batch key → attempts that never ended (their actor died)
        self.poison: dict[str, dict[int, dict[str, Any]]] = {}  # batch key → row → what was known at its crash

    def begin(self, key: str, actor: str) -> tuple[int, dict[int, dict[str, Any]]]:
        """Start an attempt of batch `key`: how often it crashed before, and its rows that crashed alone."""
        previous = self.open.pop(key, None)
        if previous is not None:  # the last attempt never ended: its actor's process died with it in flight
            self.crashes[key] = self.crashes.get(key, 0) + 1
            if previous.get("alone") is not None:
                row, info = previous["alone"]
                self.poison.setdefault(key, {})[row] = {**info, "actor": previous["actor"],
                                                        "crashes": self.crashes[key]}
        self.open[key] = {"actor": actor, "started_unix": time.time(), "alone": None}
        return self.crashes.get(key, 0), dict(self.poison.get(key, {}))

    def suspect(self, key: str) -> bool:
        """Whether batch `key` will be isolated when it begins: it crashed before, or an attempt is still open."""
        return key in self.open or self.crashes.get(key, 0) > 0

    def alone(self, key: str, row: int | None, info: dict[str, Any] | None = None) -> None:
        """The isolated batch `key` now works on its row `row` alone (None: on none)."""
        if key in self.open:
            self.open[key]["alone"] = None if row is None else (row, dict(info or {}))

    def end(self, key: str) -> None:
        self.open.pop(key, None)

    def summary(self) -> dict[str, Any]:
        return {"crashed_batches": len(self.crashes), "poison": sum(len(p) for p in self.poison.values())}


class Gate:
    """Shared for ordinary batches, exclusive for an isolated one: while an isolated batch runs, nothing else runs
    in the actor, so a crash then is that batch's one document's. A waiting exclusive holder goes first."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._shared = 0
        self._exclusive = False
        self._waiting = 0

    @contextmanager
    def shared(self) -> Iterator[None]:
        with self._cond:
            self._cond.wait_for(lambda: not self._exclusive and not self._waiting)
            self._shared += 1
        try:
            yield
        finally:
            with self._cond:
                self._shared -= 1
                self._cond.notify_all()

    @contextmanager
    def exclusive(self) -> Iterator[None]:
        with self._cond:
            self._waiting += 1
            self._cond.wait_for(lambda: not self._exclusive and self._shared == 0)
            self._waiting -= 1
            self._exclusive = True
        try:
            yield
        finally:
            with self._cond:
                self._exclusive = False
                self._cond.notify_all()


def crash_outcome(info: dict[str, Any]) -> Outcome:
    """The `actor_crash` dead letter of a document that was alone in its actor's process when it died."""
    details = {k: v for k, v in info.items() if v is not None}
    stage = f", while {info['stage']}" if info.get("stage") else ""
    message = ("the extraction actor's process died twice with this document in flight, the second time with no "
               f"other document in the process (actor {info.get('actor')}{stage}; a crash, the OOM killer or an "
               "exit in code the document ran: the driver's log has Ray's reason); dead-lettered so that the rest "
               "of its batch commits")
    return Outcome(reason="actor_crash", error={"message": message, **details})
