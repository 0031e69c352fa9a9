"""Schema design help (`schemas.lint`): escape hatches, reasoning order, unbounded lists and strings."""

from __future__ import annotations

from schemas.invoice import Invoice
from schemas.lint import lint


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


