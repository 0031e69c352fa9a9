"""Schema design help (`schemas.lint`): escape hatches, reasoning order, unbounded lists and strings."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from schemas.invoice import Invoice
from schemas.lint import lint
from tests.conftest import run_cli

ROOT = Path(__file__).resolve().parents[1]
CORPORA = ROOT.parent / "shared" / "corpora"


def codes(schema: dict) -> set[tuple[str, str]]:
    return {(w.code, w.path) for w in lint(schema)}


def test_sample_invoice() -> None:
    assert codes(Invoice.model_json_schema()) == set()  # nullable where a document may not say, all bounded


def test_escape_hatches_silence_the_warning() -> None:
    schema = {
        "type": "object",
        "properties": {
            "a": {"anyOf": [{"type": "number"}, {"type": "null"}]},
            "b": {"enum": ["red", "green", "unknown"]},
            "c": {"type": ["integer", "null"]},
            "d": {"enum": ["yes", "no", "Not stated"]},
            "e": {"type": "string", "maxLength": 10},  # an empty string is allowed
            "f": {"type": "array", "items": {"type": "integer"}, "maxItems": 3},
            "g": {"type": "boolean"},
            "h": {"enum": ["yes", "no"]},
        },
        "required": list("abcdefgh"),
    }
    assert codes(schema) == {("no_escape_hatch", "g"), ("no_escape_hatch", "h")}
    (warning,) = [w for w in lint(schema) if w.path == "h"]
    assert "'unknown'" in warning.message and "invent" in warning.message


def test_optional_fields_need_no_hatch() -> None:
    assert codes({"type": "object", "properties": {"n": {"type": "integer"}}}) == set()


def test_answer_before_reasoning() -> None:
    late = {"type": "object", "properties": {"label": {"enum": ["pos", "neg", "unknown"]},
                                             "reasoning": {"type": "string", "maxLength": 400}}}
    (warning,) = lint(late)
    assert (warning.code, warning.path) == ("answer_before_reasoning", "reasoning")
    assert "'label'" in warning.message and "move 'reasoning' first" in warning.message
    early = {"type": "object", "properties": dict(reversed(list(late["properties"].items())))}
    assert lint(early) == []
    # Nested too, and the other usual names.
    nested = {"type": "object", "properties": {"verdict": {"type": "object", "properties": {
        "score": {"type": ["number", "null"]}, "explanation": {"type": "string", "maxLength": 200}}}}}
    assert codes(nested) == {("answer_before_reasoning", "verdict.explanation")}


def test_unbounded_arrays_and_strings() -> None:
    schema = {"type": "object", "properties": {
        "tags": {"type": "array", "items": {"type": "string", "maxLength": 10}},
        "summary": {"type": "string"},
        "day": {"type": "string", "format": "date"},
        "code": {"type": "string", "pattern": "^[A-Z]{3}$"},
        "pair": {"type": "array", "prefixItems": [{"type": "integer"}, {"type": "integer"}], "items": False},
    }}
    assert codes(schema) == {("unbounded_array", "tags"), ("unbounded_string", "summary")}


def test_recursive_schema_terminates() -> None:
    tree = {"$defs": {"node": {"type": "object", "properties": {
        "name": {"type": "string", "maxLength": 20},
        "children": {"type": "array", "items": {"$ref": "#/$defs/node"}}}, "required": ["name"]}},
        "$ref": "#/$defs/node"}
    assert codes(tree) == {("unbounded_array", "children")}


@pytest.mark.slow
def test_real_corpus_schemas() -> None:
    deep = CORPORA / "deepjsoneval-dev"
    bench = CORPORA / "jsonschemabench-dev" / "schemas"
    if not bench.exists():
        pytest.skip(f"{bench} not present (shared corpora)")
    seen: dict[str, int] = {}
    for path in sorted(bench.glob("*/*.json")):
        for warning in lint(json.loads(path.read_text())):
            assert warning.code in {"no_escape_hatch", "answer_before_reasoning", "unbounded_array",
                                    "unbounded_string"}
            seen[warning.code] = seen.get(warning.code, 0) + 1
    assert set(seen) == {"no_escape_hatch", "answer_before_reasoning", "unbounded_array", "unbounded_string"}
    items = [json.loads(line) for path in sorted(deep.glob("*.jsonl")) for line in path.read_text().splitlines()]
    for item in items:
        schema = item["schema"] if isinstance(item["schema"], dict) else json.loads(item["schema"])
        assert lint(schema), item["idx"]  # real extraction schemas: unbounded strings at least
    assert len(items) > 100 or not deep.exists()


def test_cli_schemas_lint(cli_env: dict, tmp_path: Path) -> None:
    path = tmp_path / "s.json"
    path.write_text(json.dumps({"type": "object", "properties": {"answer": {"type": "integer"},
                                                                 "reasoning": {"type": "string"}},
                                "required": ["answer"]}))
    done = run_cli(["schemas", "lint", str(path), "schemas.invoice:Invoice"], cli_env)
    assert done.returncode == 0, done.stderr
    assert "no_escape_hatch at answer" in done.stdout and "answer_before_reasoning at reasoning" in done.stdout
    assert "schemas.invoice:Invoice: 0 warning(s)" in done.stdout
    done = run_cli(["schemas", "lint", str(tmp_path / "missing.json")], cli_env)
    assert done.returncode == 2 and "missing.json" in done.stderr
