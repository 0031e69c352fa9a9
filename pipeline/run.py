"""`run_job`: plan the partitions once (`pipeline.planning`), skip the committed ones, resume staged ones, stream
the rest through one Ray Data pipeline (`pipeline.dataflow`: one warm actor pool for every partition), and commit
each partition as soon as its last unit is staged."""

from __future__ import annotations

import gc
import os
import secrets
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import date, datetime, timezone
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import structlog

from pipeline import lifecycle
from pipeline.config import ConfigError, LoadedConfig
from pipeline.job_checks import check_job, reserved_columns
from pipeline.job_identity import claim_output, job_snapshot
from pipeline.lease import Lease
from pipeline.output.commit import SLICE_READERS, PartitionCommitter, PartitionResult, sweep
from pipeline.output.layout import OutputLayout
from pipeline.output.manifest import AccountingError, RunManifest
from pipeline.output.slices import Slice, SliceWriter, disjoint, pack, parse_slice, read_slices, uncovered, unpack
from pipeline.partition import DATE_TOKEN, Partition, partition_for
from pipeline.planning import FAILED, SKIPPED, PartitionPlan, plan_input, plan_run
from pipeline.progress import Progress
from pipeline.reader import UNIT_COLUMN
from pipeline.routing import SchemaRoutes, route_schemas
from pipeline.stage_config import InputSource, PlanningConfig, RoutingConfig
from pipeline.storage import S3Settings, StorageError, storage_for
from pipeline.units import PartitionInput, Unit
from workers import logs
from workers.outcome import RESERVED_ID_COLUMNS, Col, Internal, Kind, is_receipt

log = structlog.get_logger(__name__)


# Outcome batches between two returns of the driver's freed memory to the system (`release_memory`).
RELEASE_EVERY = 64


def release_memory() -> None:
    """Give the memory the driver holds freed back to the system: Arrow's pool (mimalloc keeps what was freed for
    reuse: after the plan of a 10^6-document partition, every id read for its checks, about 90 MB for the rest of
    the run where 10^5 documents left about 25) and glibc's heaps (`malloc_trim`: each unit's documents, under
    Ray's 100 KB inline limit at the defaults, pass through the driver's memory store, and their freed pages stayed
    with malloc; a 10^5-document run in process grew 183 bytes a document while streaming, 27 with the trim). A
    10^6-document partition still grows about 0.37 KB a document while streaming (issue 57, not found yet)."""
    from workers.memory import release_free_memory

    pa.default_memory_pool().release_unused()
    release_free_memory()


def new_run_id(name: str) -> str:
    return f"{name}-{datetime.now(timezone.utc):%Y%m%dT%H%M%SZ}-{secrets.token_hex(3)}"


def check_names(loaded: LoadedConfig) -> None:
    check_job(loaded)  # schema fields named as our own columns; max_tokens leaving no room for a prompt
    id_column = loaded.config.input.id_column
    if id_column in set(loaded.contract.layout.schema.names):
        raise ConfigError(f"input.id_column: {id_column!r} is also a field of schema {loaded.contract.name}")
    if id_column in RESERVED_ID_COLUMNS or id_column in reserved_columns(DATE_TOKEN in loaded.input_uri):
        raise ConfigError(f"input.id_column: {id_column!r} is a reserved output column name (the output or its "
                          "query views have a column of that name); name the input's id column otherwise")


def plan_one(loaded: LoadedConfig, partition: Partition, offsets: dict[str, int] | None = None) -> PartitionInput:
    """One partition to process (`pipeline.planning.plan_input`); `offsets[label]` documents are committed already."""
    return plan_input(InputSource.of(loaded), partition, (offsets or {}).get(partition.label, 0))


def preflight(loaded: LoadedConfig, day: date | None = None) -> PartitionInput:
    """Everything that can be checked without Ray, for one partition: names, input files, columns."""
    check_names(loaded)
    return plan_input(InputSource.of(loaded), partition_for(loaded.input_uri, day))


