"""`extract retry`: reprocess a committed partition's dead letters with new settings, and merge the
outcome back in one atomic commit per partition.

How it works, per run:
1. Select committed partitions; in each, the dead letters with the given reasons are the candidates.
   Dead letters that a retry with the very same settings (same output hash) already failed are left
   out, so an identical retry is a no-op (decoding is deterministic at temperature 0; `again` overrides).
2. Fetch the candidates' texts from the job's own input (planned and read by the run's own code),
   and write them to a scratch Parquet under `OUTPUT/_staging/_retry/<fingerprint>/input/`.
3. Run the real pipeline (`run_job`) on a derived config whose input is that scratch file and whose
   output is a scratch folder beside it, under the retry's run id. The fingerprint names the partitions'
   committed state and the settings, so a retry that crashed is resumed from its staged units.
4. Merge per partition: the old rows plus the recovered rows (cast to the partition's row schema), and
   the old dead letters minus the recovered ones, with the still-dead ones replaced by their new
   outcome and `attempts` raised, are written whole under fresh names (`part-<commit_id>.parquet`). Then
   `commit.publish` writes `manifest.json` naming them (the commit point: readers go through the manifest)
   and deletes the superseded files.

The retry holds the output's lease throughout. A crash at any step leaves the old manifest naming the old
files, or the new manifest naming the new ones; files named by neither are deleted by the next commit.
Accounting is checked before and after:
rows + dead letters == input rows, and no id twice.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import date, datetime, timezone
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import structlog

from pipeline.config import ConfigError, LoadedConfig, load_config
from pipeline.job_identity import job_snapshot
from pipeline.lease import Lease
from pipeline.output.commit import Commit, sweep
from pipeline.output.committed import CommittedOutput
from pipeline.output.layout import OutputLayout
from pipeline.output.manifest import AccountingError, PartitionManifest, RunManifest
from pipeline.output.tables import read_columns
from pipeline.partition import WHOLE, Partition, is_templated, partition_for
from pipeline.reader import read_tasks, read_units
from pipeline.storage import Storage, StorageError, join, storage_for
from pipeline.units import cut_units
from workers.outcome import DeadCol, Internal
from workers.secrets import redact

log = structlog.get_logger(__name__)

ATTEMPTS = DeadCol.ATTEMPTS
# Keys that the retry sets on the derived config itself; never taken from the user's overrides.
SCRATCH_KEYS = ("input.uri", "output.uri", "input.limit")

Hook = Callable[[str, Partition], None]


@dataclass
class RetryPartition:
    """One partition's outcome in a retry run."""

    partition: str
    status: str  # committed | nothing | skipped | failed
    candidates: int = 0
    recovered: int = 0
    still_dead: int = 0
    still_dead_by_reason: dict[str, int] = field(default_factory=dict)
    rows: int = 0
    dead_letters: int = 0
    input_rows: int = 0
    seconds: float = 0.0
    error: str | None = None
    note: str | None = None


@dataclass
class RetryReport:
    run_id: str
    status: str
    reasons: list[str]
    overrides: dict[str, Any]
    output_uri: str
    partitions: list[RetryPartition] = field(default_factory=list)

    @property
    def candidates(self) -> int:
        return sum(p.candidates for p in self.partitions)

    @property
    def recovered(self) -> int:
        return sum(p.recovered for p in self.partitions)

    @property
    def still_dead(self) -> int:
        return sum(p.still_dead for p in self.partitions)


@dataclass
class _State:
    """A committed partition as its manifest names it, with the candidates of this retry."""

    partition: Partition
    manifest: PartitionManifest
    rows_file: str
    dead_file: str
    candidates: list[Any]  # ids, in dead-letter order
    attempts: dict[Any, int]  # id -> attempts so far
    present_reasons: dict[str, int]


# ---------------------------------------------------------------------------------------------- reading


def _duplicate(ids: pa.ChunkedArray | pa.Array) -> Any | None:
    """The first id that occurs more than once, or None."""
    counts = pc.value_counts(ids)
    repeated = counts.filter(pc.greater(counts.field("counts"), 1))
    return repeated.field("values")[0].as_py() if len(repeated) else None


