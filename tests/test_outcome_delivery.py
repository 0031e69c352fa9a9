"""A finished batch reaches the driver's loop while later batches are still running (real Ray, real Ray Data)."""

from __future__ import annotations

import time

import ray.data

from pipeline.run import outcome_batches
from tests.fixtures.udfs import Sleeper


def test_each_outcome_arrives_before_the_next_batch_finishes(ray_cluster):
    ctx = ray.data.DataContext.get_current()
    ctx.enable_progress_bars = False
    dataset = ray.data.from_items([{"seconds": s} for s in (0.5, 4.0)], override_num_blocks=2).map_batches(
        Sleeper, batch_size=None, batch_format="pyarrow", num_cpus=0.5,
        compute=ray.data.ActorPoolStrategy(size=1, max_tasks_in_flight_per_actor=2))
    arrivals = []
    for batch in outcome_batches(dataset):
        arrivals.append((time.time(), batch.column("seconds")[0].as_py(), batch.column("finished")[0].as_py()))
    assert [s for _, s, _ in arrivals] == [0.5, 4.0]
    # The short batch is in the driver's hands before the long one has finished. With Ray Data's default
    # prefetch it arrived only together with the long one.
    (first_arrival, _, _), (_, _, second_finished) = arrivals
    assert first_arrival < second_finished