def connect_ray() -> None:
    import ray  # not Ray Data: a one-pool run never needs it (a split run's graph imports it, `pipeline.dataflow`)

    if ray.is_initialized():
        return
    address = os.environ.get("RAY_ADDRESS")
    token_file = os.path.expanduser("~/.ray/auth_token")
    if address and "RAY_AUTH_MODE" not in os.environ and (os.environ.get("RAY_AUTH_TOKEN")
                                                          or os.path.exists(token_file)):
        os.environ["RAY_AUTH_MODE"] = "token"  # Ray 2.60 heads require the token for drivers
    logs.quiet_driver()
    if address:
        lifecycle.probe_address(address)
    else:
        lifecycle.stop_orphaned_ray()  # the local cluster of a driver that was killed: its recorded processes
        # A local cluster ends with the run, and a shared engine host (EXTRACT_ENGINE_HOST=shared) with it: the
        # actors start engines of their own, as they would have (workers.engine.host).
        if os.environ.get("EXTRACT_ENGINE_HOST", "own") != "own":
            os.environ["EXTRACT_ENGINE_HOST"] = "own"
    try:
        ray.init(address=address or None, log_to_driver=True, include_dashboard=False if not address else None,
                 logging_level=logs.ray_logging_level())
    except Exception as exc:  # Ray raises a bare Exception when its node times out starting (a loaded machine)
        raise lifecycle.ClusterStartError.of(exc, address) from exc
    logs.filter_worker_logs()
    if not address:
        lifecycle.record_ray_processes()


class _Work:
    """One partition's plan and its progress through this run."""

    def __init__(self, pinput: PartitionInput, pending: list[Unit], covered: dict[str, list[Slice]] | None = None,
                 whole: dict[str, list[Slice]] | None = None) -> None:
        self.input = pinput
        self.pending = pending
        self.resumed = len(pinput.units) - len(pending)
        self.left = len(pending)
        # Pending units that earlier runs' slices hold in part (unit id → disjoint slices): only their other rows
        # are read, and the slices' outcomes join them (pipeline.output.slices).
        self.covered = covered or {}
        # The slices each unit is staged in (unit id → slices), what the commit reads for it: those of the units
        # earlier runs' slices hold whole (`whole`), and those this run's actors stage. A unit not here has a file.
        self.in_slices: defaultdict[str, list[Slice]] = defaultdict(list, whole or {})


def run_job(
    loaded: LoadedConfig,
    days: list[date | None] | None = None,
    force: bool = False,
    fail_fast: bool = True,
    run_id: str | None = None,
    fail_fast_after: int | None = None,
    new_job: bool = False,
) -> RunManifest:
    """Run the job over `days` (None: the undated input), holding the output's lease (`LeaseHeldError` at
    once if another writer holds it). With `fail_fast`, a partition that cannot be planned raises before Ray
    starts; otherwise it is reported as failed and the others go on. An output of another job is refused unless
    `new_job` (`pipeline.job_identity.claim_output`)."""
    check_names(loaded)
    _log_levers(loaded)
    out_storage = storage_for(loaded.output_uri, loaded.s3_settings)
    out_storage.check_writable(loaded.output_uri)
    run_id = run_id or new_run_id(loaded.config.name)
    with Lease(out_storage, OutputLayout(loaded.output_uri).lease(), run_id) as lease, lifecycle.terminating():
        claim_output(out_storage, loaded.output_uri, loaded, new_job)
        return _run_job(loaded, days or [None], force, fail_fast, run_id, lease, fail_fast_after)


def _log_levers(loaded: LoadedConfig) -> None:
    """A run's first lines: how its fields are decoded, what the prompt shows, and what measured worse."""
    from pipeline.levers import job_levers

    levers = job_levers(loaded)
    log.info("run.decoding", grounding=levers.grounding, fields=levers.fields, examples=levers.examples,
             schema_shown=levers.schema_shown, lists=levers.lists or None)
    for warning in levers.warnings:
        log.warning("run.lever", warning=warning)