def _flat(ids: pa.Array | pa.ChunkedArray) -> pa.Array:
    return ids.combine_chunks() if isinstance(ids, pa.ChunkedArray) else ids


def check_partition(label: str, input_rows: int, row_ids: pa.Array | pa.ChunkedArray,
                    dead_ids: pa.Array | pa.ChunkedArray) -> None:
    """rows + dead letters == input rows, and no id twice across both; else `AccountingError`."""
    if len(row_ids) + len(dead_ids) != input_rows:
        raise AccountingError(f"partition {label}: input_rows {input_rows} != rows {len(row_ids)} + "
                              f"dead_letters {len(dead_ids)}")
    rows = _flat(row_ids)
    both = pa.chunked_array([rows, _flat(dead_ids).cast(rows.type)], rows.type)
    dup = _duplicate(both)
    if dup is not None:
        raise AccountingError(f"partition {label}: document {dup!r} appears more than once in rows + dead_letters")


def _tried_runs(manifest: PartitionManifest, output_hash: str) -> set[str]:
    """Run ids of earlier retries with the same settings: their failures would repeat."""
    runs: set[str] = set()
    for entry in manifest.retries:
        if entry.get("output_hash") == output_hash:
            runs.update(r for r in (entry.get("run_id"), entry.get("extracted_by")) if r)
    return runs


def load_state(storage: Storage, layout: OutputLayout, p: Partition, id_column: str, reasons: set[str],
               output_hash: str, again: bool) -> _State:
    """Read a committed partition's manifest, check its accounting, and pick the candidates."""
    manifest = CommittedOutput(layout.root, storage).manifest(p)
    if manifest is None:
        raise ConfigError(f"partition {p.label} of {layout.root} is not committed")
    rows_file, dead_file = manifest.uri("rows", layout.root), manifest.uri("dead_letters", layout.root)
    row_ids = read_columns(storage, rows_file, [id_column]).column(id_column)
    dead = read_columns(storage, dead_file, [id_column, DeadCol.REASON, DeadCol.RUN_ID, ATTEMPTS])
    check_partition(p.label, manifest.input_rows, row_ids, dead.column(id_column))
    tried = set() if again else _tried_runs(manifest, output_hash)
    candidates: list[Any] = []
    attempts: dict[Any, int] = {}
    counts = dead.column(ATTEMPTS).to_pylist() if ATTEMPTS in dead.column_names else [None] * dead.num_rows
    columns = (dead.column(c).to_pylist() for c in (id_column, DeadCol.REASON, DeadCol.RUN_ID))
    for doc_id, reason, run_id, previous in zip(*columns, counts, strict=True):
        if reason in reasons and run_id not in tried:
            candidates.append(doc_id)
            attempts[doc_id] = previous or 1  # dead letters written before the column existed: one attempt
    present = dict(sorted(Counter(dead.column(DeadCol.REASON).to_pylist()).items()))
    return _State(p, manifest, rows_file, dead_file, candidates, attempts, present)


def fetch_documents(loaded: LoadedConfig, p: Partition, ids: list[Any]) -> pa.Table:
    """The candidates' (id, text) from the job's input, read unit by unit with the run's own reader.

    Stops once every id is found. Raises `ConfigError` naming an id the input no longer holds."""
    cfg = loaded.config
    schema_column = cfg.input.schema_column  # per-row schemas travel with their documents
    storage = storage_for(p.input_uri, loaded.s3_settings)
    pinput = cut_units(storage, p, cfg.input.id_column, cfg.input.text_column, None, cfg.output.checkpoint_rows,
                       schema_column=schema_column)
    id_field = pinput.schema.field(cfg.input.id_column)
    wanted = pa.array(ids, id_field.type)
    missing = set(ids)
    pieces: list[pa.Table] = []
    for unit in pinput.units:
        if not missing:
            break
        docs = read_units(pa.Table.from_pylist(read_tasks([unit])), storage, id_field, cfg.input.text_column,
                          schema_column=schema_column)
        found = docs.filter(pc.is_in(docs.column(cfg.input.id_column), value_set=wanted)).drop_columns(
            [Internal.UNIT, Internal.INVALID_INPUT])
        keep = []
        for i, doc_id in enumerate(found.column(cfg.input.id_column).to_pylist()):
            if doc_id in missing:  # first occurrence only
                missing.discard(doc_id)
                keep.append(i)
        if keep:
            pieces.append(found.take(pa.array(keep, pa.int64())))
    if missing:
        example = sorted(missing, key=str)[0]
        raise ConfigError(f"partition {p.label}: the input no longer holds {len(missing)} dead-lettered "
                          f"document(s), e.g. {example!r} (input {p.input_uri})")
    fields = [id_field, pa.field(cfg.input.text_column, pa.string())]
    schema = pa.schema(fields + ([pa.field(schema_column, pa.string())] if schema_column else []))
    return pa.concat_tables(pieces).cast(schema) if pieces else schema.empty_table()


