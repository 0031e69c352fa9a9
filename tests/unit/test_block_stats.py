"""`dataflow.bound_block_stats` bounds what Ray Data keeps per output block (through the Ray door,
`workers.ray_compat`). Unbounded, each map operator keeps one stats record per block for the run's life and the
batch iterator pickles them all to its stats actor every few seconds, so the driver's memory and CPU per outcome
grow with the run. On this Ray the bound applies (this test fails on a Ray that renames the list or keeps it
elsewhere); where it is missing the run goes on with one warning line naming it."""

from __future__ import annotations

import importlib
import types

import structlog

import pipeline.dataflow as dataflow
from workers import ray_compat


def _stand_in() -> types.ModuleType:
    """A module shaped like Ray's: a map operator whose `__init__` makes the list, a subclass calling it."""
    state = types.ModuleType("stand_in")

    class MapOperator:
        def __init__(self, name: str) -> None:
            self.name = name
            self._output_blocks_stats: list[int] = []

        def output(self, block: int) -> None:
            self._output_blocks_stats.extend([block])

    class ActorPoolMapOperator(MapOperator):
        def __init__(self) -> None:
            super().__init__("actors")

    state.MapOperator = MapOperator  # type: ignore[attr-defined]
    state.ActorPoolMapOperator = ActorPoolMapOperator  # type: ignore[attr-defined]
    return state


def test_an_operator_keeps_only_its_last_blocks_stats_subclasses_too() -> None:
    state = _stand_in()
    unbounded = state.ActorPoolMapOperator()
    for block in range(10):
        unbounded.output(block)
    assert len(unbounded._output_blocks_stats) == 10  # what Ray does on its own

    assert dataflow.bound_block_stats(3, state) is True
    assert dataflow.bound_block_stats(3, state) is True  # twice in one process: wrapped once
    for op in (state.MapOperator("read"), state.ActorPoolMapOperator()):
        for block in range(10):
            op.output(block)
        assert list(op._output_blocks_stats) == [7, 8, 9]


def test_this_rays_map_operators_are_bounded(monkeypatch) -> None:
    state = importlib.import_module(ray_compat.STATS_MODULE)
    cls = getattr(state, ray_compat.STATS_CLASS)
    monkeypatch.setattr(cls, "__init__", cls.__init__)  # restored after
    # Ray appends each output block's stats to this list as the block leaves the operator: if it stops doing so
    # here, the bound is moot and this test says where to look.
    assert ray_compat.STATS_LIST in cls._get_next_inner.__code__.co_names
    assert dataflow.bound_block_stats(5) is True
    assert cls.__init__._bounded_block_stats == 5


def test_a_ray_without_the_list_is_one_warning_and_the_run_goes_on(monkeypatch) -> None:
    monkeypatch.setattr(dataflow, "_warned", set())
    renamed = types.ModuleType("renamed")  # a Ray whose operator has another name
    moved = _stand_in()  # a Ray whose operator keeps its stats elsewhere

    def init(self, name: str) -> None:
        self.name = name

    moved.MapOperator.__init__ = init
    with structlog.testing.capture_logs() as lines:
        assert dataflow.bound_block_stats(3, renamed) is False
        assert dataflow.bound_block_stats(3, moved) is False
    warnings = [line for line in lines if line["log_level"] == "warning"]
    assert len(warnings) == 1  # once per process
    assert "has no class MapOperator" in warnings[0]["event"] and "the run goes on" in warnings[0]["event"]
