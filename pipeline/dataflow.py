"""The Ray Data graph a run streams through: read tasks → documents (tagged by unit) → extraction actor pool →
outcome batches. (What each partition contributes is decided before, in `pipeline.planning`.)"""

from __future__ import annotations

import dataclasses
import functools
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc
import structlog

from pipeline.config import WorkersConfig
from pipeline.reader import read_tasks, read_units
from pipeline.routing import SchemaRoutes
from pipeline.stage_config import ActorConfig
from pipeline.storage import Storage
from pipeline.unit_pool import UnitPool
from pipeline.units import Unit
from workers import logs, ray_compat
from workers.actor import ExtractionActor
from workers.extractor import BACKEND_COLUMN
from workers.memory import read_sample
from workers.spec import ExtractionSpec
from workers.windows import window_policy

if TYPE_CHECKING:
    import ray.data

log = structlog.get_logger(__name__)

# Read tasks are light I/O; they ask for no CPU so that they never wait behind actors holding every core.
READ_TASK_CPUS = 0.0
# How long Ray Data's scheduling loop waits for its tasks before it looks again (Ray's own is 0.1 s). It waits for
# every active task, so it always waits this long: each look is a few ms of the driver's CPU whatever the
# throughput, and at 0.1 s that was most of the driver's CPU per outcome of a simulated run (issue 27). A finished
# batch waits at most this long to reach the driver; each actor has its next batch queued meanwhile.
SCHEDULER_TICK_S = 0.5
# Ray Data's map operators keep each output block's stats for the run's life and its iterator pickles them all every
# few seconds (`workers.ray_compat.bound_block_stats`): kept to the last this many, the driver's memory and CPU per
# outcome stop growing with the run.
BLOCK_STATS_KEPT = 1000
# How often the driver's iterator looks for Ray Data's next output block (Ray's own: every 10 ms, about 9 ms of the
# driver's CPU a second; blocks reach it at the scheduling loop's ticks, `SCHEDULER_TICK_S`, anyway).
OUTPUT_POLL_S = 0.1
FORWARDED_ENV = ("VLLM_LOGGING_LEVEL", "VLLM_LOGGING_STREAM", "VLLM_CPU_OMP_THREADS_BIND", "VLLM_CPU_KVCACHE_SPACE",
                 "VLLM_ENABLE_V1_MULTIPROCESSING", "HF_HUB_OFFLINE", "EXTRACT_CACHE_DIR", "EXTRACT_LOG_FORMAT",
                 "EXTRACT_LOG_LEVEL", "EXTRACT_MASK_KERNEL", "EXTRACT_PENALTY_KERNEL", "EXTRACT_VERBOSE",
                 "EXTRACT_ENGINE_HOST", "EXTRACT_ENGINE_HOST_IDLE_S")


def actor_env(gpus_per_actor: float) -> dict[str, str]:
    """Environment for extraction actors. On CPU the engine runs in the actor's own process."""
    env = {"TOKENIZERS_PARALLELISM": "false"}
    for key in FORWARDED_ENV:
        if key in os.environ:
            env[key] = os.environ[key]
    for key, value in logs.actor_quiet_env().items():  # vLLM at ERROR, no torch/Python warnings, unless verbose
        env.setdefault(key, value)
    env.setdefault("VLLM_LOGGING_STREAM", "ext://sys.stderr")  # stdout is for the run's summary
    if gpus_per_actor == 0:
        env.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    from workers.memory import actor_memory_env  # malloc's arenas, vLLM's grammar cache: read at process start

    for key, value in actor_memory_env(cpu=gpus_per_actor == 0).items():
        env.setdefault(key, os.environ.get(key, value))  # the driver's own value wins
    return env