# ---------------------------------------------------------------------------------------------- merging


def conform(table: pa.Table, schema: pa.Schema, fill: dict[str, Any] | None = None) -> pa.Table:
    """`table` with exactly `schema`'s columns: matched by name and cast; a missing column is filled with
    its `fill` value, else nulls (so it must be nullable). Why: dead letters written before a column
    existed (e.g. `attempts`) still merge with new ones."""
    fill = fill or {}
    n = table.num_rows
    columns = []
    for f in schema:
        if f.name in table.column_names:
            columns.append(pc.cast(table.column(f.name), f.type))
        elif f.name in fill:
            columns.append(pa.array([fill[f.name]] * n, f.type))
        elif f.nullable:
            columns.append(pa.nulls(n, f.type))
        else:
            raise ConfigError(f"column {f.name!r} of the partition's layout is missing from the retry's output")
    return pa.Table.from_arrays(columns, schema=schema)


def merged_dead_letter_schema(old: pa.Schema, new: pa.Schema) -> pa.Schema:
    """The merged dead-letter layout: the partition's columns, then any the new outcomes add (nullable),
    then `attempts` if neither has it."""
    fields = list(old)
    fields += [f.with_nullable(True) for f in new if f.name not in old.names]
    if ATTEMPTS not in [f.name for f in fields]:
        fields.append(pa.field(ATTEMPTS, pa.int64()))
    return pa.schema(fields)


@dataclass
class _Written:
    rows: int = 0
    dead: int = 0
    reasons: Counter[str] = field(default_factory=Counter)
    row_ids: list[pa.Array] = field(default_factory=list)
    dead_ids: list[pa.Array] = field(default_factory=list)


def merge_partition(
    storage: Storage,
    layout: OutputLayout,
    state: _State,
    recovered: pa.Table,
    still_dead: pa.Table,
    id_column: str,
    run_id: str,
    entry: dict[str, Any],
    hook: Hook | None = None,
    guard: Callable[[], int | None] | None = None,
) -> RetryPartition:
    """Commit `state`'s partition with `recovered` moved to rows and `still_dead` replacing their dead
    letters: new files, then the manifest (the commit point), then the old files deleted."""
    p = state.partition
    started = time.perf_counter()
    _check_outcomes(p.label, state.candidates, recovered.column(id_column), still_dead.column(id_column))
    attempts = pa.array([state.attempts[i] + 1 for i in still_dead.column(id_column).to_pylist()], pa.int64())
    still_dead = still_dead.drop_columns([c for c in (ATTEMPTS,) if c in still_dead.column_names])
    still_dead = still_dead.append_column(ATTEMPTS, attempts)
    commit = Commit(storage, layout, p, run_id, guard, (lambda step: hook(step, p)) if hook else None)
    with commit.files() as targets:  # both files in place only once their accounting is checked
        written = _write_merged(storage, state, recovered, still_dead, id_column, targets)
    manifest = dataclasses.replace(
        state.manifest, commit_id=commit.id, rows=written.rows, dead_letters=written.dead, files=commit.named,
        dead_letters_by_reason=dict(sorted(written.reasons.items())),
        updated_at=datetime.now(timezone.utc).isoformat(), retries=[*state.manifest.retries, entry])
    commit.publish(manifest)  # the lease confirmed with the store first: a stale writer publishes nothing
    still = Counter(still_dead.column(DeadCol.REASON).to_pylist())
    log.info("retry.partition.committed", partition=p.label, recovered=recovered.num_rows,
             still_dead=still_dead.num_rows, rows=written.rows, dead_letters=written.dead)
    return RetryPartition(p.label, "committed", candidates=len(state.candidates), recovered=recovered.num_rows,
                          still_dead=still_dead.num_rows, still_dead_by_reason=dict(sorted(still.items())),
                          rows=written.rows, dead_letters=written.dead, input_rows=state.manifest.input_rows,
                          seconds=round(time.perf_counter() - started, 3))


