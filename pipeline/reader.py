"""The read stage: one block per unit, each row tagged with its unit.

A unit is the grain the driver stages, so it is also the grain that flows: one unit is one input
block, hence one actor task, whose outcomes reach the driver as soon as that unit is done (Ray Data
would otherwise merge a task's small outputs into one block and release them only at its end).
Consecutive units of one row group are cut from a single read of it, cached per worker process.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from pipeline.storage import Storage
from pipeline.units import Unit

UNIT_COLUMN = "_unit"

_last_group: dict[tuple[str, int, tuple[str, ...]], pa.Table] = {}


def read_tasks(units: list[Unit]) -> list[dict[str, Any]]:
    return [{"path": u.path, "row_group": u.row_group, "start": u.start, "stop": u.stop, "unit_id": u.id}
            for u in units]


def _row_group(storage: Storage, path: str, row_group: int, columns: list[str]) -> pa.Table:
    key = (path, row_group, tuple(columns))
    if key not in _last_group:
        _last_group.clear()  # hold one row group at a time
        _last_group[key] = pq.ParquetFile(storage.arrow_path(path), filesystem=storage.arrow_fs()).read_row_group(
            row_group, columns=columns)
    return _last_group[key]


def read_units(
    tasks: pa.Table, storage: Storage, id_field: pa.Field, text_column: str
) -> pa.Table:
    """Ray Data UDF: read tasks in, the documents of their units out, tagged `_unit`."""
    schema = pa.schema([id_field, pa.field(text_column, pa.string()), pa.field(UNIT_COLUMN, pa.string())])
    pieces = []
    for task in tasks.to_pylist():
        group = _row_group(storage, task["path"], task["row_group"], [id_field.name, text_column])
        piece = group.slice(task["start"], task["stop"] - task["start"])
        piece = piece.append_column(UNIT_COLUMN, pa.array([task["unit_id"]] * piece.num_rows, pa.string()))
        pieces.append(piece.cast(schema))
    return pa.concat_tables(pieces) if pieces else schema.empty_table()
