"""`extract eval`: the scorer's rules on hand-computed cases, output reading on hand-made committed
partitions, and one real run of the sample job scored against the sample gold."""

from __future__ import annotations

import json
from datetime import date, datetime, timezone
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipeline.config import load_config
from pipeline.tools.evaluate import (
    Comparer,
    EvalError,
    EvalOptions,
    Tolerance,
    build_report,
    leaf_equal,
    load_gold,
    normalize_text,
    output_of_labels,
    output_of_run,
    render_markdown,
    rows_to_records,
    score,
)
from tests.conftest import DELETE, write_config


def kinds(events) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for e in events:
        out.setdefault(e.path, []).append(e.kind)
    return out


# -- leaves --------------------------------------------------------------------------------------


def test_normalisation_is_nfkc_casefold_and_whitespace():
    assert normalize_text("  ACME\t\tOffice\u00a0Supply \n") == "acme office supply"
    assert normalize_text("ﬁle Straße") == "file strasse"  # ligature (NFKC), ß (casefold)
    assert normalize_text("Ｆｕｌｌ") == "full"  # full-width letters
    assert leaf_equal("Blue  Fjord", "blue fjord")
    assert not leaf_equal("Blue Fjord AS", "Blue Fjord")


def test_numbers_have_tolerance_and_booleans_are_not_numbers():
    assert leaf_equal(1450.614, 1450.61)  # absolute 0.01
    assert not leaf_equal(1450.63, 1450.61)
    assert leaf_equal(2_000_000_000.0, 2_000_001_000.0)  # relative 1e-6 of 2e9 is 2000
    assert not leaf_equal(2_000_000_000.0, 2_000_001_000.0, Tolerance(rel=1e-9, abs=0.01))
    assert leaf_equal(5, 5.0)
    assert not leaf_equal(True, 1) and not leaf_equal(0, False)
    assert leaf_equal(True, True) and not leaf_equal(True, False)
    assert not leaf_equal("5", 5)  # mixed types never match


def test_dates_compare_as_iso():
    assert leaf_equal(date(2026, 1, 30), "2026-01-30")
    assert not leaf_equal(date(2026, 1, 30), "2026-01-31")
    assert leaf_equal(datetime(2026, 1, 30, 10, tzinfo=timezone.utc), "2026-01-30T10:00:00Z")
    assert leaf_equal(datetime(2026, 1, 30, 10), "2026-01-30T10:00:00+00:00")  # naive is UTC
    # two strings are read as datetimes only when the schema says so
    assert leaf_equal("2026-01-30T11:00:00+01:00", "2026-01-30T10:00:00Z", fmt="date-time")
    assert not leaf_equal("2026-01-30T11:00:00+01:00", "2026-01-30T10:00:00Z")


# -- records ---------------------------------------------------------------------------------------


def test_nested_paths_and_positional_lists():
    gold = {"vendor": {"name": "Acme"}, "line_items": [{"amount": 10.0, "sku": "a"}, {"amount": 20.0, "sku": "b"}]}
    pred = {"vendor": {"name": "ACME"}, "line_items": [{"amount": 20.0, "sku": "b"}, {"amount": 10.0, "sku": "a"}]}
    got = kinds(Comparer(None, EvalOptions()).record(pred, gold))
    assert got == {"vendor.name": ["correct"], "line_items[].amount": ["wrong", "wrong"],
                   "line_items[].sku": ["wrong", "wrong"]}


def test_set_lists_from_schema_option_or_flag():
    gold, pred = {"tags": ["a", "b", "c"]}, {"tags": ["c", "a", "x"]}
    schema = {"type": "object", "properties": {"tags": {"type": "array", "uniqueItems": True,
                                                        "items": {"type": "string"}}}}
    assert kinds(Comparer(schema, EvalOptions()).record(pred, gold)) == {
        "tags[]": ["correct", "correct", "missed", "spurious"]}
    assert kinds(Comparer(None, EvalOptions()).record(pred, gold)) == {"tags[]": ["wrong", "wrong", "wrong"]}
    for options in (EvalOptions(unordered=frozenset({"tags"})), EvalOptions(all_lists_unordered=True)):
        assert kinds(Comparer(None, options).record(pred, gold))["tags[]"].count("correct") == 2


