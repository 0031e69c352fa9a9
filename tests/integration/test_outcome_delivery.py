"""A finished batch reaches the driver's loop while a later batch is still running (real Ray, real Ray Data)."""

from __future__ import annotations

import time

import ray.data

from pipeline.run import outcome_batches
from tests.fixtures.udfs import Sleeper


def test_each_outcome_arrives_before_the_next_batch_finishes(ray_cluster):
    ctx = ray.data.DataContext.get_current()
    ctx.enable_progress_bars = False
    dataset = ray.data.from_items([{"seconds": s} for s in (2.0, 4.0)], override_num_blocks=2).map_batches(
        Sleeper, batch_size=None, batch_format="pyarrow", num_cpus=0.5,
        compute=ray.data.ActorPoolStrategy(size=1, max_tasks_in_flight_per_actor=2, max_concurrent_calls_per_actor=2,
                                           enable_true_multi_threading=True))
    arrivals = []  # (arrived at the driver, finished in the actor), per batch
    for batch in outcome_batches(dataset):
        arrivals.append((time.time(), batch.column("finished")[0].as_py()))
    assert len(arrivals) == 2
    # Whichever batch finished first (they may run together or one after the other, in either order) is in
    # the driver's hands before the other has finished: at least 2 s of margin in every order. With Ray Data's
    # default prefetch it arrived only together with the other one.
    (first_arrival, _), (_, second_finished) = sorted(arrivals, key=lambda a: a[1])
    assert first_arrival < second_finished
