"""Per-field profiles of the run's rows and a few sample rows (pure)."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from pipeline.tools.report.formats import truncate
from workers.outcome import ROW_LINEAGE_COLUMNS, RowCol

# The rows' lineage columns, left out of the profiles and samples (a row's confidences and spans stay in them).
LINEAGE = tuple(c for c in ROW_LINEAGE_COLUMNS if c not in (RowCol.CONFIDENCE, RowCol.MIN_CONFIDENCE, RowCol.SPANS))


@dataclass
class FieldProfile:
    name: str
    type: str
    nulls: int
    total: int
    summary: str  # top values, or min / median / max, or list lengths

    @property
    def null_rate(self) -> float:
        return self.nulls / self.total if self.total else 0.0


def field_profiles(table: pa.Table | None, top: int = 3) -> list[FieldProfile]:
    """Per schema field (top-level column of the rows, lineage columns and the id left out): null rate and a
    value summary: top values for strings, min / median / max for numbers and dates, lengths for lists."""
    if table is None or table.num_columns < 2:
        return []
    profiles = []
    for name in table.column_names[1:]:
        if name in LINEAGE:
            continue
        column = table.column(name)
        values = [v for v in column.to_pylist() if v is not None]
        profiles.append(FieldProfile(name, str(column.type), table.num_rows - len(values), table.num_rows,
                                     value_summary(column.type, values, top)))
    return profiles


def value_summary(kind: pa.DataType, values: list[Any], top: int = 3) -> str:
    if not values:
        return "—"
    if pa.types.is_list(kind) or pa.types.is_large_list(kind):
        lengths = sorted(len(v) for v in values)
        return f"length min {lengths[0]} · median {lengths[len(lengths) // 2]} · max {lengths[-1]}"
    if pa.types.is_struct(kind) or pa.types.is_map(kind):
        return f"{len(values)} objects"
    if pa.types.is_boolean(kind) or pa.types.is_string(kind) or pa.types.is_large_string(kind):
        counts = Counter(str(v) for v in values).most_common(top)
        return " · ".join(f"{truncate(v, 40)} ×{n}" for v, n in counts) + \
            (f" ({len(set(map(str, values)))} distinct)" if len(values) > 1 else "")
    ordered = sorted(values)
    return f"min {ordered[0]} · median {ordered[len(ordered) // 2]} · max {ordered[-1]}"


def sample_rows(table: pa.Table | None, n: int = 5) -> tuple[list[str], list[list[str]]]:
    """The first `n` rows: column names (id and fields, lineage left out) and their values as short text."""
    if table is None or not table.num_rows:
        return [], []
    names = [c for c in table.column_names if c not in LINEAGE]
    rows = table.select(names).slice(0, n).to_pylist()
    return names, [[_cell(r[c]) for c in names] for r in rows]


def _cell(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, (dict, list)):
        return truncate(json.dumps(value, default=str, ensure_ascii=False), 200)
    return truncate(str(value), 200)
