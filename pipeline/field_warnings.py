"""Fields that look copied rather than read: null, or one constant value, in more than 90% of a run's rows.

A model that copies the last few-shot example's nulls leaves a field null in every row; one that copies a value
writes it everywhere. Both pass validation. The run summary and the report flag such fields; `extract validate`
flags few-shot examples that invite it (every example leaves the same field null, or holds the same value)."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from typing import Any

import pyarrow as pa

SHARE = 0.9  # more than this share of rows
MIN_ROWS = 3  # fewer rows than this say nothing


def _key(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str, ensure_ascii=False)


def column_warning(name: str, values: Sequence[Any], share: float = SHARE) -> str | None:
    """The warning for one field's values across rows, or None."""
    n = len(values)
    if n < MIN_ROWS:
        return None
    nulls = sum(v is None or v == [] for v in values)
    if nulls / n > share:
        return f"{name} is null in {nulls} of {n} rows ({100 * nulls / n:.0f}%)"
    top, count = Counter(_key(v) for v in values if v is not None).most_common(1)[0]
    if count / n > share:
        return f"{name} holds the same value {top[:60]} in {count} of {n} rows ({100 * count / n:.0f}%)"
    return None


def field_warnings(rows: pa.Table | None, share: float = SHARE) -> list[str]:
    """One line per field (top-level column; the id and `_` lineage columns left out) that is null, or one value,
    in more than `share` of the rows."""
    if rows is None or rows.num_rows < MIN_ROWS:
        return []
    out = []
    for name in rows.column_names[1:]:
        if name.startswith("_"):
            continue
        warning = column_warning(name, rows.column(name).to_pylist(), share)
        if warning:
            out.append(warning)
    return out


def example_warnings(outputs: Sequence[dict[str, Any]]) -> list[str]:
    """Few-shot examples (their outputs) that all leave a field null, or all hold the same value in it: the model
    tends to copy them. Needs two examples or more."""
    if len(outputs) < 2:
        return []
    fields = list(dict.fromkeys(k for o in outputs if isinstance(o, dict) for k in o))
    out = []
    for name in fields:
        values = [o.get(name) if isinstance(o, dict) else None for o in outputs]
        if all(v is None for v in values):
            out.append(f"every example leaves {name} null: the model may leave it null in every row; give one "
                       "example where the document writes it")
        elif len({_key(v) for v in values}) == 1:
            out.append(f"every example holds the same {name} ({_key(values[0])[:60]}): the model may copy it; "
                       "vary it across the examples")
    return out


def run_field_warnings(loaded: Any, run_id: str, partitions: Sequence[str], limit: int = 200_000) -> list[str]:
    """`field_warnings` over the rows of the partitions the run committed (at most `limit` rows read)."""
    from pipeline.output.committed import CommittedOutput
    from pipeline.output.tables import read_columns
    from workers.outcome import ROWS

    output = CommittedOutput.of(loaded)
    tables = []
    for m in output.partitions():
        if m.partition in partitions and m.run_id == run_id and sum(t.num_rows for t in tables) < limit:
            tables.append(read_columns(output.storage, m.uri(ROWS, output.root)))
    if not tables:
        return []
    try:
        rows = pa.concat_tables(tables, promote_options="default")
    except (pa.ArrowInvalid, TypeError):
        rows = tables[-1]
    return field_warnings(rows.slice(0, limit))
