"""`--format csv` wherever a command has a table (issue 24): eval's per-field scores and `schemas lint`'s warnings."""

from __future__ import annotations

import csv
import io
import json

from pipeline.cli import main as cli
from pipeline.cli.eval import write_field_csv


def test_eval_csv_is_a_row_per_field_and_one_for_all_leaves():
    score = {"gold": 2, "predicted": 2, "correct": 1, "wrong": 1, "missed": 0, "spurious": 0, "null_agree": 0,
             "precision": 0.5, "recall": 0.5}
    report = {"fields": {"total": score, "vendor.name": {**score, "precision": None}},
              "overall": {"leaves": {**score, "gold": 4}}}
    out = io.StringIO()
    write_field_csv(report, out)
    rows = list(csv.DictReader(io.StringIO(out.getvalue())))
    assert [r["field"] for r in rows] == ["total", "vendor.name", "*"]
    assert rows[0]["precision"] == "0.5" and rows[1]["precision"] == "" and rows[2]["gold"] == "4"
    assert rows[0]["reach"] == ""  # no reach in the report
    report["reach"] = {"fields": {"total": {"reach": 0.5}}, "overall": {"reach": 0.75}}
    out = io.StringIO()
    write_field_csv(report, out)
    rows = list(csv.DictReader(io.StringIO(out.getvalue())))
    assert [r["reach"] for r in rows] == ["0.5", "", "0.75"]


def test_schemas_lint_csv_is_a_row_per_warning(tmp_path, capsys):
    schema = tmp_path / "s.json"
    schema.write_text(json.dumps({"type": "object", "properties": {"a": {"type": "string"}}}))
    assert cli.main(["schemas", "lint", str(schema), "--format", "csv"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert rows and all(r["name"] == str(schema) for r in rows)
    assert {"code", "path", "message"} <= set(rows[0]) and any(r["path"] == "a" for r in rows)
