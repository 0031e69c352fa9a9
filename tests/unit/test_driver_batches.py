"""The driver's per-batch work without a Python object per outcome: cutting a batch into its units' pieces,
parsing the rows' records, the rows' least confidence, and the progress's dead-letter counts."""

from __future__ import annotations

import json
import math
from typing import Any

import pyarrow as pa
import pytest

from pipeline.output.tables import _minimums, parse_records
from pipeline.progress import Progress
from pipeline.reader import UNIT_COLUMN
from pipeline.run import unit_pieces
from schemas.arrow import ISO_DATE, PLAIN, record_layout
from tests.fixtures.models import Everything
from workers.confidence import CONFIDENCE_TYPE
from workers.outcome import Col


def _batch(units: list[str | None]) -> pa.Table:
    return pa.table({"doc_id": [f"d{i}" for i in range(len(units))], UNIT_COLUMN: pa.array(units, pa.string()),
                     Col.KIND: ["row"] * len(units)})


def test_unit_pieces_cuts_where_the_unit_changes() -> None:
    pieces = unit_pieces(_batch(["a", "a", "b", "b", "b", "c"]))
    assert [(u, p.column("doc_id").to_pylist()) for u, p in pieces] == [
        ("a", ["d0", "d1"]), ("b", ["d2", "d3", "d4"]), ("c", ["d5"])]
    assert all(UNIT_COLUMN not in p.column_names for _, p in pieces)


def test_unit_pieces_a_unit_in_two_runs_gives_two_pieces_and_loses_no_row() -> None:
    pieces = unit_pieces(_batch(["a", "b", "a", None, None]))
    assert [u for u, _ in pieces] == ["a", "b", "a", None, None]  # a null id (refused by the caller) stands alone
    assert sum(p.num_rows for _, p in pieces) == 5
    assert pieces[2][1].column("doc_id").to_pylist() == ["d2"]


def test_unit_pieces_of_chunked_one_row_and_empty_batches() -> None:
    batch = pa.concat_tables([_batch(["a", "a"]), _batch(["a", "b"])])
    assert [(u, p.num_rows) for u, p in unit_pieces(batch)] == [("a", 3), ("b", 1)]
    assert [(u, p.num_rows) for u, p in unit_pieces(_batch(["z"]))] == [("z", 1)]
    assert unit_pieces(_batch([])) == []


def test_parse_records_is_json_loads_of_each() -> None:
    records = [{"a": 1, "b": [1.5, None], "c": "é,]["}, {}, {"n": float("nan")}, {"big": 10**30}]
    texts = [json.dumps(r, ensure_ascii=False) for r in records]
    parsed = parse_records(texts)
    assert parsed[:2] == records[:2] and parsed[3] == records[3]
    assert parsed[2]["n"] != parsed[2]["n"]  # NaN, as json.loads reads it
    assert parse_records([]) == []


@pytest.mark.parametrize("texts", [['{"a": 1}', "{"], ['{"a": 1}', '{"b": 2}, {"c": 3}'], ['{"a": 1}', ""]])
def test_parse_records_raises_as_json_loads_on_a_bad_text(texts: list[str]) -> None:
    with pytest.raises(json.JSONDecodeError):
        parse_records(texts)


def test_minimums_nulls_and_values() -> None:
    assert _minimums(pa.nulls(3, CONFIDENCE_TYPE)).to_pylist() == [None, None, None]
    mixed = pa.array([[("x", 0.5), ("y", 0.25)], None, [], [("z", 1.0)]], CONFIDENCE_TYPE)
    assert _minimums(mixed).to_pylist() == [0.25, None, None, 1.0]
    assert _minimums(mixed.slice(1)).to_pylist() == [None, None, 1.0]  # a slice of the staged column
    chunked = pa.chunked_array([mixed.slice(0, 2), mixed.slice(2)])
    assert _minimums(chunked).to_pylist() == [0.25, None, None, 1.0]
    nan_first = pa.array([[("x", float("nan")), ("y", 0.5)], [("x", 0.5), ("y", float("nan"))]], CONFIDENCE_TYPE)
    assert [math.isnan(v) for v in _minimums(nan_first).to_pylist()] == [True, False]  # as Python's min, in order


