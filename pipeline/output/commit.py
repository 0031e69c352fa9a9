"""Staging and committing partitions: one commit point per partition, for both tables.

During a run each finished batch is staged by its actor as a slice, a Parquet file of raw outcomes under
`_staging/<partition>/<output_hash>/` (`pipeline.output.slices`; a run split across two backends stages each unit
as one file there instead). When every unit of a partition is staged, the partition is committed:
0. `begin_commit()` records the commit id under `_staging/<partition>/_commits/` before any file is written,
   so a sweep knows the files as this output's own;
1. the outcomes are compacted, unit by unit, each from its file or from the slices that cover its rows exactly once,
   into `rows/<key>/part-<commit_id>.parquet` and
   `dead_letters/<key>/part-<commit_id>.parquet`, names no other commit uses (each written whole under a
   hidden name, fsynced, then renamed locally or copied on S3, so no reader ever sees half a file); their
   sizes and blake2b hashes go into the manifest;
2. `publish()` writes the partition manifest naming both files (relative to the output root), stamped with
   the lease generation the writer just confirmed with the store; a manifest already published by a newer
   generation is never overwritten (`LeaseLostError`). That single write (a rename locally, one PUT on S3)
   is the commit point: before it readers see the old state, after it the new one, both tables together;
3. `sweep()` deletes the partition's data files of the superseded commit and of recorded commits that died
   before their manifest, then the staging. It deletes nothing else: no file whose name does not carry one of
   those commit ids, nothing through a symbolic link.

A partition committed by a limited run (`input.limit`, `--limit`) is marked incomplete; the next run without
the limit (or with a larger one) reads only the documents after the committed ones and its commit carries
the committed rows and dead letters over into its own two files: every document is committed once.

A process killed at any step leaves the old manifest naming the old files, or the new one naming the new
files; the next commit of the partition (a run or a retry) sweeps what the dead one left.
Staging under another output hash (the model, prompt or schema changed) is deleted, never reused.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections import Counter, deque
from collections.abc import Callable, Iterator
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import structlog

from pipeline.config import ConfigError
from pipeline.output.layout import OutputLayout
from pipeline.output.links import refuse_links
from pipeline.output.manifest import AccountingError, PartitionManifest, read_manifest
from pipeline.output.slices import Slice, covers, parse_slice, read_slice, slice_name, stamp, unit_file_id
from pipeline.output.tables import RecordTables
from pipeline.output.transaction import Commit, Hook, begin_commit, file_facts, new_commit_id, publish, sweep
from pipeline.partition import Partition
from pipeline.storage import Storage, StorageError, join, os_error
from pipeline.units import PartitionInput, Unit
from schemas.contract import SchemaContract
from workers.outcome import Col, DeadCol

log = structlog.get_logger(__name__)

SLICE_READERS = 8  # staged files a commit reads at once (threads: the reads release the GIL)
READ_AHEAD = 2 * SLICE_READERS  # staged files read ahead of the unit being written
READ_AHEAD_ROWS = 16_384  # and the outcomes they hold, at most (a slice holds a batch: 32 or 10,000 documents)

__all__ = ["ChangedJobError", "Commit", "Hook", "PartitionCommitter", "PartitionResult", "begin_commit", "changes",
           "check_unchanged", "file_facts", "more_selected", "new_commit_id", "output_parts", "publish", "skip_note",
           "sweep"]

def output_parts(decisive: dict[str, Any]) -> dict[str, str]:
    """Each setting that decides the output (model keys one by one), hashed: what `changes()` compares."""
    flat: dict[str, Any] = {}
    for key, value in decisive.items():
        if key == "model" and isinstance(value, dict):
            flat.update({f"model.{k}": v for k, v in value.items()})
        else:
            flat[key] = value
    return {k: hashlib.sha256(json.dumps(v, sort_keys=True, default=str).encode()).hexdigest()[:12]
            for k, v in sorted(flat.items())}


def changes(old: dict[str, str], new: dict[str, str]) -> list[str]:
    """The settings whose hashes differ (empty when the old manifest did not record them)."""
    if not old:
        return []
    return sorted(k for k in set(old) | set(new) if old.get(k) != new.get(k))


@dataclass
class PartitionResult:
    partition: str
    status: str  # committed | skipped | failed
    input_rows: int = 0
    rows: int = 0
    dead_letters: int = 0
    dead_letters_by_reason: dict[str, int] = field(default_factory=dict)
    units: int = 0
    units_resumed: int = 0
    seconds: float = 0.0
    error: str | None = None
    tokens: dict[str, int] = field(default_factory=dict)


ROW_GROUP_ROWS = 65_536  # rows gathered into a row group of a committed file (a few more at times; the last fewer)
ROW_GROUP_BYTES = 8 << 20  # or fewer rows, once they take this much memory (the driver holds them)
SPLIT_ROWS = 4_096  # staged outcomes gathered before they are split into the two tables


class RowGroups:
    """A committed file's writer that gathers what it is given into row groups of `ROW_GROUP_ROWS` rows (fewer once
    they hold `ROW_GROUP_BYTES`). A unit's outcomes come in slices of one batch each: written as they came, a row
    group a slice, 10,000 rows took 313 row groups and half the file was its footer."""

    def __init__(self, writer: pq.ParquetWriter) -> None:
        self.writer = writer
        self.pending: list[pa.Table] = []
        self.rows = 0
        self.bytes = 0

    def write_table(self, table: pa.Table) -> None:
        self.pending.append(table)
        self.rows += table.num_rows
        self.bytes += table.nbytes
        if self.rows >= ROW_GROUP_ROWS or self.bytes >= ROW_GROUP_BYTES:
            self.flush()

    def flush(self) -> None:
        """Write what is gathered, as one row group (pyarrow cuts a larger table at its own limit, 1Mi rows)."""
        if self.pending:
            self.writer.write_table(pa.concat_tables(self.pending))
        self.pending, self.rows, self.bytes = [], 0, 0

    def close(self) -> None:
        """Close the file; what `flush` was not asked to write is dropped (a commit that failed)."""
        self.pending = []
        self.writer.close()


@dataclass
class _Tally:
    """What a commit wrote so far: rows, dead letters by reason, tokens."""

    rows: int = 0
    dead: int = 0
    reasons: Counter[str] = field(default_factory=Counter)
    tokens: Counter[str] = field(default_factory=Counter)

    def add(self, typed: pa.Table, letters: pa.Table, writers: list[RowGroups],
            staged: pa.Table | None = None) -> None:
        """Write `typed` rows and dead `letters` (empty tables are not written); count them, and the tokens of the
        `staged` outcomes they came from (a carried commit's are its manifest's)."""
        if typed.num_rows:
            writers[0].write_table(typed)
        if letters.num_rows:
            writers[1].write_table(letters)
        self.rows += typed.num_rows
        self.dead += letters.num_rows
        if staged is not None:
            self.reasons.update(letters.column(DeadCol.REASON).to_pylist())
            self.tokens["prompt"] += pc.sum(staged.column(Col.PROMPT_TOKENS)).as_py() or 0
            self.tokens["output"] += pc.sum(staged.column(Col.OUTPUT_TOKENS)).as_py() or 0

    def add_outcomes(self, pieces: list[pa.Table], tables: RecordTables, writers: list[RowGroups]) -> None:
        """Staged outcome tables, split into typed rows and dead letters together (a split has a cost of its own
        per call: a slice at a time, it was three quarters of a commit), written and counted."""
        if pieces:
            staged = pa.concat_tables([tables.typed(p) for p in pieces], promote_options="default").combine_chunks()
            self.add(*tables.split(staged), writers, staged)


class PartitionCommitter:
    def __init__(self, storage: Storage, layout: OutputLayout, contract: SchemaContract,
                 model_name: str, output_hash: str, run_id: str, parts: dict[str, str] | None = None,
                 hook: Hook | None = None, guard: Callable[[], int | None] | None = None) -> None:
        self.storage = storage
        self.layout = layout
        self.contract = contract
        self.model_name = model_name
        self.output_hash = output_hash
        self.run_id = run_id
        self.parts = parts or {}
        self.hook = hook
        # Confirms with the store that this writer still holds the output's lease and returns its generation (or
        # raises `LeaseLostError`): then nothing is published.
        self.guard = guard

    def committed(self, p: Partition) -> PartitionManifest | None:
        return read_manifest(self.storage, self.layout, p)

    def _step(self, name: str) -> None:
        if self.hook:
            self.hook(name)

    def _unit_file(self, p: Partition, unit_id: str) -> str:
        return join(self.layout.staging(p, self.output_hash), f"unit-{unit_id}.parquet")

    def prepare(self, p: Partition, fresh: bool) -> tuple[set[str], list[Slice]]:
        """Delete staging that cannot be reused; return the unit ids already staged for this output, and the
        slices its actors staged (`pipeline.output.slices`), from the same listing. The records of begun commits
        stay: the next sweep needs them."""
        refuse_links(self.layout.root, self.layout.staging_root(p), write=True)
        current = self.layout.staging(p, self.output_hash) + "/"
        commits = self.layout.commits_root(p) + "/"
        staged = set()
        slices = []
        for path in self.storage.list_files(self.layout.staging_root(p)):
            name = path.rsplit("/", 1)[-1]
            if path.startswith(commits):
                continue
            if fresh or not path.startswith(current):
                self.storage.delete(path)
            elif (unit_id := unit_file_id(name)) is not None:
                staged.add(unit_id)
            elif (found := parse_slice(path)) is not None:
                slices.append(found)
        return staged, slices

    def slice_path(self, p: Partition, unit_id: str, start: int, stop: int) -> str:
        """Where an actor stages rows `start` to `stop` of a unit (`pipeline.output.slices`)."""
        return join(self.layout.staging(p, self.output_hash), slice_name(unit_id, start, stop))

    def discard_staging(self, p: Partition) -> None:
        refuse_links(self.layout.root, self.layout.staging_root(p), write=True)
        self.storage.delete_prefix(self.layout.staging_root(p))

    def stage(self, p: Partition, unit_id: str, outcomes: pa.Table | list[pa.Table]) -> None:
        """Stage a unit's outcomes (a table, or its pieces). A piece from a slice carries its run's id already
        (`pipeline.output.slices`); the others get this run's."""
        pieces = outcomes if isinstance(outcomes, list) else [outcomes]
        outcomes = pa.concat_tables([stamp(piece, self.run_id) for piece in pieces])
        path = self._unit_file(p, unit_id)
        refuse_links(self.layout.root, path, write=True)
        with self.storage.atomic_output(path, self.layout.scratch(p)) as target:
            pq.write_table(outcomes, self.storage.arrow_path(target), filesystem=self.storage.arrow_fs())

    def carried(self, pinput: PartitionInput) -> PartitionManifest | None:
        """The incomplete commit whose documents this run's units continue (`pinput.offset` > 0), checked: it
        must hold exactly the first `offset` documents of the same input files."""
        if not pinput.offset:
            return None
        p = pinput.partition
        prior = read_manifest(self.storage, self.layout, p)
        if prior is None or prior.complete or prior.input_rows != pinput.offset or \
                (prior.input_fingerprint and prior.input_fingerprint != pinput.fingerprint):
            raise AccountingError(f"partition {p.label}: planned to continue a limited commit of {pinput.offset} "
                                  "documents, but the committed manifest is no longer that commit; rerun")
        return prior

    def commit(self, pinput: PartitionInput, started: float, resumed_units: int,
               slices: dict[str, list[Slice]] | None = None) -> PartitionResult:
        """Compact the staged units (after the rows a limited commit carries over) into this commit's two files,
        publish them with one manifest write, then delete what the manifest no longer names. A unit in `slices` is
        read from those slices, which must cover its rows exactly once; any other from its unit file. An OS error of
        the store is a `StorageError` naming the partition and the cause."""
        try:
            return self._commit(pinput, started, resumed_units, slices or {})
        except OSError as exc:
            raise StorageError(f"commit of partition {pinput.partition.label} to {self.layout.root} failed: "
                               f"{exc.strerror or exc}" + (f" ({exc.filename})" if exc.filename else "")) from None

    def _commit(self, pinput: PartitionInput, started: float, resumed_units: int,
                slices: dict[str, list[Slice]]) -> PartitionResult:
        p = pinput.partition
        carried = self.carried(pinput)
        commit = Commit(self.storage, self.layout, p, self.run_id, self.guard, self.hook)
        tally = self._compact(pinput, commit, carried, slices)
        result = PartitionResult(
            partition=p.label, status="committed", input_rows=pinput.selected_rows, rows=tally.rows,
            dead_letters=tally.dead, dead_letters_by_reason=dict(sorted(tally.reasons.items())),
            units=len(pinput.units), units_resumed=resumed_units, seconds=round(time.perf_counter() - started, 3),
            tokens=dict(tally.tokens),
        )
        manifest = PartitionManifest(
            partition=p.label, run_id=self.run_id, commit_id=commit.id, files=commit.named,
            input_rows=result.input_rows, rows=result.rows, dead_letters=result.dead_letters,
            output_hash=self.output_hash, committed_at=datetime.now(timezone.utc).isoformat(), input_uri=p.input_uri,
            input_files=pinput.files, input_fingerprint=getattr(pinput, "fingerprint", None),
            schema={"name": self.contract.name, "version": self.contract.version, "hash": self.contract.hash},
            model=self.model_name, output_parts=self.parts, dead_letters_by_reason=result.dead_letters_by_reason,
            units=result.units, units_resumed=resumed_units, seconds=result.seconds, tokens=result.tokens,
            input_total_rows=pinput.total_rows, limit=pinput.limit,
            complete=pinput.complete, retries=list(carried.retries) if carried else [],
        )
        commit.publish(manifest)
        self.discard_staging(p)
        self._step("staging_discarded")
        log.info("partition.committed", partition=p.label, rows=result.rows, dead_letters=result.dead_letters,
                 commit_id=commit.id, complete=manifest.complete, carried=carried.input_rows if carried else 0)
        return result

    def _compact(self, pinput: PartitionInput, commit: Commit, carried: PartitionManifest | None = None,
                 slices: dict[str, list[Slice]] | None = None) -> _Tally:
        """Write the carried commit's rows and dead letters, then the staged units', to the commit's two files;
        check rows + dead == the documents selected."""
        slices = slices or {}
        p = pinput.partition
        fs = self.storage.arrow_fs()
        tables = RecordTables(self.contract, pinput.schema.field(pinput.id_column), self.run_id, self.model_name)
        tally = _Tally()
        named = " or ".join(commit.paths.values())
        # Slices are read side by side, and ahead of the unit being written: on S3 each is a request.
        with commit.files() as targets, ThreadPoolExecutor(max_workers=SLICE_READERS) as pool:
            writers: list[RowGroups] = []
            try:
                for kind, schema in (("rows", tables.rows_schema), ("dead_letters", tables.dead_schema)):
                    writers.append(RowGroups(pq.ParquetWriter(self.storage.arrow_path(targets[kind]), schema,
                                                              filesystem=fs, compression="zstd")))
                if carried is not None:
                    tally.add(*self._carry(carried, tables), writers)
                    tally.reasons.update(carried.dead_letters_by_reason)
                    tally.tokens.update(carried.tokens)
                gathered: list[pa.Table] = []  # split a few thousand outcomes at a time, not a slice at a time
                for pieces in self._staged(p, pinput.units, slices, pool):
                    gathered += pieces
                    if sum(t.num_rows for t in gathered) >= SPLIT_ROWS:
                        tally.add_outcomes(gathered, tables, writers)
                        gathered = []
                    self._step("compacting")
                tally.add_outcomes(gathered, tables, writers)
                for writer in writers:
                    writer.flush()
            except OSError as exc:  # two files written at once: say which, as pyarrow's message may not
                raise os_error("write", named, exc) from None
            finally:
                try:
                    for writer in writers:
                        writer.close()
                except OSError as exc:
                    raise os_error("write", named, exc) from None
            if tally.rows + tally.dead != pinput.selected_rows:
                raise AccountingError(f"partition {p.label}: input_rows {pinput.selected_rows} != rows {tally.rows} + "
                                      f"dead_letters {tally.dead}")
        return tally

    def _staged(self, p: Partition, units: list[Unit], slices: dict[str, list[Slice]], pool: Executor
                ) -> Iterator[list[pa.Table]]:
        """Each unit's staged outcomes, in the units' order: its slices' tables in row order, or its unit file's
        table. The next units' files are read meanwhile, up to `READ_AHEAD` of them and `READ_AHEAD_ROWS` outcomes, so
        that a commit on S3 waits for a request's latency about once per `READ_AHEAD` files, not once per unit."""
        ahead: deque[tuple[Unit, list[Future[pa.Table]]]] = deque()
        files = rows = 0  # queued in `ahead`
        todo = iter(units)
        try:
            while True:
                while not ahead or (files < READ_AHEAD and rows < READ_AHEAD_ROWS):
                    unit = next(todo, None)
                    if unit is None:
                        break
                    ahead.append((unit, self._read(p, unit, slices.get(unit.id), pool)))
                    files, rows = files + len(ahead[-1][1]), rows + unit.rows
                if not ahead:
                    return
                unit, futures = ahead.popleft()
                files, rows = files - len(futures), rows - unit.rows
                yield [_result(p, f) for f in futures]
        finally:  # a failed read or write: the reads still queued are not wanted
            for _, futures in ahead:
                for f in futures:
                    f.cancel()

    def _read(self, p: Partition, unit: Unit, found: list[Slice] | None, pool: Executor) -> list[Future[pa.Table]]:
        """The reads of a unit's staged files, begun on `pool`: its slices, which must cover its rows exactly once,
        or its unit file."""
        if found:
            if not covers(unit.start, unit.stop, found):
                raise AccountingError(f"partition {p.label}: the slices of unit {unit.id} do not cover its rows "
                                      f"{unit.start}-{unit.stop} exactly once: "
                                      f"{sorted((s.start, s.stop) for s in found)}")
            return [pool.submit(read_slice, self.storage, s) for s in sorted(found, key=lambda s: s.start)]
        return [pool.submit(self._read_unit_file, p, unit)]

    def _read_unit_file(self, p: Partition, unit: Unit) -> pa.Table:
        staged = pq.read_table(self.storage.arrow_path(self._unit_file(p, unit.id)), filesystem=self.storage.arrow_fs())
        if staged.num_rows != unit.rows:
            raise ValueError(f"unit {unit.id} has {staged.num_rows} outcomes for {unit.rows} documents")
        return staged

    def _carry(self, carried: PartitionManifest, tables: RecordTables) -> tuple[pa.Table, pa.Table]:
        """The carried commit's two tables, in this commit's layout; their counts must be the manifest's."""
        fs = self.storage.arrow_fs()
        out = []
        for kind, schema, count in (("rows", tables.rows_schema, carried.rows),
                                    ("dead_letters", tables.dead_schema, carried.dead_letters)):
            table = pq.read_table(self.storage.arrow_path(carried.uri(kind, self.layout.root)), filesystem=fs)
            if table.num_rows != count:
                raise AccountingError(f"partition {carried.partition}: the committed {kind} file holds "
                                      f"{table.num_rows} rows, its manifest says {count}")
            out.append(table.select(schema.names).cast(schema))
        return out[0], out[1]


