"""The read stage: units → documents, one row-group read per task, each row tagged with its unit."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from pipeline.storage import LocalStorage, S3Storage
from pipeline.units import Unit

UNIT_COLUMN = "_unit"


def read_tasks(units: list[Unit]) -> list[dict[str, Any]]:
    """Units grouped by (file, row group), in order: each task reads its row group once."""
    grouped: dict[tuple[str, int], list[Unit]] = defaultdict(list)
    for unit in units:
        grouped[(unit.path, unit.row_group)].append(unit)
    return [
        {"path": path, "row_group": rg, "starts": [u.start for u in us], "stops": [u.stop for u in us],
         "unit_ids": [u.id for u in us]}
        for (path, rg), us in grouped.items()
    ]


def read_units(
    tasks: pa.Table, storage: LocalStorage | S3Storage, id_field: pa.Field, text_column: str
) -> pa.Table:
    """Ray Data UDF: a batch of read tasks in, the documents of their units out, tagged `_unit`."""
    fs = storage.arrow_fs()
    schema = pa.schema([id_field, pa.field(text_column, pa.string()), pa.field(UNIT_COLUMN, pa.string())])
    pieces = []
    for task in tasks.to_pylist():
        group = pq.ParquetFile(storage.arrow_path(task["path"]), filesystem=fs).read_row_group(
            task["row_group"], columns=[id_field.name, text_column])
        for start, stop, unit_id in zip(task["starts"], task["stops"], task["unit_ids"], strict=True):
            piece = group.slice(start, stop - start)
            piece = piece.append_column(UNIT_COLUMN, pa.array([unit_id] * piece.num_rows, pa.string()))
            pieces.append(piece.cast(schema))
    return pa.concat_tables(pieces) if pieces else schema.empty_table()
