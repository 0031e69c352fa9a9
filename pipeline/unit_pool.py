"""One pool of extraction actors fed unit by unit by the driver itself, without Ray Data (issue 57): the one-pool run.

Each unit's description (a `pipeline.reader.read_tasks` dict, ~0.6 KB) is one actor task
(`ExtractionActor.unit`): the actor reads the unit's documents, runs and stages them batch by batch, and returns the
unit's receipt, as Arrow IPC bytes (`workers.outcome.to_ipc`: Ray's own pickling of the table cost the driver ~2 ms
a unit to read back). Through Ray Data the same unit was two Ray tasks (a read task returning the description, then the
actor task) and Ray Data's scheduling loop, its iterator's threads and its stats: about two thirds of the driver's
CPU while streaming (lab/journal). Here the driver's part per unit is one task submitted and one receipt received;
in a run of many units a task carries up to `MAX_UNITS_PER_TASK` of them (`units_per_task`, `ExtractionActor.units`),
one receipt each.

Fault tolerance is Ray's own, as Ray Data set it on its actors: an actor that dies (its engine gone,
`workers.actor`) is restarted up to `workers.max_restarts` times and the tasks it held (running or queued) are
retried on it (`max_task_retries=-1`); past the restarts the run fails with Ray's `ActorDiedError`
(`pipeline.cli.main.engine_failure`). The driver's books (`pipeline.run._Books`) count every unit's outcomes, so
a duplicate or a missing one is an `AccountingError` as before."""

from __future__ import annotations

import collections
import os
from collections.abc import Iterator
from typing import Any

import pyarrow as pa

from pipeline.config import WorkersConfig
from workers.outcome import from_ipc

# How long the driver waits for the next receipt before it looks again (a look costs nothing when none came; the
# wait ends as soon as one does). Bounded so that a signal (SIGTERM: `pipeline.lifecycle`) is handled meanwhile.
WAIT_S = 1.0


MAX_UNITS_PER_TASK = 4  # units one actor task runs, one after the other, when there are many (`units_per_task`)
SPARE = 8  # ... that is, with at least this many tasks per actor's queue left after grouping


def units_per_task(tasks: int, workers: WorkersConfig) -> int:
    """How many units one actor task carries: 1, unless the run has at least `SPARE` times as many units as its
    actors' queues hold; then up to `MAX_UNITS_PER_TASK`, run one after the other by the actor. Each actor task costs
    the driver a submission, a wait and a reply (Ray's part of the driver's CPU per unit, about 1 ms: issue 57), so
    grouping divides it; the actors' concurrency is unchanged (`batches_in_flight` tasks at once), and a small run
    keeps one unit per task, every unit in flight at once. A group's receipts come back together, one per unit. An
    actor that dies redoes the whole group it was running (Ray retries the task); a dead driver costs the batches in
    flight, as before (their slices are staged as they finish)."""
    forced = os.environ.get("EXTRACT_UNITS_PER_TASK")
    if forced:
        return max(1, int(forced))
    room = workers.actors * queued_per_actor(workers) * SPARE
    return max(1, min(MAX_UNITS_PER_TASK, tasks // room))


def queued_per_actor(workers: WorkersConfig) -> int:
    """Units given to each actor at once: its `batches_in_flight` running and one more waiting in its queue, so an
    actor starts its next unit as one finishes, not a round trip to the driver later."""
    return workers.batches_in_flight + 1


class UnitPool:
    """`tasks` (read tasks' descriptions) through `workers.actors` extraction actors built with `actor_kwargs`
    (`ExtractionActor`'s); iterate `outcomes()` for each unit's outcome table as it is done (any order). The actors
    start at the first `next` and are killed when the iteration ends, however it ends."""

    def __init__(self, tasks: list[dict[str, Any]], workers: WorkersConfig, actor_kwargs: dict[str, Any],
                 env: dict[str, str]) -> None:
        self.tasks = tasks
        self.workers = workers
        self.actor_kwargs = actor_kwargs
        self.env = env
        self.submitted = 0  # actor tasks submitted, retries (Ray's) not counted (tests count them)

    def _actors(self) -> list[Any]:
        import ray

        from workers.actor import ExtractionActor

        resources = self.workers.ray_resources()
        remote = ray.remote(ExtractionActor).options(
            num_cpus=resources["num_cpus"],
            num_gpus=resources["num_gpus"],
            # Up to this many units run their (thread-safe) batches at once in each actor; their requests meet in
            # the actor's one engine thread (workers.engine.EngineThread).
            max_concurrency=self.workers.batches_in_flight,
            # An actor whose engine died exits (workers/actor.py); Ray restarts it this many times and retries the
            # units it held. A batch in flight at a crash is then retried one document at a time, and a document
            # alone in flight at a second crash is dead-lettered `actor_crash` (workers.crashes).
            max_restarts=self.workers.max_restarts,
            max_task_retries=-1 if self.workers.max_restarts else 0,
            scheduling_strategy="SPREAD",  # one actor per node first, as Ray Data placed its pool's
            runtime_env={"env_vars": self.env},
        )
        return [remote.remote(**self.actor_kwargs) for _ in range(self.workers.actors)]

    def iter_batches(self, **_: Any) -> Iterator[pa.Table]:
        """`outcomes()`, called as a Ray Data dataset's (`pipeline.run.outcome_batches` takes either)."""
        return self.outcomes()

    def outcomes(self) -> Iterator[pa.Table]:
        """Each unit's outcome table (its receipt) as its actor returns it."""
        if not self.tasks:
            return
        import ray

        actors = self._actors()
        k = units_per_task(len(self.tasks), self.workers)
        queue = collections.deque(self.tasks[i:i + k] for i in range(0, len(self.tasks), k))
        depth = queued_per_actor(self.workers)
        load = [0] * len(actors)
        held: dict[Any, int] = {}  # task's result ref -> its actor's index

        def submit() -> None:
            while queue:
                index = min(range(len(actors)), key=load.__getitem__)
                if load[index] >= depth:
                    return
                group = queue.popleft()
                actor = actors[index]
                held[actor.unit.remote(group[0]) if len(group) == 1 else actor.units.remote(group)] = index
                load[index] += 1
                self.submitted += 1

        try:
            submit()
            while held:
                ready, _ = ray.wait(list(held), num_returns=1, timeout=WAIT_S)
                for ref in ready:
                    load[held.pop(ref)] -= 1
                    back = ray.get(ref)
                    submit()
                    for receipt in back if isinstance(back, list) else [back]:
                        yield from_ipc(receipt)
        finally:
            for actor in actors:
                ray.kill(actor, no_restart=True)