def _write_merged(storage: Storage, state: _State, recovered: pa.Table, still_dead: pa.Table, id_column: str,
                  targets: dict[str, str]) -> _Written:
    """The partition's new rows file (its rows, then `recovered`) and dead-letters file (its dead letters but the
    candidates, then `still_dead`), written to the commit's temporary `targets` and checked."""
    fs = storage.arrow_fs()
    old_rows = pq.ParquetFile(storage.arrow_path(state.rows_file), filesystem=fs)
    old_dead = pq.ParquetFile(storage.arrow_path(state.dead_file), filesystem=fs)
    rows_schema = old_rows.schema_arrow
    dead_schema = merged_dead_letter_schema(old_dead.schema_arrow, still_dead.schema)
    candidates = pa.array(state.candidates, dead_schema.field(id_column).type)
    written = _Written()
    with pq.ParquetWriter(storage.arrow_path(targets["rows"]), rows_schema, filesystem=fs, compression="zstd") as out:
        for batch in old_rows.iter_batches():
            _write(out, conform(pa.Table.from_batches([batch]), rows_schema), id_column, written, "rows")
        _write(out, conform(recovered, rows_schema), id_column, written, "rows")
    with pq.ParquetWriter(storage.arrow_path(targets["dead_letters"]), dead_schema, filesystem=fs,
                          compression="zstd") as out:
        for batch in old_dead.iter_batches():
            kept = pa.Table.from_batches([batch]).filter(
                pc.invert(pc.is_in(batch.column(id_column), value_set=candidates)))
            _write(out, conform(kept, dead_schema, {ATTEMPTS: 1}), id_column, written, "dead")
        _write(out, conform(still_dead, dead_schema), id_column, written, "dead")
    check_partition(state.partition.label, state.manifest.input_rows,
                    pa.chunked_array(written.row_ids, rows_schema.field(id_column).type),
                    pa.chunked_array(written.dead_ids, dead_schema.field(id_column).type))
    return written


def _write(out: pq.ParquetWriter, table: pa.Table, id_column: str, written: _Written, kind: str) -> None:
    if not table.num_rows:
        return
    out.write_table(table)
    if kind == "rows":
        written.rows += table.num_rows
        written.row_ids.extend(table.column(id_column).chunks)
    else:
        written.dead += table.num_rows
        written.dead_ids.extend(table.column(id_column).chunks)
        written.reasons.update(table.column(DeadCol.REASON).to_pylist())


def _check_outcomes(label: str, candidates: list[Any], recovered: pa.ChunkedArray, dead: pa.ChunkedArray) -> None:
    """Exactly one outcome per candidate: recovered and still-dead ids split the candidates."""
    got = recovered.to_pylist() + dead.to_pylist()
    if len(got) != len(candidates) or set(got) != set(candidates):
        extra = sorted(set(got) - set(candidates), key=str)[:1]
        lost = sorted(set(candidates) - set(got), key=str)[:1]
        raise AccountingError(f"partition {label}: retry returned {len(got)} outcomes for {len(candidates)} "
                              f"candidates (unexpected {extra}, missing {lost})")


# ---------------------------------------------------------------------------------------------- the job


def committed_days(output: CommittedOutput, templated: bool) -> list[date | None]:
    """Every committed partition of the output, oldest first."""
    if not templated:
        return [None]
    return sorted(date.fromisoformat(m.partition) for m in output.partitions() if m.is_dated)


