"""Through the command's main, in this process (`tests.conftest.run_main`), before Ray or an engine starts: a
schema field named as a reserved column, and a `max_tokens` at or above `max_model_len`, are one line on stderr and
exit 2 (`extract validate` and `extract run`)."""

from __future__ import annotations

import json

import pytest

from tests.conftest import DELETE, run_main, write_config


def _schema(tmp_path, field: str):
    path = tmp_path / "schema.json"
    path.write_text(json.dumps({"title": "t", "type": "object",
                                "properties": {"total": {"type": "number"}, field: {"type": "string"}}}))
    return str(path)


CASES = {
    "validate-_source_file": ("validate", {"schema": DELETE, "schema_file": "_source_file"},
                              "field '_source_file' is a reserved output column name"),
    "run-_run_id": ("run", {"schema": DELETE, "schema_file": "_run_id"},
                    "field '_run_id' is a reserved output column name"),
    "run-max_tokens": ("run", {"model.max_tokens": 4096, "model.max_model_len": 4096},
                       "model.max_tokens (4096) must be below model.max_model_len (4096)"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_refused_in_one_line_with_exit_2(tmp_path, case):
    command, overrides, expected = CASES[case]
    if "schema_file" in overrides:
        overrides = dict(overrides, schema_file=_schema(tmp_path, overrides["schema_file"]))
    config = write_config(tmp_path, **overrides)
    result = run_main([command, str(config)])
    assert result.returncode == 2, result.stderr[-3000:]
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and expected in lines[0], result.stderr[-3000:]
    assert not (tmp_path / "out").exists()  # nothing written: refused before the output was touched
