"""`ExtractionActor`: an extraction actor that owns one vLLM engine: a Ray actor fed unit by unit by the driver
(`unit`, `pipeline.unit_pool`: the one-pool run), or a Ray Data actor-pool UDF (`__call__`: a split run's pools).

It builds the engine and pre-warms the job's compiled schema before it takes a batch, then hands
each batch to a `BatchExtractor`, which returns one outcome line per input line, in order.
"""

from __future__ import annotations

import logging
import os
import socket
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa
import structlog

from workers import logs
from workers.bundled_model import resolve_model_path
from workers.crashes import Gate, batch_key, crash_outcome
from workers.engine import (
    EngineStartError,
    EngineThread,
    engine_arguments,
    explain_start_failure,
    has_accelerator,
    is_fatal,
)
from workers.engine.args import usable_cores
from workers.engine.contract import Engine
from workers.engine.host import HostedEngine, shared_mode
from workers.engine.vllm_engine import chat_token_ids
from workers.extractor import BatchExtractor
from workers.memory import keep_trimmed, measure_need, release_free_memory
from workers.outcome import Col, Internal, is_receipt, receipt, to_ipc
from workers.reporter import reporter_for
from workers.spec import ExtractionSpec
from workers.stages import batch_clock, timed
from workers.windows import count_windows

log = structlog.get_logger(__name__)


def _node_id() -> str | None:
    try:
        import ray

        return ray.get_runtime_context().get_node_id()
    except Exception:  # noqa: BLE001 - outside Ray (tests, tools) there is no node
        return None


def _cpu_settings() -> dict[str, Any]:
    """What the forward pass gets on CPU: torch threads, usable cores and niceness (for the logs)."""
    torch = sys.modules.get("torch")  # only if the engine imported it: the simulated engine does not
    try:
        threads = torch.get_num_threads() if torch is not None else None
    except Exception:  # noqa: BLE001 - a broken torch: nothing to report
        threads = None
    return {"torch_threads": threads, "cores": usable_cores(), "nice": os.nice(0) if hasattr(os, "nice") else None,
            "omp_num_threads": os.environ.get("OMP_NUM_THREADS")}


def _in_ray() -> bool:
    """Whether this process is connected to a Ray cluster (an actor is; a bench's engine child is not)."""
    ray = sys.modules.get("ray")
    return bool(ray is not None and ray.is_initialized())


SIMULATED = "simulated"  # the `model.path` that selects the simulated engine


def start_engine(spec: ExtractionSpec, accelerator: bool) -> Engine:
    """The actor's engine, or `EngineStartError` with one line the driver shows as it is. `model.path: simulated`
    gives the simulated engine (`workers.simulated`): no model, latencies and outputs drawn from its settings."""
    if spec.model_path == SIMULATED:
        from workers.simulated import start_simulated

        return start_simulated(spec)
    try:
        path = resolve_model_path(spec.model_path)
        llm_args = engine_arguments(
            path, spec.max_model_len, spec.tensor_parallel_size, spec.engine_kwargs,
            accelerator, spec.backend, sequences=spec.sequences_in_flight,
            kv_need=None if accelerator else measure_need(spec, path, chat_token_ids))
        if shared_mode() and _in_ray():  # EXTRACT_ENGINE_HOST=shared: an engine that outlives the run
            if not accelerator:  # (workers.engine.host)
                return HostedEngine(llm_args, spec.sampling, spec.grammar_bounds)
            log.warning("engine_host.not_on_accelerator", action="this actor starts an engine of its own")
        return EngineThread(**llm_args)
    except EngineStartError:
        raise
    except Exception as exc:  # the budget, the model's files: one line, whatever the cause
        raise EngineStartError(explain_start_failure(exc)) from exc


def _exit_for_restart(actor: str, exc: BaseException) -> None:
    """The engine is gone: end this process, so that Ray restarts the actor (up to `workers.max_restarts`) and
    redoes every batch it held on a fresh engine. Raising instead would fail the dataset, and dead-lettering
    would turn the rest of the corpus into `engine_error`s."""
    log.error("actor.engine_dead", actor=actor, error=f"{type(exc).__name__}: {exc}",
              action="exiting so that Ray restarts the actor and redoes its batches")
    logging.shutdown()
    os._exit(EXIT_ENGINE_DEAD)


EXIT_ENGINE_DEAD = 75