def test_set_of_objects_pairs_the_best_match_first():
    gold = {"people": [{"name": "Ann", "age": 30}, {"name": "Bob", "age": 40}]}
    pred = {"people": [{"name": "Bob", "age": 41}, {"name": "Ann", "age": 30}, {"name": "Cy", "age": 1}]}
    events = Comparer(None, EvalOptions(unordered=frozenset({"people"}))).record(pred, gold)
    got = kinds(events)
    assert sorted(got["people[].name"]) == ["correct", "correct", "spurious"]
    assert sorted(got["people[].age"]) == ["correct", "spurious", "wrong"]


def test_missing_and_null_are_distinct_events():
    gold = {"a": None, "b": "x", "c": "y", "d": None, "e": "z"}
    pred = {"b": None, "d": "w", "e": "Z"}  # a absent, c absent
    events = Comparer(None, EvalOptions()).record(pred, gold)
    assert kinds(events) == {"a": ["null_agree"], "b": ["missed"], "c": ["missed"], "d": ["spurious"],
                             "e": ["correct"]}
    assert [e.path for e in events if e.absent] == ["c"]  # b was null, c was absent


def test_schema_refs_anyof_and_fields_outside_the_schema():
    from pydantic import BaseModel

    class Party(BaseModel):
        name: str
        tags: list[str] = []

    class Doc(BaseModel):
        vendor: Party | None = None
        total: float

    schema = Doc.model_json_schema()  # vendor is anyOf [$ref Party, null]
    comparer = Comparer(schema, EvalOptions())
    events = comparer.record({"vendor": {"name": "A", "tags": ["x"]}, "total": 1.0},
                             {"vendor": {"name": "a", "tags": ["x"], "vat": "DE1"}, "total": 1.0, "subtotal": 1.0})
    assert kinds(events) == {"vendor.name": ["correct"], "vendor.tags[]": ["correct"], "total": ["correct"]}
    assert dict(comparer.not_in_schema) == {"vendor.vat": 1, "subtotal": 1}
    assert not comparer.pred_not_in_schema


def test_shape_mismatch_misses_gold_and_counts_prediction_spurious():
    events = Comparer(None, EvalOptions()).record({"vendor": "Acme"}, {"vendor": {"name": "Acme", "city": None}})
    assert kinds(events) == {"vendor.name": ["missed"], "vendor": ["spurious"]}