def _run_job(loaded: LoadedConfig, days: list[date | None], force: bool, fail_fast: bool, run_id: str,
             lease: Lease, fail_fast_after: int | None = None) -> RunManifest:
    """Plan the partitions, resume what an earlier run staged, stream the rest, commit each partition as its
    last unit is staged, and finalise the run's manifest (written whatever happens)."""
    out_storage = storage_for(loaded.output_uri, loaded.s3_settings)
    layout = OutputLayout(loaded.output_uri)
    structlog.contextvars.bind_contextvars(run_id=run_id)
    planning = PlanningConfig.of(loaded)  # what planning reads of the job
    committer = PartitionCommitter(out_storage, layout, loaded.contract, loaded.config.model.path,
                                   planning.output_hash, run_id, parts=planning.parts, guard=lease.ensure)
    committed = {} if force else {p.label: m for p in (partition_for(loaded.input_uri, d) for d in days)
                                  if (m := committer.committed(p))}
    plans = plan_run(planning, days, committed, fail_fast)  # each partition planned once, here
    release_memory()  # the plan's id checks read every id: their buffers, freed, go back to the system
    manifest = _new_manifest(loaded, run_id)
    started = time.perf_counter()
    results: dict[str, PartitionResult] = {}
    work = _work(plans, committer, results, force)
    manifest.input_files = sum(len(w.input.files) for w in work)
    commit = _Commits(committer, results, fail_fast)
    streaming = _resume(work, commit)
    progress = Progress(sum(u.rows for w in streaming for u in w.pending), loaded.config.name,
                        fail_fast_after=fail_fast_after)
    actors: list[Any] = []  # the run's desk (pipeline.stats), killed at the end
    generation_s: float | None = None
    lifecycle.begin(out_storage, layout, manifest)  # dead writers' leftovers cleaned; our record says running
    try:
        if streaming:
            generation_s = _stream_outcomes(loaded, streaming, committer, commit, progress, manifest, actors)
        manifest.status = "failed" if any(r.status == "failed" for r in results.values()) else "committed"
    except BaseException as exc:
        manifest.status = "failed"
        manifest.error = f"{type(exc).__name__}: {exc}"
        raise
    finally:
        progress.close()
        _finalise(manifest, results, [partition_for(loaded.input_uri, d).label for d in days], progress, started,
                  generation_s)
        _usage(loaded, manifest)
        release_memory()
        out_storage.write_text(layout.run_manifest(run_id), manifest.to_json())
        if actors:
            import ray

            for actor in actors:
                ray.kill(actor, no_restart=True)
        structlog.contextvars.unbind_contextvars("run_id")
    log.info("run.done", status=manifest.status, rows=manifest.rows, dead_letters=manifest.dead_letters,
             seconds=round(time.perf_counter() - started, 1))
    return manifest


def _usage(loaded: LoadedConfig, manifest: RunManifest) -> None:
    """The run's tokens, cost and copied-looking fields (pipeline.costs, pipeline.field_warnings) in its manifest;
    a committed file that cannot be read leaves them out, never fails the run."""
    from pipeline.costs import run_usage
    from pipeline.field_warnings import run_field_warnings

    committed = [str(p["partition"]) for p in manifest.partitions if p.get("status") == "committed"]
    try:
        manifest.extra["usage"] = run_usage(loaded, manifest)
        manifest.extra["field_warnings"] = run_field_warnings(loaded, manifest.run_id, committed)
    except Exception as exc:  # noqa: BLE001 - figures about the run, not the run
        log.warning("run.usage_unavailable", error=f"{type(exc).__name__}: {exc}")


def _new_manifest(loaded: LoadedConfig, run_id: str) -> RunManifest:
    cfg = loaded.config
    return RunManifest(
        run_id=run_id, name=cfg.name, config_path=str(loaded.path), config_hash=loaded.config_hash,
        status="running", started_at=datetime.now(timezone.utc).isoformat(), input_uri=loaded.input_uri,
        output_uri=loaded.output_uri, model=cfg.model.path, max_tokens=cfg.model.max_tokens,
        constrained=cfg.model.constrained,
        schema={"name": loaded.contract.name, "version": loaded.contract.version, "hash": loaded.contract.hash},
        job=job_snapshot(loaded),
    )


def _work(plans: list[PartitionPlan], committer: PartitionCommitter, results: dict[str, PartitionResult],
          force: bool) -> list[_Work]:
    """The work of each partition the plan runs: its units, less those an earlier run staged. A skipped partition is
    swept of what a crashed commit left, and its result recorded, as is a failed one's."""
    work: list[_Work] = []
    for plan in plans:
        label = plan.partition.label
        if plan.action == SKIPPED:
            assert plan.committed is not None
            sweep(committer.storage, committer.layout, plan.partition, plan.committed)  # a crashed commit's files
            committer.discard_staging(plan.partition)
            # A limited commit this run's limit adds nothing to is "partial", never "skipped": documents remain unread.
            status = "skipped" if plan.committed.complete else "partial"
            results[label] = PartitionResult(label, status, error=plan.note)
        elif plan.action == FAILED:
            results[label] = PartitionResult(label, "failed", error=plan.note)
        else:
            assert plan.input is not None
            work.append(_pending_work(committer, plan.input, force))
    return work


