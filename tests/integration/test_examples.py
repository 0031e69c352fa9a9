"""Few-shot examples: canonical form, checks against the model and schema, and against the compiled grammar."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.config import load_config
from tests.conftest import run_main
from tests.unit.test_examples import job, write_jsonl

# XGrammar full-matches `pattern`; JSON Schema searches it. "INV-123" holds a digit run, so it is valid,
# but the grammar only lets the model write strings that are all digits.
PATTERN_SCHEMA = {"type": "object", "properties": {"code": {"type": "string", "pattern": "[0-9]+"}},
                  "required": ["code"], "additionalProperties": False}
REFUSED = [{"document": "Code: 123", "output": {"code": "123"}},
           {"document": "Code: INV-123", "output": {"code": "INV-123"}}]


@pytest.mark.engine
def test_an_example_the_grammar_refuses_fails_validate_and_schemas_check_naming_it(tmp_path: Path) -> None:
    path = job(tmp_path, PATTERN_SCHEMA, REFUSED)
    load_config(path)  # the schema accepts both examples
    # In this process (run_main): the subject is the commands' checks and lines, not a CLI process's start.
    validate = run_main(["validate", path])
    assert validate.returncode == 2, validate.stdout + validate.stderr
    [line] = [ln for ln in validate.stderr.splitlines() if ln.startswith("error:")]
    assert "example examples.jsonl:2: the xgrammar grammar refuses this output although the schema accepts" in line
    check = run_main(["schemas", "check", tmp_path / "schema.json", "--examples", tmp_path / "examples.jsonl"])
    assert check.returncode == 2
    assert "examples    FAILED example examples.jsonl:2: the xgrammar grammar refuses" in check.stdout
    write_jsonl(tmp_path / "examples.jsonl", REFUSED[:1])
    ok = run_main(["schemas", "check", tmp_path / "schema.json", "--examples", tmp_path / "examples.jsonl"])
    assert ok.returncode == 0 and "1 example(s) ok" in ok.stdout