def build_spec(job: ActorConfig, run_id: str, routes: SchemaRoutes | None = None) -> ExtractionSpec:
    """The actors' spec: `job` (`ActorConfig.of(loaded)`), the run's id, and where routing sent the schemas."""
    model, policy = job.model, job.policy
    routes = routes or SchemaRoutes(default=policy.backends[0])
    return ExtractionSpec(
        run_id=run_id,
        id_column=job.input.id_column,
        text_column=job.input.text_column,
        prompt_template=job.prompt,
        contract=job.contract,
        model_path=job.model_path,
        model_name=model.path,
        max_tokens=model.max_tokens,
        temperature=model.temperature,
        max_model_len=model.max_model_len,
        tensor_parallel_size=job.workers.tensor_parallel_size,
        sequences_in_flight=job.workers.batch_size * job.workers.batches_in_flight,
        engine_kwargs=dict(model.engine_kwargs),
        constrained=model.constrained,
        backend=routes.default,
        schema_column=job.input.schema_column,
        schema_table=dict(job.schema_table),
        schema_limits=job.limits,
        unsupported=dict(routes.unsupported),
        routes=dict(routes.by_value),
        default_backend=routes.default,
        prompt_schema=job.prompt_schema,
        system=job.system,
        examples=tuple((example.document, output) for example, output in job.examples),
        chat_template=job.chat_template,
        # output.confidence: the sampled token's log-probability with every token (workers.confidence)
        sampling={**model.sampling.options(), **({"logprobs": 0} if job.confidence else {})},
        retry=model.retry.policy(model.temperature, model.sampling.seed),
        grammar_bounds=(policy.max_string_length, policy.max_array_items),
        grounding=policy.grounding,
        ground_numbers=policy.ground_numbers,
        grounding_locale=job.grounding_locale,
        grounding_screens=tuple(policy.grounding_screens),
        repeated_items=policy.repeated_items,
        min_confidence=job.min_confidence,
        calibration=job.calibration,
        long_documents=job.input.long_documents,
        windows=window_policy(job.input),
    )


def build_dataset(
    workers: WorkersConfig,
    units: list[Unit],
    storage: Storage,
    id_field: pa.Field,
    spec: ExtractionSpec,
    stats: Any,
    routes: SchemaRoutes | None = None,
    slices: SliceStaging | None = None,
) -> UnitPool | ray.data.Dataset:
    """Documents → one extraction actor pool per backend in use → outcomes (`pipeline.run.outcome_batches`).

    With one backend (the usual case) there is one pool, fed unit by unit by the driver (`pipeline.unit_pool`,
    no Ray Data), and with `slices` its actors stage each batch they finish (`pipeline.output.slices`), and the
    rows earlier slices hold are not read. With two, a Ray Data graph: rows carry `_backend` and each pool takes
    its own; the driver's per-unit accounting does not mind a unit's outcomes coming in parts.
    `workers`: the job's `workers` section, all the graph reads of the job besides `spec`."""
    # The input's sizing document for the actors' CPU KV cache (workers.memory): read once, here.
    spec = dataclasses.replace(spec, kv_sample=read_sample(storage, units, spec, cpu=not workers.gpus_per_actor))
    routes = routes or SchemaRoutes(default=spec.backend)
    split = len(routes.backends) > 1
    # A document that kills its actor is isolated and dead-lettered (workers.crashes); that takes restarts.
    journal = stats if workers.max_restarts else None  # the run's desk keeps the journal too (pipeline.stats)
    if not split:
        # One pool (the usual run): the driver hands each unit's description to an actor, which reads, runs and
        # stages it and returns its receipt (`pipeline.unit_pool`); the documents never pass through the driver.
        return UnitPool(read_tasks(units, workers.batch_size, slices.path if slices else None,
                                   slices.covered if slices else None),
                        workers, {"spec": dataclasses.replace(spec, backend=routes.default), "stats": stats,
                                  "journal": journal, "slices": slices.writer if slices else None,
                                  "reader": _reader(storage, id_field, spec, routes, split)},
                        actor_env(workers.gpus_per_actor))
    import ray.data  # a split run's graph only: a one-pool driver never imports Ray Data (~0.5 s of CPU, ~100 MB)

    logs.quiet_ray_data()
    ctx = ray.data.DataContext.get_current()
    # Outcomes flow to the driver as each batch finishes, not held back behind a slower earlier batch.
    # Batches are still dispatched in input order, so partitions complete about in order and the driver
    # holds outcomes only for units with a batch still out; it accounts for every unit whatever the order.
    ctx.execution_options.preserve_order = False
    ctx.enable_progress_bars = False
    slow_scheduler_tick()
    slow_output_poll()
    bound_block_stats()
    documents = _documents(units, storage, id_field, spec, workers, routes, split)
    branches = [_actor_pool(documents.map_batches(_only_backend, fn_kwargs={"backend": b}, batch_size=None,
                                                  batch_format="pyarrow", num_cpus=READ_TASK_CPUS),
                            workers, dataclasses.replace(spec, backend=b), stats, journal)
                for b in routes.backends]
    return branches[0].union(*branches[1:])