def _pending_work(committer: PartitionCommitter, pinput: PartitionInput, force: bool) -> _Work:
    """One partition's plan, less the units an earlier run already staged (`force`: none are kept)."""
    partition = pinput.partition
    staged, slices = committer.prepare(partition, fresh=force)
    if stale := (staged | {s.unit_id for s in slices}) - {u.id for u in pinput.units}:  # ids carry files' versions
        log.warning("partition.stale_staging", partition=partition.label, units=len(stale),
                    reason="staged from another version of the input files; those units are redone")
    pending = [u for u in pinput.units if u.id not in staged]
    covered, from_slices = _slices_of(committer, pinput, pending, slices)
    pending = [u for u in pending if u.id not in from_slices]
    if len(pending) < len(pinput.units) or covered:
        log.info("partition.resume", partition=partition.label, staged_units=len(pinput.units) - len(pending),
                 units_from_slices=len(from_slices), pending_units=len(pending),
                 documents_in_slices=sum(s.rows for found in covered.values() for s in found))
    return _Work(pinput, pending, covered, from_slices)


def _slices_of(committer: PartitionCommitter, pinput: PartitionInput, pending: list[Unit], slices: list[Slice]
               ) -> tuple[dict[str, list[Slice]], dict[str, list[Slice]]]:
    """What the slices an earlier run's actors staged hold of the `pending` units: unit id → its disjoint slices,
    for the units they hold in part, and for those they hold whole (staged in them: not read again). A slice that
    does not read back as its rows is deleted, and its rows are redone."""
    by_unit: dict[str, list[Slice]] = defaultdict(list)
    for found in slices:
        by_unit[found.unit_id].append(found)
    covered: dict[str, list[Slice]] = {}
    candidates: list[tuple[str, list[Slice]]] = []
    for unit in pending:
        found = [s for s in disjoint(by_unit.get(unit.id, [])) if unit.start <= s.start and s.stop <= unit.stop]
        if not found:
            continue
        if uncovered(unit.start, unit.stop, found):
            covered[unit.id] = found
            continue
        candidates.append((unit.id, found))
    readable = _readable(committer, pinput.partition.label, candidates)
    whole = {unit_id: found for (unit_id, found), ok in zip(candidates, readable, strict=True) if ok}
    return covered, whole


def _readable(committer: PartitionCommitter, label: str, groups: list[tuple[str, list[Slice]]]) -> list[bool]:
    """Whether each (unit id, slices) group reads back as its rows, read side by side (`SLICE_READERS` threads: on S3
    each slice is a request, and a rerun after a death mid-partition finds thousands). A group that does not is
    deleted, and its rows redone."""
    def check(group: tuple[str, list[Slice]]) -> bool:
        unit_id, found = group
        try:
            read_slices(committer.storage, found)
            return True
        except (ValueError, OSError, StorageError) as exc:  # pyarrow's ArrowInvalid is a ValueError
            log.warning("partition.slice_unreadable", partition=label, unit=unit_id, slices=len(found),
                        error=f"{type(exc).__name__}: {exc}", action="their rows are redone")
            for s in found:
                committer.storage.delete(s.path)
            return False

    if len(groups) < 2:
        return [check(g) for g in groups]
    with ThreadPoolExecutor(max_workers=SLICE_READERS) as pool:
        return list(pool.map(check, groups))


class _Commits:
    """Commits one partition when its last unit is staged, and records the result."""

    def __init__(self, committer: PartitionCommitter, results: dict[str, PartitionResult], fail_fast: bool) -> None:
        self.committer = committer
        self.results = results
        self.fail_fast = fail_fast
        # A partition's seconds run from the previous commit (or the start) to its own commit, so the days of a
        # backfill add up to the run.
        self.last_commit = time.perf_counter()

    def __call__(self, w: _Work) -> None:
        label = w.input.partition.label
        try:
            slices = _Unpacked(w.in_slices)  # each unit's slices unpacked as the commit reads it, not all at once
            self.results[label] = self.committer.commit(w.input, self.last_commit, w.resumed, slices)
            release_memory()  # the commit's reads and row groups
            self.last_commit = time.perf_counter()
            w.in_slices.clear()  # committed: a backfill's driver keeps nothing of its days' slices
            w.covered = {}
        except (AccountingError, StorageError, OSError) as exc:
            if self.fail_fast:
                raise
            log.error("partition.failed", partition=label, error=str(exc))
            self.results[label] = PartitionResult(label, "failed", error=str(exc))