def _result(p: Partition, future: Future[pa.Table]) -> pa.Table:
    """A staged file's table; one whose rows are not what the commit expects is an `AccountingError`."""
    try:
        return future.result()
    except ValueError as exc:
        raise AccountingError(f"partition {p.label}: {exc}") from None


def more_selected(manifest: PartitionManifest, plan: PartitionInput | None, limit: int | None) -> int:
    """How many documents a run with `limit` selects beyond those the committed partition holds (0: none, skip
    it). A manifest written before format 3 says nothing of a limit: it is incomplete if it holds fewer documents
    than its input (`plan`, None if the input is gone)."""
    total = manifest.input_total_rows
    if total is None:
        total = plan.total_rows if plan is not None else None
    elif manifest.complete:
        return 0
    if total is None or manifest.input_rows >= total:
        return 0
    wanted = min(total, limit) if limit else total
    return max(0, wanted - manifest.input_rows)


def skip_note(manifest: PartitionManifest) -> str:
    """Why a run skips a committed partition, for its summary: a limited commit says what is left unread."""
    if manifest.complete:
        return "already committed"
    return (f"already committed its first {manifest.input_rows} of {manifest.input_total_rows} documents, all this "
            f"run's limit selects; run without --limit to read the other "
            f"{(manifest.input_total_rows or 0) - manifest.input_rows}")


class ChangedJobError(ConfigError):
    """Partitions were committed under another output hash: rerunning would silently keep the old output."""


def check_unchanged(committed: list[tuple[Partition, PartitionManifest]], output_hash: str, parts: dict[str, str],
                    output_uri: str) -> None:
    """Raise `ChangedJobError` naming what changed if any committed partition has another output hash."""
    changed = [(p, m) for p, m in committed if m.output_hash != output_hash]
    if not changed:
        return
    what = sorted({c for _, m in changed for c in changes(m.output_parts, parts)})
    said = ", ".join(what) if what else "the output hash (the manifest predates per-setting hashes)"
    labels = [p.label for p, _ in changed]
    shown = ", ".join(labels[:3]) + (f" and {len(labels) - 3} more" if len(labels) > 3 else "")
    raise ChangedJobError(
        f"partition {shown} of {output_uri} was committed by a different job: {said} changed "
        f"(output hash {changed[0][1].output_hash} -> {output_hash}). Rerun with --force to replace it, "
        f"or set output.uri to a new output")