def _fingerprint(loaded: LoadedConfig, reasons: list[str], again: bool, states: list[_State]) -> str:
    """Names the scratch of a retry: the same settings on the same committed state reuse it (resume)."""
    parts = [(s.partition.label, s.manifest.files, s.manifest.updated_at, s.manifest.run_id, len(s.candidates))
             for s in states]
    raw = json.dumps({"output_hash": loaded.output_hash, "reasons": sorted(reasons), "again": again, "parts": parts},
                     sort_keys=True, default=str)
    return hashlib.sha256(raw.encode()).hexdigest()[:16]


def _scratch_overrides(overrides: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in overrides.items() if k not in SCRATCH_KEYS}


def retry_job(
    config_path: str,
    reasons: list[str],
    overrides: dict[str, Any] | None = None,
    days: list[date | None] | None = None,
    again: bool = False,
    run_id: str | None = None,
    hook: Hook | None = None,
) -> RetryReport:
    """Retry the dead letters with `reasons` in the committed partitions `days` (None: all committed),
    with the config at `config_path` plus `overrides` (dotted keys, e.g. `model.max_tokens`)."""
    from pipeline.run import new_run_id

    overrides = dict(overrides or {})
    loaded = load_config(config_path, overrides)
    cfg = loaded.config
    storage = storage_for(loaded.output_uri, loaded.s3_settings)
    layout = OutputLayout(loaded.output_uri)
    templated = is_templated(loaded.input_uri)
    run_id = run_id or new_run_id(f"{cfg.name}-retry")
    structlog.contextvars.bind_contextvars(run_id=run_id)
    recorded = {k: v for k, v in overrides.items() if k not in ("output.uri",)}
    report = RetryReport(run_id, "running", sorted(set(reasons)), recorded, loaded.output_uri)
    record = _Record(loaded, report, started=time.perf_counter())
    storage.check_writable(loaded.output_uri)
    with Lease(storage, layout.lease(), run_id) as lease:  # refused at once: then nothing is written
        try:
            _retry(loaded, storage, layout, templated, days, set(reasons), again, overrides, report, record,
                   hook, lease)
            failed = any(p.status == "failed" for p in report.partitions)
            report.status = "failed" if failed else ("committed" if report.candidates else "nothing")
        except BaseException as exc:
            report.status = "failed"
            record.error = f"{type(exc).__name__}: {exc}"
            raise
        finally:
            storage.write_text(layout.run_manifest(run_id), record.to_json())
            structlog.contextvars.unbind_contextvars("run_id")
    return report


def _retry(loaded: LoadedConfig, storage: Storage, layout: OutputLayout, templated: bool,
           days: list[date | None] | None, reasons: set[str], again: bool, overrides: dict[str, Any],
           report: RetryReport, record: _Record, hook: Hook | None, lease: Lease) -> None:
    """Select the partitions with dead letters to retry, stage their documents as a scratch input, extract them
    in one inner run, and merge each partition's outcomes back in its own commit."""
    selected = days if days is not None else committed_days(CommittedOutput(layout.root, storage), templated)
    states = _retryable(loaded, storage, layout, selected, reasons, again, report)
    if not states:
        return
    retry_root = layout.retry_staging()
    scratch = join(retry_root, _fingerprint(loaded, sorted(reasons), again, states))
    for stale in storage.list_files(retry_root):  # the scratch of a retry with other settings or documents
        if not stale.startswith(scratch + "/"):
            storage.delete(stale)
    input_template = join(scratch, "input", "{date}.parquet" if templated else f"{WHOLE}.parquet")
    ready = _stage_documents(loaded, storage, scratch, input_template, states, report)
    if not ready:
        return
    inner = load_config(loaded.path, {**_scratch_overrides(overrides), "input.uri": input_template,
                                      "output.uri": join(scratch, "out"), "input.limit": None})
    inner_manifest = _run_inner(inner, [s.partition.day for s in ready], report.run_id)
    record.inner = inner_manifest
    inner_layout = OutputLayout(inner.output_uri)
    errors = {str(r.get("partition")): r.get("error") for r in inner_manifest.partitions}
    for state in ready:
        report.partitions.append(_merge_one(storage, layout, inner_layout, inner, state, report, loaded, hook,
                                            errors.get(state.partition.label), lease))
    if all(p.status != "failed" for p in report.partitions):
        storage.delete_prefix(scratch)