class _Unpacked(dict):  # type: ignore[type-arg]
    """A partition's slices by unit id, each unit's unpacked (`pipeline.output.slices.unpack`) when it is asked for."""

    def get(self, key: str, default: Any = None) -> Any:
        found = super().get(key)
        return default if found is None else unpack(found)


def _resume(work: list[_Work], commit: Callable[[_Work], None]) -> list[_Work]:
    """Commit each partition an earlier run staged in full but died before committing; the rest still stream."""
    for w in work:
        if not w.pending:
            commit(w)
    return [w for w in work if w.pending]


def _stream_outcomes(loaded: LoadedConfig, streaming: list[_Work], committer: PartitionCommitter,
                     commit: Callable[[_Work], None], progress: Progress, manifest: RunManifest,
                     actors: list[Any]) -> float | None:
    """Route the schemas, start Ray and stream every pending unit; the engines' generation seconds.

    Ray and Ray Data (83 MB of the driver's RSS) are imported here, after the plan: a plan's `check_ids` of
    10⁶ ids takes about 170 MB for a moment, and the two no longer add up into the driver's peak."""
    import ray

    from pipeline.stats import new_desk

    settings = loaded.s3_settings
    routes = route_schemas(RoutingConfig.of(loaded), [(storage_for(w.input.partition.input_uri, settings), w.pending)
                                                      for w in streaming])
    manifest.schema_checks = [v.__dict__ for v in routes.verdicts]
    progress.stage("starting Ray")
    connect_ray()
    desk = new_desk(committer.run_id)  # the actors' timings, live counts and crash journal (pipeline.stats)
    actors.append(desk)
    progress.watch(desk)
    _stream(loaded, streaming, committer, commit, progress, desk, settings, routes)
    snapshot = ray.get(desk.run_snapshot.remote())
    manifest.actors = snapshot["actors"]
    if snapshot.get("stage_cpu_ms"):  # the actors' CPU per document beside the engine, by stage (workers.stages)
        manifest.extra["stage_cpu_ms"] = snapshot["stage_cpu_ms"]
    if snapshot.get("windows"):  # windows per document: median, max, share read in more than one (workers.windows)
        manifest.extra["windows"] = snapshot["windows"]
    return snapshot["generation_s"]


def _stream(
    loaded: LoadedConfig,
    streaming: list[_Work],
    committer: PartitionCommitter,
    commit: Callable[[_Work], None],
    progress: Progress,
    stats: Any,
    settings: S3Settings,
    routes: SchemaRoutes,
) -> None:
    """Run the plan over every pending unit; commit each partition when its last unit is staged. Raises
    `AccountingError` on any duplicate or missing outcome.

    With one actor pool the actors stage each batch as a slice and return its receipt (`pipeline.output.slices`):
    the driver counts each unit's rows and notes its slices, and holds no outcome. A run split across two pools
    gets the outcomes in full, buffers each unit's and stages it as one file when the last has come."""
    from pipeline.dataflow import build_dataset, build_spec
    from pipeline.stage_config import ActorConfig

    units = [u for w in streaming for u in w.pending]
    in_storage = storage_for(streaming[0].input.partition.input_uri, settings)
    id_field = streaming[0].input.schema.field(loaded.config.input.id_column)
    spec = build_spec(ActorConfig.of(loaded), committer.run_id, routes)
    books = _Books(streaming, committer, commit, progress)
    slices = _slice_staging(streaming, committer, books.counts) if len(routes.backends) == 1 else None
    books.writer = slices.writer if slices else None
    dataset = build_dataset(loaded.config.workers, units, in_storage, id_field, spec, stats, routes, slices)
    gc.freeze()  # the modules and the plan live as long as the run: full collections of the stream skip them
    done = dead = batches = 0
    stream = outcome_batches(dataset)
    try:
        for batch in stream:
            log.debug("driver.batch", rows=batch.num_rows, unix=round(time.time(), 3))
            for unit_id, piece in unit_pieces(batch):
                books.take(unit_id, piece)
            done += batch.num_rows
            dead += pc.sum(pc.not_equal(batch.column(Col.KIND), Kind.ROW.value)).as_py() or 0
            progress.see(batch)
            progress.update(done, dead)
            if (batches := batches + 1) % RELEASE_EVERY == 0:
                release_memory()
    finally:
        getattr(stream, "close", lambda: None)()  # a unit pool's actors go now, not when the generator is collected
    books.check_complete()


