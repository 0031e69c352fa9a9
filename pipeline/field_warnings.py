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
import pyarrow.compute as pc
import pyarrow.parquet as pq

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
    return _Tallies(rows.column_names).warnings(lambda: iter(rows.to_batches(BATCH_ROWS)), share)


BATCH_ROWS = 8192  # rows looked at at once: a run's rows are read a batch at a time, never whole


def _empty(value: Any) -> bool:
    return value is None or value == []


def _python(kind: pa.DataType) -> bool:
    """Whether a column's values are compared in Python (`_key`): nested and dictionary columns; others by Arrow."""
    return pa.types.is_nested(kind) or pa.types.is_dictionary(kind) or pa.types.is_null(kind)


def _batch_top(column: pa.Array) -> tuple[int, Any] | None:
    """A batch's most frequent value that is not empty: (its count, the value), None if all are."""
    if _python(column.type):
        keys: Counter[str] = Counter()
        values: dict[str, Any] = {}
        for value in column.to_pylist():
            if not _empty(value):
                key = _key(value)
                keys[key] += 1
                values.setdefault(key, value)
        if not keys:
            return None
        key, count = keys.most_common(1)[0]
        return count, values[key]
    counts = pc.value_counts(column)
    found = counts.filter(counts.field("values").is_valid())
    if not len(found):
        return None
    best = pc.index(found.field("counts"), pc.max(found.field("counts"))).as_py()
    return found.field("counts")[best].as_py(), found.field("values")[best].as_py()


def _count(column: pa.Array, key: str, value: Any) -> int:
    """How many of a batch's values are `value` (by `_key`)."""
    if _python(column.type):
        return sum(1 for v in column.to_pylist() if v is not None and _key(v) == key)
    if isinstance(value, float) and value != value:  # NaN: one value to `_key`, never equal to Arrow
        return pc.sum(pc.is_nan(column)).as_py() or 0
    return pc.sum(pc.equal(column, pa.scalar(value, column.type))).as_py() or 0


class _Tallies:
    """`field_warnings` over rows that come a batch at a time, twice (`warnings`' `batches` is called twice): the
    first pass counts rows and empties and notes each batch's most frequent value; a value in more than `share` of
    all rows is in more than `share` of some batch, so it is one of those; the second pass counts them exactly.
    Memory: a batch and a few values per field, whatever the rows."""

    def __init__(self, names: list[str]) -> None:
        self.names = [n for n in names[1:] if not n.startswith("_")]

    def warnings(self, batches: Any, share: float = SHARE) -> list[str]:
        rows, empties, candidates = self._first_pass(batches())
        if rows < MIN_ROWS:
            return []
        wanted = {name: found for name, found in candidates.items() if found and empties[name] / rows <= share}
        counts = self._second_pass(batches(), wanted) if wanted else {}
        out = []
        for name in self.names:
            nulls = empties[name]
            if nulls / rows > share:
                out.append(f"{name} is null in {nulls} of {rows} rows ({100 * nulls / rows:.0f}%)")
            elif counts.get(name):
                top, count = counts[name].most_common(1)[0]
                if count / rows > share:
                    out.append(f"{name} holds the same value {top[:60]} in {count} of {rows} rows "
                               f"({100 * count / rows:.0f}%)")
        return out

    def _first_pass(self, batches: Any) -> tuple[int, Counter[str], dict[str, dict[str, Any]]]:
        """Rows, empties per field, and each field's candidates (key → value): the batches' most frequent values."""
        rows = 0
        empties: Counter[str] = Counter()
        candidates: dict[str, dict[str, Any]] = {name: {} for name in self.names}
        for batch in batches:
            rows += batch.num_rows
            for name in self.names:
                column = _column(batch, name)
                if column is None:  # a partition without this field: nulls
                    empties[name] += batch.num_rows
                    continue
                empties[name] += column.null_count
                if pa.types.is_list(column.type) or pa.types.is_large_list(column.type):  # [] counts as null
                    empties[name] += pc.sum(pc.equal(pc.list_value_length(column), 0)).as_py() or 0
                if (top := _batch_top(column)) is not None:
                    candidates[name].setdefault(_key(top[1]), top[1])
        return rows, empties, candidates

    def _second_pass(self, batches: Any, wanted: dict[str, dict[str, Any]]) -> dict[str, Counter[str]]:
        """Each candidate's exact count over all rows."""
        counts: dict[str, Counter[str]] = {name: Counter() for name in wanted}
        for batch in batches:
            for name, found in wanted.items():
                column = _column(batch, name)
                if column is not None:
                    for key, value in found.items():
                        counts[name][key] += _count(column, key, value)
        return counts


def _column(batch: pa.RecordBatch, name: str) -> pa.Array | None:
    index = batch.schema.get_field_index(name)
    return batch.column(index) if index >= 0 else None


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
    """`field_warnings` over the rows of the partitions the run committed: their first `limit` rows, read a batch at
    a time (a run of 10^6 documents once held them all in Python objects at the driver: issue 57)."""
    from pipeline.output.committed import CommittedOutput
    from workers.outcome import ROWS

    output = CommittedOutput.of(loaded)
    files = [m.uri(ROWS, output.root) for m in output.partitions() if m.partition in partitions and m.run_id == run_id]
    if not files:
        return []
    names: list[str] = []
    for uri in files:
        with output.storage.arrow_fs().open_input_file(output.storage.arrow_path(uri)) as handle:
            names += [n for n in pq.ParquetFile(handle).schema_arrow.names if n not in names]

    tallies = _Tallies(names)

    def batches() -> Any:
        left = limit
        for uri in files:
            with output.storage.arrow_fs().open_input_file(output.storage.arrow_path(uri)) as handle:
                parquet = pq.ParquetFile(handle)
                fields = [n for n in tallies.names if n in parquet.schema_arrow.names]  # no id, no lineage columns
                for batch in parquet.iter_batches(batch_size=BATCH_ROWS, columns=fields):
                    if left <= 0:
                        return
                    yield batch.slice(0, left)
                    left -= batch.num_rows

    return tallies.warnings(batches)
