"""Few-shot examples: canonical form, checks against the model and schema, and against the compiled grammar."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from pipeline.config import load_config
from schemas.contract import SchemaContract

ROOT = Path(__file__).resolve().parents[2]
def invoice() -> SchemaContract:
    return SchemaContract.from_model_ref("schemas.invoice:Invoice", ROOT)


def write_jsonl(path: Path, entries: list[dict]) -> Path:
    path.write_text("".join(json.dumps(e) + "\n" for e in entries))
    return path


def job(tmp_path: Path, schema: dict, examples: list[dict], **extra) -> Path:
    (tmp_path / "schema.json").write_text(json.dumps(schema))
    write_jsonl(tmp_path / "examples.jsonl", examples)
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"doc_id": ["d1"], "text": ["Code: 123"]}), tmp_path / "in.parquet")
    config = {"name": "ex", "input": {"uri": "in.parquet"}, "schema_file": "schema.json",
              "prompt": "Extract.\n{document}", "examples": "examples.jsonl", "output": {"uri": "out"},
              "model": {"max_tokens": 16}, **extra}
    path = tmp_path / "extract.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


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
    extract = [sys.executable, "-m", "pipeline"]
    validate = subprocess.run([*extract, "validate", str(path)], capture_output=True, text=True, cwd=ROOT)
    assert validate.returncode == 2, validate.stdout + validate.stderr
    [line] = [ln for ln in validate.stderr.splitlines() if ln.startswith("error:")]
    assert "example examples.jsonl:2: the xgrammar grammar refuses this output although the schema accepts" in line
    check = subprocess.run([*extract, "schemas", "check", str(tmp_path / "schema.json"), "--examples",
                            str(tmp_path / "examples.jsonl")], capture_output=True, text=True, cwd=ROOT)
    assert check.returncode == 2
    assert "examples    FAILED example examples.jsonl:2: the xgrammar grammar refuses" in check.stdout
    write_jsonl(tmp_path / "examples.jsonl", REFUSED[:1])
    ok = subprocess.run([*extract, "schemas", "check", str(tmp_path / "schema.json"), "--examples",
                         str(tmp_path / "examples.jsonl")], capture_output=True, text=True, cwd=ROOT)
    assert ok.returncode == 0 and "1 example(s) ok" in ok.stdout