class _Books:
    """The driver's accounts of a stream: each pending unit's outcomes counted (a duplicate or a unit left
    incomplete is an `AccountingError`), its slices noted (or, in a split run, its outcomes buffered and staged as a
    file), and each partition committed when its last unit is staged."""

    def __init__(self, streaming: list[_Work], committer: PartitionCommitter, commit: Callable[[_Work], None],
                 progress: Progress) -> None:
        self.owner: dict[str, tuple[_Work, Unit]] = {u.id: (w, u) for w in streaming for u in w.pending}
        self.committer = committer
        self.commit = commit
        self.progress = progress
        self.counts: Counter[str] = Counter()
        self.buffers: dict[str, list[pa.Table]] = defaultdict(list)
        self.writer: SliceWriter | None = None

    def take(self, unit_id: str, piece: pa.Table) -> None:
        """One unit's piece of an outcome batch (a receipt, or outcomes in full)."""
        if unit_id not in self.owner:
            raise AccountingError(f"outcomes for unknown unit {unit_id}")
        w, unit = self.owner[unit_id]
        self.counts[unit_id] += piece.num_rows
        if self.counts[unit_id] > unit.rows:
            raise AccountingError(f"unit {unit_id} of {unit.path}: {self.counts[unit_id]} outcomes for "
                                  f"{unit.rows} documents (a duplicate)")
        if Internal.SLICE in piece.column_names:
            if self.writer is None:
                raise AccountingError(f"outcomes of unit {unit_id} name a slice in a run that stages no slices")
            _note_slices(w.in_slices[unit_id], unit_id, piece, self.writer)
        else:
            self.buffers[unit_id].append(piece)
        if self.counts[unit_id] == unit.rows:
            if unit_id in self.buffers:  # a split run's unit: staged as one file
                self.committer.stage(w.input.partition, unit_id, self.buffers.pop(unit_id))
            elif unit_id in w.in_slices:  # kept until the partition commits: as bounds, not paths
                w.in_slices[unit_id] = pack(unit_id, w.in_slices[unit_id])  # type: ignore[assignment]
            self.progress.mark("first_staged_s")  # the first unit's outcomes are durable: a rerun keeps them
            w.left -= 1
            if w.left == 0:
                self.commit(w)
                self.progress.mark("first_commit_s")  # the first partition's rows are visible to queries

    def check_complete(self) -> None:
        missing = [uid for uid, (_, unit) in self.owner.items() if self.counts[uid] != unit.rows]
        if missing:
            raise AccountingError(f"{len(missing)} unit(s) came back incomplete, e.g. {missing[0]}")


def _note_slices(noted: list[Slice], unit_id: str, piece: pa.Table, writer: SliceWriter) -> None:
    """Note the slices a unit's piece of a batch names in `noted`, each once (Ray Data may join two short read
    tasks into one batch: then a piece names two). A piece of outcomes in full, not a receipt, is a batch whose
    actor could not write its slices: the driver writes them."""
    places = piece.column(Internal.SLICE)
    if places.null_count:
        raise AccountingError(f"{places.null_count} outcome(s) of unit {unit_id} came without their slice")
    paths = pc.unique(places).to_pylist()
    full = not is_receipt(piece)
    for path in paths:
        found = parse_slice(path)
        if found is None or found.unit_id != unit_id:
            raise AccountingError(f"outcomes of unit {unit_id} came with the slice of another: {path}")
        if full:
            part = piece if len(paths) == 1 else piece.filter(pc.equal(pc.cast(places, pa.string()), path))
            writer.write(found.path, part)
            log.info("driver.slice_staged", path=found.path, rows=part.num_rows, reason="its actor could not")
        if found not in noted:
            noted.append(found)


def _slice_staging(streaming: list[_Work], committer: PartitionCommitter, counts: Counter[str]) -> Any:
    """Where this run's actors stage the batches they finish, and the rows earlier runs' slices hold (counted in
    `counts`, and noted as their units' slices): `pipeline.dataflow.SliceStaging`."""
    from pipeline.dataflow import SliceStaging

    partitions = {w.input.partition.key: w.input.partition for w in streaming}
    return SliceStaging(SliceWriter(committer.storage, committer.run_id),
                        lambda u, start, stop: committer.slice_path(partitions[u.partition], u.id, start, stop),
                        _seed(streaming, committer, counts))