# The Ray settings a process has warned about (`_tuned`): each says so once per process, not once per run.
_warned: set[str] = set()


def _tuned(setting: str, problem: str | None, warning: str) -> bool:
    """True where the Ray door set `setting` (`problem` None); else the run goes on at Ray's own and `warning`
    (with this Ray's version and what the door must learn) is logged once per process."""
    if problem is None:
        return True
    if setting not in _warned:
        import ray

        _warned.add(setting)
        log.warning(f"{warning}: {problem} (ray {ray.__version__}); the run goes on; workers/ray_compat.py "
                    f"{setting} needs this Ray's names for it")
    return False


def slow_scheduler_tick(seconds: float = SCHEDULER_TICK_S, state: Any = None) -> bool:
    """Set the scheduling loop's wait (`SCHEDULER_TICK_S`; EXTRACT_SCHEDULER_TICK_S overrides it): a private constant
    of Ray Data's executor, set through the Ray door (`workers.ray_compat.set_scheduler_tick`; `state`: the module
    to set it in). If this Ray has no such constant, or no function of the module reads it any more, the run
    goes on at Ray's own tick (it is a cost of the driver's CPU, not of correctness) and says so in one warning
    line per process naming the constant, so a Ray upgrade that renames it is seen, not silently slower.
    True if the wait is set."""
    problem = ray_compat.set_scheduler_tick(float(os.environ.get("EXTRACT_SCHEDULER_TICK_S", seconds)), state)
    return _tuned("set_scheduler_tick", problem, f"Ray Data's scheduling loop keeps Ray's own wait between looks, "
                                                 f"not {seconds} s, with more of the driver's CPU per outcome")


def slow_output_poll(seconds: float = OUTPUT_POLL_S, state: Any = None) -> bool:
    """Set how often the driver looks for Ray Data's next output block (`OUTPUT_POLL_S`; EXTRACT_OUTPUT_POLL_S
    overrides it) through the Ray door (`workers.ray_compat.set_output_poll`; `state`: the module to set it in).
    Where this Ray waits otherwise, the run goes on at Ray's own 10 ms and says so once per process. True if set."""
    problem = ray_compat.set_output_poll(float(os.environ.get("EXTRACT_OUTPUT_POLL_S", seconds)), state)
    return _tuned("set_output_poll", problem, f"the driver looks for Ray Data's next output every 10 ms, not "
                                              f"{seconds} s, with more of the driver's CPU per second")


def bound_block_stats(keep: int = BLOCK_STATS_KEPT, state: Any = None) -> bool:
    """Bound what Ray Data keeps per output block to the last `keep` (through the Ray door,
    `workers.ray_compat.bound_block_stats`; `state`: the module to patch). Where this Ray keeps them otherwise,
    the run goes on (its driver's memory and CPU then grow with its blocks) and says so once per process.
    True if bounded."""
    problem = ray_compat.bound_block_stats(keep, state)
    return _tuned("bound_block_stats", problem, "Ray Data keeps every output block's stats for the run, its "
                                                "driver's memory growing with its blocks")


def read_concurrency(workers: WorkersConfig) -> int:
    """Read tasks at once: enough to keep every actor's batches in flight fed, one more batch each queued. The
    tasks ask for no CPU (`READ_TASK_CPUS`), so without a bound Ray would start a Python worker for every read
    task of the run at once (124 on a 2-core node for 10^5 documents in batches of 500, minutes of start-up)."""
    return max(2, workers.actors * (workers.batches_in_flight + 1))


