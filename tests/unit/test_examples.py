"""Few-shot examples: canonical form, checks against the model and schema, and against the compiled grammar."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from pipeline.config import ConfigError, load_config
from schemas.contract import SchemaContract
from schemas.examples import ExampleError, check_examples, compact_output, load_examples_file, model_examples

ROOT = Path(__file__).resolve().parents[2]
DOC = "ACME Ltd\nINVOICE A-17\nDate of issue: March 02, 2026\nTotal due (USD): $1,250.00\n"
GOOD = {"total": 1250.0, "vendor": {"address": None, "name": "ACME Ltd"}, "invoice_number": "A-17",
        "issue_date": "2026-03-02", "currency": "USD", "items": []}


def invoice() -> SchemaContract:
    return SchemaContract.from_model_ref("schemas.invoice:Invoice", ROOT)


def write_jsonl(path: Path, entries: list[dict]) -> Path:
    path.write_text("".join(json.dumps(e) + "\n" for e in entries))
    return path


def test_compact_output_follows_the_schema_key_order_through_refs_with_no_whitespace() -> None:
    text = compact_output(GOOD, invoice().json_schema)
    assert text == ('{"invoice_number":"A-17","vendor":{"name":"ACME Ltd","address":null},"issue_date":"2026-03-02",'
                    '"currency":"USD","items":[],"total":1250.0}')


def test_a_valid_example_passes_the_schema_and_the_validators(tmp_path: Path) -> None:
    examples = load_examples_file(write_jsonl(tmp_path / "ex.jsonl", [{"document": DOC, "output": GOOD}]))
    [(example, text)] = check_examples(examples, invoice())
    assert example.name == "ex.jsonl:1" and json.loads(text) == GOOD


@pytest.mark.parametrize("change, reason", [
    ({"total": 999.0}, "semantic_invalid at total"),  # the validator: not a number the document writes
    ({"currency": "XXX"}, "schema_violation at currency"),  # the schema: not in the enum
    ({"issue_date": "0477-03-02"}, "semantic_invalid at issue_date"),  # implausible year
])
def test_an_invalid_example_fails_naming_it(tmp_path: Path, change: dict, reason: str) -> None:
    path = write_jsonl(tmp_path / "ex.jsonl", [{"document": DOC, "output": GOOD},
                                                {"document": DOC, "output": {**GOOD, **change}}])
    with pytest.raises(ExampleError, match=rf"^example ex.jsonl:2: its output fails the schema \({reason}"):
        check_examples(load_examples_file(path), invoice())


def test_a_malformed_examples_file_fails_naming_the_line(tmp_path: Path) -> None:
    path = tmp_path / "ex.jsonl"
    path.write_text(json.dumps({"document": DOC, "output": GOOD}) + "\n{not json\n")
    with pytest.raises(ExampleError, match="example ex.jsonl:2: not valid JSON"):
        load_examples_file(path)
    write_jsonl(path, [{"document": DOC}])
    with pytest.raises(ExampleError, match="exactly the keys 'document' and 'output'"):
        load_examples_file(path)


def test_examples_from_the_models_own_json_schema_extra() -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer"}},
              "examples": [{"document": "n is 4", "output": {"n": 4}}, {"n": 5}]}
    contract = SchemaContract.from_dict(schema)
    [example] = model_examples(contract)  # a bare instance (no document) is not a few-shot pair
    assert example.output == {"n": 4} and example.name.endswith("examples[0]")


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


def test_an_invalid_example_fails_the_config_with_one_line(tmp_path: Path) -> None:
    schema = {"type": "object", "properties": {"code": {"type": "string", "maxLength": 3}}, "required": ["code"]}
    path = job(tmp_path, schema, [{"document": "Code: 1234", "output": {"code": "1234"}}])
    with pytest.raises(ConfigError) as err:
        load_config(path)
    assert "examples: example examples.jsonl:1: its output fails the schema (schema_violation at code" in str(err.value)
    assert "\n" not in str(err.value)


# XGrammar full-matches `pattern`; JSON Schema searches it. "INV-123" holds a digit run, so it is valid,
# but the grammar only lets the model write strings that are all digits.