def test_precision_recall_exact_match_coverage_arithmetic():
    golds = {
        "d1": {"a": "x", "b": 1.0, "c": None},  # row: a correct, b wrong, c null=null
        "d2": {"a": "y", "b": 2.0, "c": None},  # row: exact
        "d3": {"a": "z", "b": 3.0, "c": "q"},  # dead letter: 3 gold leaves missed
        "d4": {"a": "w", "b": 4.0, "c": None},  # not in the run: not scored
    }
    rows = {"d1": {"a": "X", "b": 1.5, "c": None}, "d2": {"a": "y ", "b": 2.001, "c": None},
            "d9": {"a": "no gold", "b": 0.0, "c": None}}
    dead = {"d3": "truncated", "d8": "empty_input"}
    scores = score(golds, rows, dead, lambda _: None)
    summary = scores.summary()
    o = summary["overall"]
    # predicted non-null leaves: d1 a,b + d2 a,b = 4, correct 3; gold non-null leaves: 2 + 2 + 3 = 7
    assert o["leaves"]["predicted"] == 4 and o["leaves"]["correct"] == 3 and o["leaves"]["gold"] == 7
    assert o["precision"] == 0.75 and o["recall"] == round(3 / 7, 4)
    assert o["f1"] == round(2 * 0.75 * round(3 / 7, 4) / (0.75 + round(3 / 7, 4)), 4)
    assert o["exact_match_rate"] == round(1 / 3, 4) and o["exact_match_rate_on_rows"] == 0.5
    assert o["coverage"] == round(2 / 3, 4) and o["dead_letter_rate"] == round(1 / 3, 4)
    assert summary["dead_letters_by_reason"] == {"truncated": {"count": 1, "rate": round(1 / 3, 4)}}
    assert summary["run_dead_letters_by_reason"] == {"empty_input": 1, "truncated": 1}
    docs = summary["documents"]
    assert (docs["gold"], docs["scored"], docs["with_row"], docs["gold_not_in_run"], docs["rows_without_gold"],
            docs["dead_letters_without_gold"]) == (4, 3, 2, 1, 1, 1)
    fields = summary["fields"]
    assert fields["b"]["precision"] == 0.5 and fields["b"]["recall"] == round(1 / 3, 4)
    assert fields["c"] == {**fields["c"], "gold": 1, "predicted": 0, "missed": 1, "null_agree": 2,
                           "precision": None, "recall": 0.0}


def test_report_and_markdown_are_well_formed():
    scores = score({"d1": {"a": "x"}}, {"d1": {"a": "x"}}, {}, lambda _: None)
    options = EvalOptions()
    report = build_report(scores, {"name": "t", "run_ids": ["r1"]}, options)
    json.loads(json.dumps(report))
    md = render_markdown(report)
    assert "| precision | 1.000 |" in md and "| a | 1 | 1 | 1 | 0 | 0 | 0 | 0 | 1.000 | 1.000 |" in md
    table_lines = [line for line in md.splitlines() if line.startswith("|")]
    assert all(line.endswith("|") for line in table_lines)


# -- gold files ------------------------------------------------------------------------------------


def test_gold_shapes_jsonl_and_parquet(tmp_path):
    flat = tmp_path / "flat.jsonl"
    flat.write_text('{"doc_id": 1, "a": "x"}\n\n{"doc_id": 2, "a": "y"}\n')
    assert load_gold(flat, "doc_id") == {"1": {"a": "x"}, "2": {"a": "y"}}
    nested = tmp_path / "nested.jsonl"
    nested.write_text('{"doc_id": "k1", "record": {"a": "x"}}\n{"doc_id": "k2", "record": "{\\"a\\": \\"y\\"}"}\n')
    assert load_gold(nested, "doc_id") == {"k1": {"a": "x"}, "k2": {"a": "y"}}
    parquet = tmp_path / "gold.parquet"
    pq.write_table(pa.table({"doc_id": ["p1"], "a": ["x"], "n": [pa.scalar(1.5)]}), parquet)
    assert load_gold(parquet, "doc_id") == {"p1": {"a": "x", "n": 1.5}}
    pq.write_table(pa.table({"doc_id": ["p1"], "record": [{"a": "x"}]}), parquet)
    assert load_gold(parquet, "doc_id") == {"p1": {"a": "x"}}


@pytest.mark.parametrize("text, message", [
    ('{"doc_id": 1, "a": 1}\n{"doc_id": 1, "a": 2}\n', "appears twice"),
    ('{"id": 1, "a": 1}\n', "no 'doc_id' key"),
    ('{"doc_id": 1, "a": \n', "line 1: not JSON"),
    ('[1, 2]\n', "expected an object"),
])
def test_bad_gold_files_name_the_problem(tmp_path, text, message):
    path = tmp_path / "gold.jsonl"
    path.write_text(text)
    with pytest.raises(EvalError, match=message):
        load_gold(path, "doc_id")


# -- reading committed output (real Parquet, hand-made partitions) ---------------------------------


