"""Hostile schemas (`schemas.limits`): each bound rejects with a one-line message naming it."""

from __future__ import annotations

import pytest

from schemas.invoice import Invoice
from schemas.limits import SchemaLimitError, SchemaLimits, check_limits, redos_risk


def nested(levels: int) -> dict:
    schema: dict = {"type": "string"}
    for _ in range(levels):
        schema = {"type": "object", "properties": {"a": schema}}
    return schema


def rejection(schema: dict, limits: SchemaLimits = SchemaLimits()) -> str:  # noqa: B008
    with pytest.raises(SchemaLimitError) as caught:
        check_limits(schema, limits)
    message = str(caught.value)
    assert "\n" not in message
    return message


def test_normal_schemas_pass() -> None:
    check_limits(Invoice.model_json_schema())
    check_limits(nested(20))


def test_deep_nesting_names_depth_bound_and_where() -> None:
    message = rejection(nested(30))  # two containers (schema + properties) per level: 61 deep
    assert message.startswith("schema nesting depth 61 exceeds limits.max_depth=48 (at /properties/a/properties/a")


def test_absurd_nesting_does_not_blow_the_stack() -> None:
    schema: dict = {}
    for _ in range(100_000):
        schema = {"not": schema}
    assert "limits.max_depth=48" in rejection(schema)


def test_nesting_through_ref_chain_is_counted() -> None:
    defs = {f"d{i}": {"type": "object", "properties": {"x": {"$ref": f"#/$defs/d{i + 1}"}}} for i in range(40)}
    defs["d40"] = {"type": "string"}
    schema = {"$ref": "#/$defs/d0", "$defs": defs}
    message = rejection(schema)
    assert "with $ref inlined exceeds limits.max_depth=48" in message and "/x/$ref/properties/x/$ref/" in message


def test_recursive_ref_is_legal_and_terminates() -> None:
    tree = {
        "$defs": {"node": {"type": "object", "properties": {
            "name": {"type": "string", "maxLength": 20},
            "children": {"type": "array", "items": {"$ref": "#/$defs/node"}, "maxItems": 4}}}},
        "$ref": "#/$defs/node",
    }
    check_limits(tree)
    mutual = {"$defs": {"a": {"type": "object", "properties": {"b": {"$ref": "#/$defs/b"}}},
                        "b": {"type": "object", "properties": {"a": {"$ref": "#/$defs/a"}}}},
              "$ref": "#/$defs/a"}
    check_limits(mutual)
    check_limits({"$ref": "#"} | {"type": "object", "properties": {"self": {"$ref": "#"}}})


def test_shared_refs_do_not_explode() -> None:
    """Each level refers to the next one twice: 2^60 paths if refs were expanded without memo."""
    defs = {f"d{i}": {"type": "object", "properties": {"l": {"$ref": f"#/$defs/d{i + 1}"},
                                                        "r": {"$ref": f"#/$defs/d{i + 1}"}}} for i in range(60)}
    defs["d60"] = {"type": "integer"}
    message = rejection({"$ref": "#/$defs/d0", "$defs": defs})
    assert "limits.max_depth" in message
    check_limits({"$ref": "#/$defs/d0", "$defs": defs}, SchemaLimits(max_depth=1_000))


def test_huge_enum_names_enum_bound() -> None:
    schema = {"type": "object", "properties": {"code": {"enum": [f"c{i}" for i in range(5_000)]}}}
    assert rejection(schema) == "enum width 5000 exceeds limits.max_enum=2000 (at /properties/code/enum)"


def test_long_pattern_names_pattern_length_bound() -> None:
    schema = {"type": "object", "properties": {"p": {"type": "string", "pattern": "a" * 1_500}}}
    assert rejection(schema) == ("pattern length 1500 exceeds limits.max_pattern_length=1000 "
                                 "(at /properties/p/pattern)")


CATASTROPHIC = ["(a+)+$", "^(a|a)*$", "(.*)*x", "^(\\w+\\s?)*$", "^(([a-z])+.)+[A-Z]([a-z])+$", "(x+x+)+y",
                "^(.|\\s)*$", "^\\w+([\\.-]?\\w+)*@\\w+$", "^(?:[A-Za-z0-9]+[-]?)+[A-Za-z0-9]$",
                "^(a|aa)+$", "^(.*a){12}$", "^(ab|a|b)+$", "(aa?)+x", "^(a|a?)+$"]


@pytest.mark.parametrize("pattern", CATASTROPHIC)
def test_catastrophic_patterns_are_flagged(pattern: str) -> None:
    assert redos_risk(pattern)


@pytest.mark.parametrize("pattern", CATASTROPHIC)
def test_catastrophic_patterns_name_redos_bound_when_only_backtracking_can_run_them(pattern: str) -> None:
    """RE2 runs the plain pattern in linear time, so the schema is accepted; a lookahead keeps it off RE2,
    and then the pattern would backtrack: refused."""
    check_limits({"type": "object", "properties": {"p": {"type": "string", "pattern": pattern}}})
    schema = {"type": "object", "properties": {"p": {"type": "string", "pattern": pattern + "(?=z)"}}}
    message = rejection(schema)
    assert "limits.pattern_redos" in message and "/properties/p/pattern" in message


def test_catastrophic_pattern_property_key_is_caught() -> None:
    schema = {"type": "object", "patternProperties": {"^(a+)+(?!b)$": {"type": "integer"}}}
    assert "limits.pattern_redos" in rejection(schema)


@pytest.mark.parametrize(
    "pattern",
    ["^[a-z]+(-[a-z]+)*$", "^(\\d{1,3}\\.){3}\\d{1,3}$", "^[0-9]+(\\.[0-9]+)*$", "([^,]+,)*",
     "^([a-z0-9]+(-[a-z0-9]+)*\\.)+[a-z]{2,}$", "^(0|[1-9]\\d*)\\.(0|[1-9]\\d*)\\.(0|[1-9]\\d*)$",
     "^(\\/?((\\.{2})|([a-z0-9\\-]*))($|\\/))*$", "^[A-Z]{3}$", "\\p{L}+"],
)
def test_ordinary_patterns_are_not_flagged(pattern: str) -> None:
    assert redos_risk(pattern) is None


def test_remote_ref_is_rejected() -> None:
    schema = {"type": "object", "properties": {"a": {"$ref": "https://example.com/a.json#/x"}}}
    message = rejection(schema)
    assert "limits.remote_ref" in message and "/properties/a/$ref" in message and "example.com" in message
    assert "limits.remote_ref" in rejection({"properties": {"a": {"$ref": "other.json"}}})


def test_refs_to_ids_inside_the_document_are_local() -> None:
    schema = {
        "$id": "https://example.com/root.json",
        "properties": {"a": {"$ref": "item.json"}, "b": {"$ref": "#/$defs/x"}, "c": {"$ref": "#point"}},
        "$defs": {"x": {"$id": "item.json", "type": "integer"}, "y": {"$anchor": "point", "type": "string"}},
    }
    check_limits(schema)
    check_limits({"$id": "urn:example:root", "properties": {"a": {"$ref": "#/$defs/x"}}, "$defs": {"x": {}}})


def test_oversize_names_bytes_bound() -> None:
    schema = {"type": "object", "properties": {f"field_{i}": {"type": "string", "description": "x" * 100}
                                               for i in range(6_000)}}
    message = rejection(schema)
    assert message.startswith("schema size ") and message.endswith("exceeds limits.max_bytes=512000")


