"""`pipeline.tools.bench_sampler.actor_cpu`: the actors' CPU, their cores and every other process's CPU between two
moments, from the bench's running totals."""

from __future__ import annotations

from pipeline.tools.bench_sampler import actor_cpu

# (unix time, the actors' CPU seconds so far) and (unix time, the machine's busy CPU seconds since boot)
ACTORS = [(10.0, 1.0), (11.0, 2.9), (12.0, 4.8), (13.0, 6.7)]
MACHINE = [(10.0, 500.0), (11.0, 502.0), (12.0, 504.0), (13.0, 506.0)]


def test_the_actors_cpu_cores_and_the_other_processes_between_two_moments() -> None:
    got = actor_cpu(ACTORS, 10.5, 13.0, MACHINE)
    assert got["cpu_s"] == 5.7  # 6.7 at 13.0 less 1.0, the last total at or before 10.5
    assert got["cores_used"] == round(5.7 / 2.5, 3)
    assert got["others_cpu_s"] == 0.3  # the machine's 6.0 busy seconds over the same samples, less the actors'


def test_without_the_machines_samples_others_is_unknown_and_the_rest_unchanged() -> None:
    assert actor_cpu(ACTORS, 10.5, 13.0) == {"cpu_s": 5.7, "cores_used": round(5.7 / 2.5, 3), "others_cpu_s": None}


def test_a_window_the_samples_do_not_reach_gives_nothing() -> None:
    assert actor_cpu(ACTORS, 9.0, 13.0, MACHINE) == {"cpu_s": None, "cores_used": None, "others_cpu_s": None}
    assert actor_cpu(ACTORS, 12.0, 12.0, MACHINE)["cpu_s"] is None


def test_others_is_never_negative() -> None:  # the two totals are read a moment apart in each sample
    assert actor_cpu(ACTORS, 10.5, 13.0, [(10.0, 500.0), (13.0, 505.0)])["others_cpu_s"] == 0.0