def test_progress_counts_dead_letters_by_reason() -> None:
    progress = Progress(10, "job", live=False)
    batch = pa.table({Col.KIND: ["row", "dead_letter", "dead_letter", "dead_letter", "row"],
                      Col.REASON: [None, "invalid", "truncated", "invalid", None]})
    progress.see(batch)
    progress.see(batch.slice(0, 1))
    progress.see(pa.table({Col.KIND: ["dead_letter"], Col.REASON: pa.array([None], pa.string())}))
    assert progress.reasons == {"invalid": 2, "truncated": 1, "None": 1}
    progress.close()


def _records() -> list[dict[str, Any]]:
    return [
        {"name": "a", "count": 3, "ratio": 0.5, "flag": True, "day": "2026-01-02", "at": "2026-01-02T03:04:05Z",
         "level": "low", "extra": "ignored"},
        {"name": None, "count": None, "ratio": 2, "flag": False},
        {},
        {"name": "é", "count": -(2**63), "ratio": float("nan"), "customer": {"name": "c"}, "tags": ["x", "y"]},
    ]


@pytest.mark.parametrize("extra", [
    [],
    [{"day": "20260102"}, {"day": None}],  # a date not YYYY-MM-DD: its converter, row by row
    [{"ratio": "1.5"}],  # float() takes a text, Arrow does not: the records go to convert_rows
    [{"ratio": 2**70}, {"ratio": 2**60 + 1}, {"ratio": True}],
    [{"day": None}],
    [{"day": 3}],  # Arrow's conversion of an int to a date, through convert_rows as before
])
def test_to_columns_are_the_converters_own(extra: list[dict[str, Any]]) -> None:
    layout = record_layout(Everything.model_json_schema())
    records = _records() + extra
    fast, slow = layout.to_columns(records), layout.convert_rows(records)
    assert list(fast) == list(slow)
    for name in slow:
        assert fast[name].type == slow[name].type, name
        assert fast[name].to_string() == slow[name].to_string(), name  # NaN shown as nan on both sides


def test_to_columns_a_value_its_column_cannot_hold_raises_as_before() -> None:
    layout = record_layout(Everything.model_json_schema())
    for bad in ({"count": 2**70}, {"count": "3"}, {"flag": 1}, {"day": "2026-02-30"}):
        with pytest.raises((pa.ArrowException, OverflowError, ValueError, TypeError)) as slow:
            layout.convert_rows([bad])
        with pytest.raises(slow.type):
            layout.to_columns([bad])


def test_each_field_says_whether_arrow_builds_its_column() -> None:
    layout = record_layout(Everything.model_json_schema())
    builds = dict(zip(layout.schema.names, layout.builds, strict=True))
    assert {n: b for n, b in builds.items() if b} == {
        "name": PLAIN, "count": PLAIN, "ratio": PLAIN, "flag": PLAIN, "day": ISO_DATE, "maybe_day": ISO_DATE,
        "level": PLAIN, "priority": PLAIN}
    assert builds["at"] is None and builds["customer"] is None and builds["free"] is None  # by their converters


def test_a_layout_without_builds_converts_row_by_row() -> None:
    """A layout of no Arrow builds (one made without them) is `convert_rows`; per-row schemas' layout (one JSON
    text column, no converters) has its own `to_columns`, which `RecordTables` calls as any other."""
    from schemas.arrow import RecordLayout
    from schemas.contract import JsonRecordLayout

    full = record_layout(Everything.model_json_schema())
    bare = RecordLayout(full.schema, full.converters)
    assert bare.to_columns(_records()[:3]) == full.convert_rows(_records()[:3])  # (the 4th holds a NaN)
    records = [{"b": 2, "a": [1, "x"]}, {"total": 1.5}]
    assert JsonRecordLayout().to_columns(records)["record"].to_pylist() == ['{"a":[1,"x"],"b":2}', '{"total":1.5}']
