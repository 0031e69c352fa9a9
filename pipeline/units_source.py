"""`UnitsDatasource`: a split run's documents as Ray Data read tasks (`pipeline.dataflow`), one per batch. Its own
module because it subclasses a Ray Data class: a one-pool run's driver never imports Ray Data."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import pyarrow as pa
import ray.data


class UnitsDatasource(ray.data.Datasource):
    """Read tasks of `pipeline.reader.read_tasks`: each reads its batch's documents with `reader` (`read_units` for
    the run), one block per task, whatever parallelism Ray Data asks for."""

    def __init__(self, tasks: list[dict[str, Any]], reader: Callable[[pa.Table], pa.Table]) -> None:
        self.tasks = tasks
        self.reader = reader

    NAME = "Units"  # Ray Data names its read operator "Read" + this

    def get_name(self) -> str:
        return self.NAME

    def estimate_inmemory_data_size(self) -> int | None:
        return None

    def get_read_tasks(self, parallelism: int, **_: Any) -> list[ray.data.ReadTask]:
        from ray.data.block import BlockMetadata

        return [ray.data.ReadTask(functools.partial(_read_task, task, self.reader),
                                  BlockMetadata(num_rows=task["stop"] - task["start"], size_bytes=None,
                                                input_files=None, exec_stats=None))
                for task in self.tasks]


def _read_task(task: dict[str, Any], reader: Callable[[pa.Table], pa.Table]) -> list[pa.Table]:
    return [reader(pa.Table.from_pylist([task]))]