def _retryable(loaded: LoadedConfig, storage: Storage, layout: OutputLayout, selected: list[date | None],
               reasons: set[str], again: bool, report: RetryReport) -> list[_State]:
    """The state of each selected partition with dead letters to retry; the others go into `report` as skipped
    (not committed) or nothing (no such dead letters left). A partition committed under another schema stops
    the retry."""
    states: list[_State] = []
    for day in selected:
        p = partition_for(loaded.input_uri, day)
        if CommittedOutput(layout.root, storage).manifest(p) is None:
            report.partitions.append(RetryPartition(p.label, "skipped", error="not committed"))
            continue
        state = load_state(storage, layout, p, loaded.config.input.id_column, reasons, loaded.output_hash, again)
        schema_hash = state.manifest.schema.get("hash")
        if schema_hash != loaded.contract.hash:
            raise ConfigError(f"partition {p.label}: committed with schema hash {schema_hash}, but the config's "
                              f"schema has hash {loaded.contract.hash}; a retry cannot change the schema")
        sweep(storage, layout, p, state.manifest)  # files a crashed commit left
        if state.candidates:
            states.append(state)
            continue
        present = ", ".join(f"{r} {n}" for r, n in state.present_reasons.items()) or "none"
        report.partitions.append(RetryPartition(
            p.label, "nothing", rows=state.manifest.rows, dead_letters=state.manifest.dead_letters,
            input_rows=state.manifest.input_rows,
            note=f"no dead letters left to retry for {', '.join(sorted(reasons))} (present: {present})"))
    return states


def _stage_documents(loaded: LoadedConfig, storage: Storage, scratch: str, input_template: str,
                     states: list[_State], report: RetryReport) -> list[_State]:
    """Write each partition's documents to retry under `scratch`; the states whose documents are staged. A
    partition whose input cannot be read goes into `report` as failed."""
    ready: list[_State] = []
    for state in states:
        try:
            docs = fetch_documents(loaded, state.partition, state.candidates)
        except (ConfigError, StorageError) as exc:
            report.partitions.append(RetryPartition(state.partition.label, "failed", len(state.candidates),
                                                    error=str(exc)))
            continue
        target = partition_for(input_template, state.partition.day).input_uri
        # The same fingerprint is the same documents: a resumed retry keeps the file its crashed run read, so
        # the inner run sees the same input version (fingerprint) and reuses what that run committed.
        if not storage.exists(target):
            with storage.atomic_output(target, join(scratch, "_tmp")) as tmp:
                pq.write_table(docs, storage.arrow_path(tmp), filesystem=storage.arrow_fs())
        ready.append(state)
    return ready


def _run_inner(inner: LoadedConfig, days: list[date | None], run_id: str) -> RunManifest:
    from pipeline.run import run_job

    log.info("retry.extract", partitions=len(days), input=inner.input_uri)
    return run_job(inner, days, fail_fast=False, run_id=run_id)


