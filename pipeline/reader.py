"""The read stage: one block per unit, each row tagged with its unit.

A unit is the grain the driver stages, so it is also the grain that flows: one unit is one input
block, hence one actor task, whose outcomes reach the driver as soon as that unit is done (Ray Data
would otherwise merge a task's small outputs into one block and release them only at its end).
Consecutive units of one row group are cut from a single read of it, cached per worker process.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.compute  # noqa: F401 - pa.compute
import pyarrow.parquet as pq

from pipeline.storage import Storage
from pipeline.units import Unit
from workers.extractor import BACKEND_COLUMN

UNIT_COLUMN = "_unit"

_last_group: dict[tuple[str, int, tuple[str, ...]], pa.Table] = {}


def read_tasks(units: list[Unit], batch_size: int | None = None) -> list[dict[str, Any]]:
    """One task per `batch_size` rows of each unit (per unit without it). A unit's slices keep its id, so the
    driver still accounts and stages whole units; a worker reads a row group once for consecutive slices."""
    tasks = []
    for u in units:
        step = max(batch_size or (u.stop - u.start), 1)
        for start in range(u.start, max(u.stop, u.start + 1), step):
            tasks.append({"path": u.path, "row_group": u.row_group, "start": start, "stop": min(start + step, u.stop),
                          "unit_id": u.id})
    return tasks


def _row_group(storage: Storage, path: str, row_group: int, columns: list[str]) -> pa.Table:
    key = (path, row_group, tuple(columns))
    if key not in _last_group:
        _last_group.clear()  # hold one row group at a time
        _last_group[key] = pq.ParquetFile(storage.arrow_path(path), filesystem=storage.arrow_fs()).read_row_group(
            row_group, columns=columns)
    return _last_group[key]


def read_units(
    tasks: pa.Table,
    storage: Storage,
    id_field: pa.Field,
    text_column: str,
    schema_column: str | None = None,
    routes: dict[str, str] | None = None,
    default_backend: str = "xgrammar",
) -> pa.Table:
    """Ray Data UDF: read tasks in, the documents of their units out, tagged `_unit`.

    With per-row schemas the schema column comes along, and with `routes` (schema value → backend,
    for the values not on `default_backend`) each row is tagged `_backend` for its actor pool."""
    columns = [id_field.name, text_column] + ([schema_column] if schema_column else [])
    fields = [id_field, pa.field(text_column, pa.string())]
    fields += [pa.field(schema_column, pa.string())] if schema_column else []
    fields += [pa.field(UNIT_COLUMN, pa.string())]
    fields += [pa.field(BACKEND_COLUMN, pa.string())] if routes is not None else []
    schema = pa.schema(fields)
    pieces = []
    for task in tasks.to_pylist():
        group = _row_group(storage, task["path"], task["row_group"], columns)
        piece = group.slice(task["start"], task["stop"] - task["start"])
        piece = piece.append_column(UNIT_COLUMN, pa.array([task["unit_id"]] * piece.num_rows, pa.string()))
        if routes is not None:
            values = piece.column(schema_column).to_pylist() if schema_column else [None] * piece.num_rows
            piece = piece.append_column(BACKEND_COLUMN, pa.array(
                [routes.get(v, default_backend) if v is not None else default_backend for v in values], pa.string()))
        pieces.append(piece.cast(schema))
    return pa.concat_tables(pieces) if pieces else schema.empty_table()


def read_schema_values(storage: Storage, units: list[Unit], schema_column: str) -> set[str]:
    """The distinct per-row schema values of `units` (the driver routes each to a backend before Ray starts)."""
    values: set[str] = set()
    for unit in units:
        group = _row_group(storage, unit.path, unit.row_group, [schema_column])
        column = group.column(schema_column).slice(unit.start, unit.stop - unit.start)
        values.update(v for v in pa.compute.unique(column).to_pylist() if v is not None)
    return values
