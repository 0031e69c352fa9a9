"""`dataflow.slow_output_poll` makes the driver's wait for Ray Data's next output block look every 0.1 s, not every
10 ms (issue 57: 100 looks a second were about 9 ms of the driver's CPU a second), through the Ray door
(`workers.ray_compat.set_output_poll`): on this Ray it is set (this test fails on a Ray upgrade that changes the
wait), and where it is missing the run goes on with one warning line."""

from __future__ import annotations

import importlib
import time
import types

import structlog

import pipeline.dataflow as dataflow
from workers import ray_compat


class Clock:
    def __init__(self) -> None:
        self.slept: list[float] = []

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)

    def time(self) -> float:
        return 42.0


def test_this_rays_output_wait_sleeps_the_poll_and_nothing_else_changes(monkeypatch) -> None:
    state = importlib.import_module(ray_compat.TICK_MODULE)
    monkeypatch.setattr(state, "time", time)  # restored after
    monkeypatch.delenv("EXTRACT_OUTPUT_POLL_S", raising=False)
    assert dataflow.slow_output_poll(0.25) is True
    assert isinstance(state.time, ray_compat._SlowerSleep)
    assert dataflow.slow_output_poll(0.3) is True  # set again: wraps the real module, not the wrapper
    assert state.time._real is time and state.time._seconds == 0.3
    clock = Clock()
    slower = ray_compat._SlowerSleep(clock, 0.1)
    slower.sleep(ray_compat.POLL_SLEEP_S)
    slower.sleep(2.0)
    assert clock.slept == [0.1, 2.0] and slower.time() == 42.0  # at least the poll; the rest is time's own


def _polls(self) -> None:
    time.sleep(0.01)


def test_a_missing_or_changed_wait_is_one_warning_and_the_run_goes_on(monkeypatch) -> None:
    monkeypatch.setattr(dataflow, "_warned", set())
    gone = types.ModuleType("gone")  # a Ray without the method
    changed = types.ModuleType("changed")  # a Ray whose wait no longer sleeps 10 ms
    changed.time = time  # type: ignore[attr-defined]
    changed.OpState = type("OpState", (), {"get_output_blocking": lambda self: time.sleep(0.05)})  # type: ignore
    same = types.ModuleType("same")
    same.time = time  # type: ignore[attr-defined]
    same.OpState = type("OpState", (), {"get_output_blocking": _polls})  # type: ignore[attr-defined]
    with structlog.testing.capture_logs() as lines:
        assert dataflow.slow_output_poll(0.1, gone) is False
        assert dataflow.slow_output_poll(0.1, changed) is False
        assert dataflow.slow_output_poll(0.1, same) is True
    assert changed.time is time and isinstance(same.time, ray_compat._SlowerSleep)
    warnings = [line for line in lines if line["log_level"] == "warning"]
    assert len(warnings) == 1  # once per process
    assert "has no OpState.get_output_blocking" in warnings[0]["event"] and "the run goes on" in warnings[0]["event"]