def commit_partition(out: Path, run_id: str, rows: pa.Table, dead: pa.Table, output_hash: str,
                     day: str | None = None) -> None:
    key = f"dt={day}" if day else ""
    for kind, table in (("rows", rows), ("dead_letters", dead)):
        (out / kind / key).mkdir(parents=True, exist_ok=True)
        pq.write_table(table, out / kind / key / "part-0.parquet")
    meta = out / "_partitions" / (key or "all")
    meta.mkdir(parents=True, exist_ok=True)
    (meta / "manifest.json").write_text(json.dumps({
        "partition": day or "all", "run_id": run_id, "output_hash": output_hash, "input_files": [],
        "files": {"rows": str(out / "rows" / key / "part-0.parquet"),
                  "dead_letters": str(out / "dead_letters" / key / "part-0.parquet")}}))
    (meta / "_SUCCESS").write_text(run_id)
    (out / "_runs").mkdir(exist_ok=True)
    (out / "_runs" / f"{run_id}.json").write_text("{}")


def test_typed_rows_are_read_from_the_run_that_committed_them(tmp_path):
    loaded = load_config(write_config(tmp_path))
    out = Path(loaded.output_uri)
    rows = pa.table({"doc_id": ["inv-1"], "invoice_number": ["N-1"],
                     "vendor": pa.array([{"name": "Acme", "address": None}]),
                     "issue_date": pa.array([date(2026, 1, 2)], pa.date32()), "items": [["a", "b"]],
                     "_run_id": ["r1"], "_schema_hash": ["h"]})
    dead = pa.table({"doc_id": ["inv-2"], "reason": ["truncated"], "run_id": ["r1"]})
    commit_partition(out, "r1", rows, dead, loaded.output_hash)
    output = output_of_run(loaded, "r1")
    assert output.rows == {"inv-1": {"invoice_number": "N-1", "vendor": {"name": "Acme", "address": None},
                                     "issue_date": date(2026, 1, 2), "items": ["a", "b"]}}
    assert output.dead_letters == {"inv-2": "truncated"}
    assert output_of_labels(loaded, {"all"}, "r-later").rows == output.rows  # same config: a skip is fine
    with pytest.raises(EvalError, match="no such run"):
        output_of_run(loaded, "r0")
    commit_partition(out, "r2", rows, dead, "another-hash")
    with pytest.raises(EvalError, match="a later run replaced"):
        output_of_run(loaded, "r1")
    with pytest.raises(EvalError, match="another model, prompt or schema"):
        output_of_labels(loaded, {"all"}, "r3")


def test_several_runs_are_scored_together(tmp_path):
    loaded = load_config(write_config(tmp_path))
    out = Path(loaded.output_uri)
    for n, day in ((1, "2026-01-01"), (2, "2026-01-02")):
        rows = pa.table({"doc_id": [f"d{n}"], "total": [float(n)], "_run_id": [f"r{n}"]})
        dead = pa.table({"doc_id": [f"x{n}"], "reason": ["truncated"], "run_id": [f"r{n}"]})
        commit_partition(out, f"r{n}", rows, dead, loaded.output_hash, day)
    both = output_of_run(loaded, ["r1", "r2"])
    assert both.rows == {"d1": {"total": 1.0}, "d2": {"total": 2.0}} and both.run_ids == ["r1", "r2"]
    assert both.dead_letters == {"x1": "truncated", "x2": "truncated"}
    assert output_of_run(loaded, "r2").rows == {"d2": {"total": 2.0}}


def test_per_row_schema_rows_hold_json_records(tmp_path):
    cfg = write_config(tmp_path, **{"schema": DELETE, "input.schema_column": "schema"})
    loaded = load_config(cfg)
    table = pa.table({"doc_id": [7], "record": ['{"a": {"b": [1, 2]}}'], "_schema_hash": ["h"]})
    assert rows_to_records(loaded, table) == {"7": {"a": {"b": [1, 2]}}}


# -- one real run: the sample job on six documents, scored against the sample gold -----------------