def _merge_one(storage: Storage, layout: OutputLayout, inner_layout: OutputLayout, inner: LoadedConfig,
               state: _State, report: RetryReport, loaded: LoadedConfig, hook: Hook | None,
               inner_error: str | None, lease: Lease) -> RetryPartition:
    p = state.partition
    inner_p = partition_for(inner.input_uri, p.day)
    inner_manifest = CommittedOutput(inner_layout.root, storage).manifest(inner_p)
    if inner_manifest is None:
        return RetryPartition(p.label, "failed", len(state.candidates),
                              error=f"the retry's extraction did not commit: {inner_error or 'no outcome'}")
    recovered = read_columns(storage, inner_manifest.uri("rows", inner_layout.root))
    still_dead = read_columns(storage, inner_manifest.uri("dead_letters", inner_layout.root))
    entry = {
        "run_id": report.run_id,
        "extracted_by": inner_manifest.run_id,
        "reasons": report.reasons,
        "overrides": redact(report.overrides),  # keys kept, secret-looking values masked
        "model": loaded.config.model.path,
        "max_tokens": loaded.config.model.max_tokens,
        "output_hash": loaded.output_hash,
        "candidates": len(state.candidates),
        "recovered": recovered.num_rows,
        "still_dead": still_dead.num_rows,
        "tokens": inner_manifest.tokens,
        "at": datetime.now(timezone.utc).isoformat(),
    }
    try:
        return merge_partition(storage, layout, state, recovered, still_dead, loaded.config.input.id_column,
                               report.run_id, entry, hook, lease.ensure)
    except (AccountingError, ConfigError, StorageError, OSError) as exc:
        log.error("retry.partition.failed", partition=p.label, error=str(exc))
        return RetryPartition(p.label, "failed", len(state.candidates), error=str(exc))


class _Record:
    """The retry's own run record, OUTPUT/_runs/<run_id>.json: a run manifest with `kind: retry`."""

    def __init__(self, loaded: LoadedConfig, report: RetryReport, started: float) -> None:
        self.loaded = loaded
        self.report = report
        self.started = started
        self.started_at = datetime.now(timezone.utc).isoformat()
        self.inner: RunManifest | None = None
        self.error: str | None = None

    def to_json(self) -> str:
        loaded, report = self.loaded, self.report
        base = RunManifest(
            run_id=report.run_id, name=loaded.config.name, config_path=str(loaded.path),
            config_hash=loaded.config_hash, status=report.status, started_at=self.started_at,
            finished_at=datetime.now(timezone.utc).isoformat(), input_uri=loaded.input_uri,
            output_uri=loaded.output_uri, model=loaded.config.model.path,
            schema={"name": loaded.contract.name, "version": loaded.contract.version, "hash": loaded.contract.hash},
            error=self.error, job=job_snapshot(loaded),
        )
        if self.inner is not None:
            base.tokens, base.timings, base.actors = self.inner.tokens, self.inner.timings, self.inner.actors
        base.input_rows, base.rows, base.dead_letters = report.candidates, report.recovered, report.still_dead
        reasons: Counter[str] = Counter()
        for p in report.partitions:
            reasons.update(p.still_dead_by_reason)
        base.dead_letters_by_reason = dict(sorted(reasons.items()))
        base.partitions = [asdict(p) for p in report.partitions]
        base.timings = {**base.timings, "total_s": round(time.perf_counter() - self.started, 3)}
        base.max_tokens, base.constrained = loaded.config.model.max_tokens, loaded.config.model.constrained
        base.kind = "retry"
        base.extra = {"retry": {"reasons": report.reasons, "overrides": redact(report.overrides),
                                "output_hash": loaded.output_hash}}
        return base.to_json()


def render_retry(report: RetryReport) -> str:
    """Per partition: candidates, recovered, still dead."""
    shown = redact(report.overrides)
    settings = ", ".join(f"{k}={v}" for k, v in shown.items() if k != "prompt") or "the config's settings"
    if "prompt" in report.overrides:
        settings += ", prompt from file"
    lines = [f"retry {report.run_id}: {report.status}",
             f"  reasons    {', '.join(report.reasons)} with {settings}",
             f"  total      {report.candidates} candidates, {report.recovered} recovered, "
             f"{report.still_dead} still dead"]
    header = f"{'partition':<12} {'status':<10} {'candidates':>10} {'recovered':>10} {'still dead':>10}  note"
    lines += ["", header, "-" * len(header)]
    for p in report.partitions:
        note = p.error or p.note or ", ".join(f"{r} {n}" for r, n in p.still_dead_by_reason.items())
        lines.append(f"{p.partition:<12} {p.status:<10} {p.candidates:>10} {p.recovered:>10} "
                     f"{p.still_dead:>10}  {note}")
    lines.append(f"  manifest   {report.output_uri}/_runs/{report.run_id}.json")
    return "\n".join(lines)