class ExtractionActor:
    def __init__(self, spec: ExtractionSpec, stats: Any = None, journal: Any = None, slices: Any = None,
                 reader: Callable[[pa.Table], pa.Table] | None = None) -> None:
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
        logs.configure()
        # The simulated engine has no device: asking torch whether there is one costs a simulated actor 1.7 s of
        # CPU and 180 MB (measured on issue 27's resume bench), for nothing.
        accelerator = spec.model_path != SIMULATED and has_accelerator()
        self.stats = stats
        self.journal = journal  # the run's desk, its crash journal (workers.crashes): poison documents are isolated
        # Stages each finished batch where its `_slice` column says (pipeline.output.slices.SliceWriter): a driver
        # killed before it receives the batch does not cost the batch.
        self.slices = slices
        self.reader = reader  # a block of units' descriptions → their documents, read here (`pipeline.dataflow`)
        self.gate = Gate()
        self.name = f"{socket.gethostname()}:{os.getpid()}"
        self.reporter = reporter_for(spec.run_id, self.name)  # live counts for the driver's display
        self._stage("loading model")
        schemas, backend = spec.schema, spec.engine.backend
        engine = start_engine(spec, accelerator)
        self._stage("compiling schemas")
        self.extractor = BatchExtractor(engine, spec, min(spec.engine.max_model_len, engine.max_model_len))
        # Pre-warm every schema known up front: the job's, or each one listed in input.schema_table.
        # Schemas carried inline by rows are compiled as they first appear (BatchExtractor.warm).
        self.extractor.prepare()
        for key in schemas.schema_table:
            if schemas.routes.get(key, schemas.default_backend) != backend:
                continue  # that schema's rows go to the other backend's pool
            try:
                self.extractor.contract_for(key)
            except Exception:  # noqa: BLE001 - an unusable listed schema dead-letters its own rows later
                pass
        self.reported: set[str] = set()
        self._lock = threading.Lock()
        self._warm(engine)
        log.debug("actor.cpu", actor=self.name, **_cpu_settings())  # threads, cores, niceness: EXTRACT_LOG_LEVEL=debug
        if stats is not None:
            self.reported = set(self.extractor.compile_seconds)
            stats.record_actor.remote({"actor": self.name, "engine_init_s": engine.init_seconds, "backend": backend,
                                       "schema_compile_s": dict(self.extractor.compile_seconds),
                                       "ready_unix": time.time(), "node": _node_id()})
        if self.reporter is not None:
            engine.on_request_done = self.reporter.request_done  # counted as each request finishes
            engine.on_tokens = self.reporter.tokens  # and the tokens of every engine step, from the first one
            self.extractor.on_windows = self.reporter.windows_planned  # a windowed document counts once, not per window
        if not accelerator:  # malloc's free pages back to the kernel: now, then every TRIM_SECONDS (workers.memory)
            release_free_memory()
            keep_trimmed()
        self._stage("ready")

    def _warm(self, engine: Engine) -> None:
        schemas, compiled = self.extractor.spec.schema, self.extractor.compile_seconds
        log.info("actor.warm", actor=self.name, schema=f"{schemas.contract.name}@{schemas.contract.version}",
                 backend=self.extractor.spec.engine.backend, schemas=len(compiled),
                 engine_init_s=round(engine.init_seconds, 2), compile_s=round(sum(compiled.values()), 3))

    def _stage(self, stage: str) -> None:
        if self.reporter is not None:
            self.reporter.stage(stage)

    def _extract(self, batch: pa.Table) -> pa.Table:
        try:
            return self.extractor(batch)
        except BaseException as exc:
            if is_fatal(exc):
                _exit_for_restart(self.name, exc)
            raise

    def _journaled(self, batch: pa.Table) -> pa.Table:
        """`batch`'s outcomes, its attempt recorded in the run's crash journal; a batch that was in flight when an
        actor died before is isolated (`_isolate`)."""
        import ray

        key = batch_key(batch, self.extractor.spec.id_column, Internal.UNIT)
        suspect = self._ask(lambda: ray.get(self.journal.suspect.remote(key)))
        if suspect is None:
            return self._extract(batch)
        # The attempt opens once the gate is passed: a batch still waiting at a crash did not run, and is not blamed.
        with self.gate.exclusive() if suspect else self.gate.shared():
            opened = self._ask(lambda: ray.get(self.journal.begin.remote(key, self.name)))
            if opened is None:
                return self._extract(batch)
            crashes, poison = opened
            try:
                if not crashes:
                    return self._extract(batch)
                log.warning("actor.isolating", actor=self.name, documents=batch.num_rows, crashes=crashes,
                            poison=len(poison), action="one document at a time, alone in this actor")
                return self._isolate(batch, key, poison)
            finally:  # not reached when the process dies: the open attempt is the journal's record of the crash
                self._ask(lambda: ray.get(self.journal.end.remote(key)))

    def _ask(self, call: Any) -> Any:
        """`call()` to the journal, or None once it is gone: batches then run as before it (a crash redoes them)."""
        if self.journal is None:
            return None
        try:
            return call()
        except Exception as exc:  # noqa: BLE001 - the journal's actor died: isolation is lost, nothing else
            log.warning("actor.journal_lost", actor=self.name, error=f"{type(exc).__name__}: {exc}")
            self.journal = None
            return None

    def _isolate(self, batch: pa.Table, key: str, poison: dict[int, dict[str, Any]]) -> pa.Table:
        """A batch that crashed an actor before, one document at a time, each recorded as alone in flight; a
        document that was alone in flight at a crash is an `actor_crash` dead letter."""
        import ray

        pieces = []
        texts = batch.column(self.extractor.spec.text_column)
        ids = batch.column(self.extractor.spec.id_column)
        for row in range(batch.num_rows):
            one = batch.slice(row, 1)
            if row in poison:
                log.error("actor.poison_document", actor=self.name, document_id=str(ids[row].as_py())[:200],
                          crashes=poison[row].get("crashes"))
                pieces.append(self.extractor.table(one, [crash_outcome(poison[row])]))
                continue
            text = texts[row].as_py()
            info = {"document_id": str(ids[row].as_py())[:200], "characters": len(text) if text else 0,
                    "pid": os.getpid(), "node": _node_id()}
            self._ask(lambda row=row, info=info: ray.get(self.journal.alone.remote(key, row, info)))
            self.extractor.on_stage(lambda stage, row=row, info=info: self._ask(lambda: ray.get(
                self.journal.alone.remote(key, row, {**info, "stage": stage}))))
            try:
                pieces.append(self._extract(one))
            finally:
                self.extractor.on_stage(None)
            self._ask(lambda: ray.get(self.journal.alone.remote(key, None)))
        return pa.concat_tables(pieces)

    def _stage_slices(self, places: pa.ChunkedArray, table: pa.Table) -> pa.Table:
        """Write the batch's outcomes to its slice file (one per distinct `_slice` value, in the usual case one) and
        return the batch's receipt (`workers.outcome.receipt`). If a write fails, the outcomes in full with
        their `_slice` column: the driver writes the slices then."""
        import pyarrow.compute as pc

        values = pc.cast(places, pa.string())
        paths = [p for p in pc.unique(values).to_pylist() if p]
        staged = values.null_count == 0
        for path in paths:
            part = table if len(paths) == 1 and values.null_count == 0 else table.filter(pc.equal(values, path))
            try:
                self.slices.write(path, part)
            except Exception as exc:  # noqa: BLE001 - the store's error: the batch still goes to the driver
                staged = False
                log.warning("actor.slice_not_staged", actor=self.name, path=path, error=f"{type(exc).__name__}: {exc}",
                            action="the outcomes go to the driver in full, and the driver writes the slice; a "
                                   "driver killed first costs this batch on the rerun")
        return receipt(table, places) if staged else table.append_column(Internal.SLICE, places)

    def __call__(self, block: pa.Table) -> pa.Table:
        """Runs on Ray Data's threads, up to `workers.batches_in_flight` at once; one engine thread serves them. A
        block naming several slices (a unit's batches: `pipeline.reader.read_tasks`) is run and staged one batch
        at a time; if any batch's slice could not be written, every batch's outcomes go back in full. With a
        reader, `block` describes the unit and is read into its documents first."""
        if self.reader is not None:
            block = self.reader(block)
        batches = slice_runs(block)
        if len(batches) < 2:
            return self._batch(block)[0]
        done = [self._batch(batch) for batch in batches]
        if all(full is not None for _, full in done):  # every batch staged: their receipts, or the merged slice's
            receipts = pa.concat_tables([returned for returned, _ in done]).unify_dictionaries()
            return self._merge(receipts, [full for _, full in done if full is not None])
        return pa.concat_tables([returned if full is None else full for returned, full in done]).unify_dictionaries()

    def _merge(self, receipts: pa.Table, outcomes: list[pa.Table]) -> pa.Table:
        """A task's batches, each staged as its slice, staged again as one slice of the task's rows
        (`SliceWriter.merge`), their slices deleted: the receipts then name the merged slice. If it cannot be written,
        the receipts as they are (each batch's slice stays, and the commit reads them all)."""
        import pyarrow.compute as pc

        places = [pc.unique(t.column(Internal.SLICE)).cast(pa.string()).to_pylist() for t in outcomes]
        if any(len(p) != 1 for p in places):
            return receipts
        try:
            merged = self.slices.merge([p[0] for p in places], pa.concat_tables(
                [t.drop_columns([Internal.SLICE]) for t in outcomes], promote_options="default"))
        except Exception as exc:  # noqa: BLE001 - the store's error: each batch's slice still holds its rows
            log.warning("actor.slices_not_merged", actor=self.name, slices=len(places),
                        error=f"{type(exc).__name__}: {exc}", action="the commit reads each batch's slice")
            return receipts
        if merged is None:
            return receipts
        column = pa.DictionaryArray.from_arrays(pa.array(np.zeros(receipts.num_rows, np.int32)),
                                                pa.array([merged], pa.string()))
        return receipts.set_column(receipts.schema.get_field_index(Internal.SLICE), Internal.SLICE, column)

    def unit(self, task: dict[str, Any]) -> bytes:
        """One unit's description (a `pipeline.reader.read_tasks` dict), as the driver's unit pool sends it
        (`pipeline.unit_pool`): read here into its documents (the actor's reader), run and staged; its receipt (or
        its outcomes in full, where a slice could not be written) as Arrow IPC bytes (`workers.outcome.to_ipc`)."""
        return to_ipc(self(pa.Table.from_pylist([task])))

    def units(self, tasks: list[dict[str, Any]]) -> list[bytes]:
        """Several units' descriptions, run one after the other as `unit` runs each: their receipts, in order (the
        unit pool groups units into one task when a run has many: `pipeline.unit_pool.units_per_task`)."""
        return [self.unit(task) for task in tasks]

    def _batch(self, batch: pa.Table) -> tuple[pa.Table, pa.Table | None]:
        """What goes back for one batch (its receipt once its outcomes are staged, else its outcomes), and, with a
        receipt, the outcomes with their `_slice` column (else None)."""
        # With `actor.batch` at the end, a batch cut off in flight (a killed driver or actor) is a start without an
        # end: lab/experiments/resume_at_scale.py counts the work redone after a kill from the two.
        log.debug("actor.batch_start", actor=self.name, documents=batch.num_rows)
        places = batch.column(Internal.SLICE) if Internal.SLICE in batch.column_names else None
        if places is not None:
            batch = batch.drop_columns([Internal.SLICE])
        with batch_clock() as clock:  # the batch thread's CPU per stage beside the engine (workers.stages)
            table = self._extract(batch) if self.journal is None or not batch.num_rows else self._journaled(batch)
            outcomes = table
            full = None
            if places is not None and self.slices is not None and table.num_rows:
                with timed("staging"):
                    table = self._stage_slices(places, table)  # the receipt: the outcomes are staged
                full = outcomes.append_column(Internal.SLICE, places) if is_receipt(table) else None
        span = self.extractor.last_generation
        log.debug("actor.batch", actor=self.name, documents=batch.num_rows,
                  generation_s=round(span[1] - span[0], 3) if span else None,
                  started_unix=round(span[0], 3) if span else None)
        if self.stats is not None:
            with self._lock:  # a snapshot: another batch's thread may be adding a schema it just compiled
                fresh = {h: s for h, s in list(self.extractor.compile_seconds.items()) if h not in self.reported}
                self.reported.update(fresh)
            if fresh:
                self.stats.record_compiles.remote(self.name, fresh)
            if self.extractor.last_generation is not None:
                self.stats.record_batch.remote(self.name, *self.extractor.last_generation, table.num_rows,
                                               clock.seconds, windows_of(outcomes))
        if self.reporter is not None:
            self.reporter.batch_done(outcomes)
        return table, full


def windows_of(outcomes: pa.Table) -> dict[int, int]:
    """A batch's documents by window count (`_windows`), for the run record (`workers.windows.count_windows`)."""
    if Col.WINDOWS not in outcomes.column_names:
        return {}
    return count_windows(outcomes.column(Col.WINDOWS).to_pylist())


def slice_runs(block: pa.Table) -> list[pa.Table]:
    """The block cut where its `_slice` value changes (each run one batch), or the block itself without one."""
    if Internal.SLICE not in block.column_names or block.num_rows < 2:
        return [block]
    import pyarrow.compute as pc

    places = pc.cast(block.column(Internal.SLICE), pa.string())
    cuts = pc.indices_nonzero(pc.not_equal(places.slice(1), places.slice(0, block.num_rows - 1)).fill_null(True))
    starts = [0, *(cuts.to_numpy() + 1).tolist()]
    return [block.slice(a, b - a) for a, b in zip(starts, [*starts[1:], block.num_rows], strict=True)]
