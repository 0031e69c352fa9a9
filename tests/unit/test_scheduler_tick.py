"""`dataflow.slow_scheduler_tick` sets a private constant of Ray Data (through the Ray door, `workers.ray_compat`): on
this Ray it is set (this test fails on a Ray upgrade that renames it), and where it is missing the run goes on with
one warning line naming it."""

from __future__ import annotations

import types

import structlog

import pipeline.dataflow as dataflow
from workers import ray_compat


def test_this_rays_scheduling_loop_wait_is_set(monkeypatch) -> None:
    import importlib

    state = importlib.import_module(ray_compat.TICK_MODULE)
    monkeypatch.setattr(state, ray_compat.TICK_CONSTANT, getattr(state, ray_compat.TICK_CONSTANT))  # restored after
    monkeypatch.delenv("EXTRACT_SCHEDULER_TICK_S", raising=False)
    assert dataflow.slow_scheduler_tick(0.25) is True
    assert getattr(state, ray_compat.TICK_CONSTANT) == 0.25


def _reads_it() -> float:
    return WAIT_FOR_TASK_COMPLETION_TIMEOUT_S  # type: ignore[name-defined]  # noqa: F821  (a global it reads)


def test_a_missing_or_unread_constant_is_one_warning_and_the_run_goes_on(monkeypatch) -> None:
    monkeypatch.setattr(dataflow, "_warned", set())
    renamed = types.ModuleType("renamed")  # a Ray whose constant has another name
    unread = types.ModuleType("unread")  # a Ray that has the name but no function reading it
    unread.WAIT_FOR_TASK_COMPLETION_TIMEOUT_S = 0.1  # type: ignore[attr-defined]
    read = types.ModuleType("read")
    read.WAIT_FOR_TASK_COMPLETION_TIMEOUT_S = 0.1  # type: ignore[attr-defined]
    read.look = _reads_it  # type: ignore[attr-defined]
    with structlog.testing.capture_logs() as lines:
        assert dataflow.slow_scheduler_tick(0.5, renamed) is False
        assert dataflow.slow_scheduler_tick(0.5, unread) is False
        assert dataflow.slow_scheduler_tick(0.5, read) is True
    assert unread.WAIT_FOR_TASK_COMPLETION_TIMEOUT_S == 0.1 and read.WAIT_FOR_TASK_COMPLETION_TIMEOUT_S == 0.5
    warnings = [line for line in lines if line["log_level"] == "warning"]
    assert len(warnings) == 1  # once per process
    assert "has no number WAIT_FOR_TASK_COMPLETION_TIMEOUT_S" in warnings[0]["event"]
    assert "the run goes on" in warnings[0]["event"]