@dataclasses.dataclass
class SliceStaging:
    """What a run's actors need to stage the batches they finish (`pipeline.output.slices`): the writer they call,
    where each batch goes (unit, start, stop → path), and the rows earlier runs' slices hold (unit id → slices)."""

    writer: Any
    path: Callable[[Unit, int, int], str]
    covered: dict[str, list[Any]] = dataclasses.field(default_factory=dict)


def _reader(storage: Storage, id_field: pa.Field, spec: ExtractionSpec, routes: SchemaRoutes,
            split: bool) -> Callable[[pa.Table], pa.Table]:
    """Read tasks (a table of `pipeline.reader.read_tasks`' dicts) → their documents (`read_units`), for this run."""
    return functools.partial(read_units, storage=storage, id_field=id_field, text_column=spec.text_column,
                             schema_column=spec.schema_column, routes=routes.by_value if split else None,
                             default_backend=routes.default)


def _documents(units: list[Unit], storage: Storage, id_field: pa.Field, spec: ExtractionSpec,
               workers: WorkersConfig, routes: SchemaRoutes, split: bool) -> ray.data.Dataset:
    """The units' documents for a split run (each row carries the backend its schema routes to): one read task per
    batch, since each pool filters its rows out of every block.

    The tasks are a `UnitsDatasource`'s, not `from_items`' blocks: Ray Data keeps the metadata (with its schema) of
    every block `from_items` makes in the dataset's stats and pickles them all to its stats actor every 5 s while the
    driver iterates, a cost that grew with the units of the run (issue 57); a datasource's read tasks leave none."""
    import ray.data

    from pipeline.units_source import UnitsDatasource

    tasks = read_tasks(units, workers.batch_size)
    source = UnitsDatasource(tasks, _reader(storage, id_field, spec, routes, split))
    return ray.data.read_datasource(
        source,
        override_num_blocks=max(len(tasks), 1),
        num_cpus=READ_TASK_CPUS,
        compute=ray.data.TaskPoolStrategy(size=read_concurrency(workers)),  # `concurrency=`: deprecated in Ray 2.51
    )


def _actor_pool(rows: ray.data.Dataset, workers: WorkersConfig, spec: ExtractionSpec, stats: Any,
                journal: Any = None) -> ray.data.Dataset:
    """`rows` through a Ray Data pool of extraction actors for `spec` (its backend): a split run's."""
    import ray.data

    resources = workers.ray_resources()
    return rows.map_batches(
        ExtractionActor,
        fn_constructor_kwargs={"spec": spec, "stats": stats, "journal": journal},
        # Each block is one batch already (one read task per batch, above). A batch size here would make
        # Ray Data bundle blocks up to it, e.g. a short last block with a full one, run as one task.
        batch_size=None,
        batch_format="pyarrow",
        compute=ray.data.ActorPoolStrategy(
            size=workers.actors,
            # Up to this many batches run their (thread-safe) UDF at once in each actor; their requests
            # meet in the actor's one engine thread (workers.engine.EngineThread).
            max_tasks_in_flight_per_actor=workers.batches_in_flight,
            max_concurrent_calls_per_actor=workers.batches_in_flight,
            enable_true_multi_threading=True),
        num_cpus=resources["num_cpus"],
        num_gpus=resources["num_gpus"],
        # An actor whose engine died exits (workers/actor.py); Ray restarts it this many times and retries
        # the batches it held. Ray Data's default is to restart forever. A batch in flight at a crash is then
        # retried one document at a time, and a document alone in flight at a second crash is dead-lettered
        # `actor_crash` (workers.crashes): isolating one costs two restarts.
        max_restarts=workers.max_restarts,
        max_task_retries=-1 if workers.max_restarts else 0,
        runtime_env={"env_vars": actor_env(workers.gpus_per_actor)},
    )


def _only_backend(batch: pa.Table, backend: str) -> pa.Table:
    return batch.filter(pc.equal(batch.column(BACKEND_COLUMN), backend))