def _seed(streaming: list[_Work], committer: PartitionCommitter, counts: Counter[str]) -> dict[str, list[Slice]]:
    """The rows earlier runs' slices hold of units this run reads in part, into the units' counts and slices;
    returns the slices that stay counted (one that does not read back as its rows is deleted, and redone)."""
    covered: dict[str, list[Slice]] = {}
    for w in streaming:
        groups = [(unit_id, [s]) for unit_id, found in w.covered.items() for s in found]
        for (unit_id, (s,)), ok in zip(groups, _readable(committer, w.input.partition.label, groups), strict=True):
            if ok:
                w.in_slices[unit_id].append(s)
                counts[unit_id] += s.rows
                covered.setdefault(unit_id, []).append(s)
    return covered


def unit_pieces(batch: pa.Table) -> list[tuple[str, pa.Table]]:
    """The batch cut where its unit id changes: (unit id, its outcomes without the unit column) for each run of
    equal ids, in order, as zero-copy slices. A batch holds one unit or a few, each in one run, so this is one
    pass over the column where filtering once per unit id was one pass per unit; a unit whose outcomes come in
    several runs gives several pieces (the caller counts them all)."""
    n = batch.num_rows
    if n == 0:
        return []
    units = batch.column(UNIT_COLUMN).combine_chunks()
    outcomes = batch.drop_columns([UNIT_COLUMN])
    if n > 1:
        changed = pc.not_equal(units.slice(1), units.slice(0, n - 1))
        starts = [0, *(pc.indices_nonzero(changed.fill_null(True)).to_numpy() + 1).tolist()]
    else:
        starts = [0]
    ends = [*starts[1:], n]
    ids = units.take(pa.array(starts, pa.int64())).to_pylist()
    return [(uid, outcomes.slice(start, end - start)) for uid, start, end in zip(ids, starts, ends, strict=True)]


def outcome_batches(dataset: Any) -> Any:
    """The actors' outcome tables, each as soon as its unit (or, in a split run, its batch) is done: from a
    one-pool run's `pipeline.unit_pool.UnitPool` (its actors killed as the iteration closes) or a Ray Data dataset.

    `prefetch_batches=0`: with Ray Data's default of 1, a finished batch reached the driver only when the
    next one finished (6.4 s later on the bench), so staging and progress lagged a batch behind."""
    return dataset.iter_batches(batch_format="pyarrow", batch_size=None, prefetch_batches=0)


def _finalise(manifest: RunManifest, results: dict[str, PartitionResult], labels: list[str], progress: Progress,
              started: float, generation_s: float | None) -> None:
    """The run's totals, per partition in the order of `labels` and over the committed ones, and its timings."""
    ordered = [results[label] for label in labels if label in results]
    manifest.partitions = [r.__dict__ for r in ordered]
    committed = [r for r in ordered if r.status == "committed"]
    manifest.input_rows = sum(r.input_rows for r in committed)
    manifest.rows = sum(r.rows for r in committed)
    manifest.dead_letters = sum(r.dead_letters for r in committed)
    reasons: Counter[str] = Counter()
    tokens: Counter[str] = Counter()
    for r in committed:
        reasons.update(r.dead_letters_by_reason)
        tokens.update(r.tokens)
    manifest.dead_letters_by_reason = dict(sorted(reasons.items()))
    manifest.tokens = dict(tokens)
    total = time.perf_counter() - started
    inits = [a["engine_init_s"] for a in manifest.actors]
    compiles = [s for a in manifest.actors for s in a["schema_compile_s"].values()]
    manifest.timings = {
        "engine_init_s": round(max(inits), 3) if inits else None,
        "schema_compile_s": round(max(compiles), 3) if compiles else None,
        "generation_s": round(generation_s, 3) if generation_s is not None else None,
        "first_output_s": round(progress.first_output_s, 3) if progress.first_output_s else None,
        **progress.marks,
        "total_s": round(total, 3),
        "docs_per_s": round(progress.done / total, 3) if total and progress.done else None,
    }
    manifest.finished_at = datetime.now(timezone.utc).isoformat()
