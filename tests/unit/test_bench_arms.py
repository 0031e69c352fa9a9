"""`extract bench`'s engine arms: which engines start, and how their figures come together (the engines
themselves are tests/integration/test_bench.py's, on vLLM)."""

from __future__ import annotations

from pipeline.tools import bench


def _children(monkeypatch) -> list[str]:
    """Replace the child start with one that records the part it was asked for and answers as that part would."""
    parts: list[str] = []

    def fake_child(config, overrides, texts, golds, price_rounds, part, env=None):
        parts.append(part)
        if part == "all":
            return {"engine": {"docs": 2}, "unconstrained": {"docs": 2}, "retry": {"docs": 2}, "_price": {"rounds": 2}}
        if part == "main":
            return {"engine": {"docs": 2, "speculated": True}, "unconstrained": {"docs": 2}, "retry": {"docs": 2}}
        assert part == "price"
        return {"engine_no_speculation": {"docs": 2}, "_price": {"rounds": 3}}

    monkeypatch.setattr(bench, "_in_child", fake_child)
    return parts


def test_a_job_that_does_not_speculate_takes_one_engine_for_every_arm_and_the_price(monkeypatch):
    parts = _children(monkeypatch)
    arms, price = bench.engine_arms("job.yaml", {}, ["a", "b"], [{}, {}], 2, speculate=False)
    assert parts == ["all"]
    assert set(arms) == {"engine", "unconstrained", "retry"} and price == {"rounds": 2}


def test_a_job_that_speculates_takes_a_second_engine_without_it_for_the_price(monkeypatch):
    parts = _children(monkeypatch)
    arms, price = bench.engine_arms("job.yaml", {}, ["a", "b"], [{}, {}], 3, speculate=True)
    assert parts == ["main", "price"]  # one after the other: each engine's child exits before the next starts
    assert arms["engine"] == {"docs": 2, "speculated": True}  # the job's own engine, speculating
    assert set(arms) == {"engine", "unconstrained", "retry", "engine_no_speculation"}
    assert price == {"rounds": 3} and "_price" not in arms  # the price is the plain engine's: a step is one token
