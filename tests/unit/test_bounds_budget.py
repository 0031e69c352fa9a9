"""schemas.bounds: the longest output a schema allows, and grammar-only bounds fitted to max_tokens."""

from __future__ import annotations

import json

from schemas.bounds import (
    ITEM_FLOOR,
    STRING_FLOOR,
    TOKENS_PER_CHAR,
    budget_bounds,
    grammar_schema,
    longest_output_chars,
)


def compact(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def test_longest_output_counts_keys_punctuation_and_optional_properties() -> None:
    schema = {"type": "object", "properties": {
        "a": {"type": "string", "maxLength": 5}, "b": {"type": "boolean"}, "c": {"type": "null"},
        "d": {"enum": ["x", "longest", 12]}, "e": {"const": {"k": 1}}}, "required": ["a"]}
    longest = {"a": "12345", "b": False, "c": None, "d": "longest", "e": {"k": 1}}
    assert longest_output_chars(schema) == len(compact(longest))


def test_longest_output_bounds_free_strings_and_arrays_only_when_asked() -> None:
    schema = {"type": "object", "properties": {"tags": {"type": "array", "items": {"type": "string"}}}}
    assert longest_output_chars(schema) is None
    assert longest_output_chars(schema, max_string=10) is None  # the list stays open
    assert longest_output_chars(schema, 10, 3) == len(compact({"tags": ["x" * 10] * 3}))
    kept = {"type": "array", "items": {"type": "string", "maxLength": 4}, "maxItems": 2}
    assert longest_output_chars(kept, 100, 10) == len(compact(["abcd", "abcd"]))
    floor = {"type": "array", "items": {"type": "boolean"}, "minItems": 4}
    assert longest_output_chars(floor, 10, 2) == len(compact([False] * 4))


def test_longest_output_of_refs_unions_formats_and_numbers() -> None:
    schema = {"type": "object", "$defs": {"D": {"type": "string", "format": "date"}},
              "properties": {"when": {"anyOf": [{"$ref": "#/$defs/D"}, {"type": "null"}]},
                             "n": {"type": "integer", "minimum": 0, "maximum": 999},
                             "id": {"type": "string", "format": "uuid"}}}
    assert longest_output_chars(schema) == len(compact({"when": "2026-01-01", "n": 999, "id": "u" * 36}))
    assert longest_output_chars({"type": "number"}) == 24


def test_unboundable_schemas_have_no_longest_output_and_say_why() -> None:
    tree = {"$defs": {"node": {"type": "object", "properties": {
        "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}, "maxItems": 2}}}}, "$ref": "#/$defs/node"}
    assert longest_output_chars(tree) is None
    found = budget_bounds(tree, 512)
    assert any("recursion" in p and "/$defs/node/properties/kids/items" in p for p in found.problems)
    open_object = {"type": "object", "properties": {"meta": {"type": "object", "additionalProperties": True}}}
    assert longest_output_chars(open_object) is None
    assert any(p.startswith("/properties/meta: an open object") for p in budget_bounds(open_object, 512).problems)
    assert longest_output_chars({"type": "object", "properties": {"x": {}}}) is None
    assert longest_output_chars({"type": "string", "pattern": "^[a-z]+$"}) is None
    assert longest_output_chars({"type": "string", "pattern": "^[a-z]{3}$"}) is not None


def test_budget_bounds_fit_the_longest_output_to_max_tokens() -> None:
    schema = {"type": "object", "properties": {
        "title": {"type": "string"}, "authors": {"type": "array", "items": {"type": "string"}},
        "year": {"type": "integer"}}}
    for max_tokens in (128, 256, 512, 2048):
        found = budget_bounds(schema, max_tokens)
        assert found.fits, found.problems
        longest = longest_output_chars(schema, found.max_string, found.max_items)
        assert longest == found.longest_chars and longest * TOKENS_PER_CHAR <= max_tokens
        assert found.max_string >= STRING_FLOOR
    roomy = budget_bounds(schema, 2048)
    assert roomy.max_items == 10 and roomy.max_string > budget_bounds(schema, 256).max_string
    fixed = budget_bounds(schema, 512, max_items=3)
    assert fixed.max_items == 3 and fixed.max_string > budget_bounds(schema, 512).max_string


def test_budget_bounds_give_up_below_the_floor_and_say_so() -> None:
    wide = {"type": "object", "properties": {f"field_{i}": {"type": "string"} for i in range(60)}}
    found = budget_bounds(wide, 256)
    assert not found.fits and (found.max_string, found.max_items) == (STRING_FLOOR, ITEM_FLOOR)
    assert any("cannot be bounded for this budget" in p and "60 free strings" in p for p in found.problems)
    own = {"type": "object", "properties": {f"f{i}": {"type": "string", "maxLength": 500} for i in range(4)}}
    assert any("the schema's own bounds" in p for p in budget_bounds(own, 256).problems)


def test_grammar_schema_auto_bounds_a_copy_and_leaves_self_bounded_strings_alone() -> None:
    schema = {"type": "object", "properties": {
        "free": {"type": "string"}, "kind": {"type": "string", "enum": ["a", "b"]},
        "code": {"type": "string", "pattern": "^[A-Z]{3}$"}, "day": {"type": "string", "format": "date"},
        "quote": {"type": "string", "x-substring": {"max_words": 8, "cells": ["some text"]}},
        "long": {"type": "string", "minLength": 300},
        "tags": {"type": "array", "items": {"type": "string"}}}}
    before = json.dumps(schema)
    bounded = grammar_schema(schema, "auto", "auto", 512)
    props = bounded["properties"]
    found = budget_bounds(schema, 512)
    assert props["free"]["maxLength"] == found.max_string and props["tags"]["maxItems"] == found.max_items
    assert props["tags"]["items"]["maxLength"] == found.max_string
    assert props["long"]["maxLength"] == 300  # never below the schema's own minLength
    for name in ("kind", "code", "day", "quote"):
        assert props[name] is schema["properties"][name]  # untouched and shared, not copied
    assert json.dumps(schema) == before  # the user's schema stays as written
    assert grammar_schema(schema, 64, "auto", 512)["properties"]["free"]["maxLength"] == 64
    assert grammar_schema(schema, None, None, 512) is schema


def test_conformance_generates_under_auto_bounds_unless_told_none() -> None:
    from pipeline.tools import conformance as c

    schema = {"type": "object", "properties": {"free": {"type": "string"}}}
    assert c.grammar_for(schema, c.Options(grammar_bounds="none")) is schema
    bounded = c.grammar_for(schema, c.Options())
    assert bounded["properties"]["free"]["maxLength"] == budget_bounds(schema, 512).max_string
    assert "maxLength" not in schema["properties"]["free"]

    class Engine:
        def generate(self, prompts: list, schemas: list, tokens: int, temperature: float) -> list:
            return schemas

    job = c.Job("k", schema, ["xgrammar"], prompt_ids=[1], grammar=bounded)
    assert c.generate_batch(Engine(), [job], max_tokens=7) == [bounded]  # the grammar, not the prompt's schema


def test_format_strings_get_no_max_length_vllm_would_refuse_it() -> None:
    schema = {"type": "object", "properties": {"mail": {"type": "string", "format": "email"},
                                               "day": {"type": "string", "format": "date"}}}
    assert grammar_schema(schema, 64, 8) is schema
    assert longest_output_chars(schema) is None
    assert any("/properties/mail: a string of format 'email'" in p for p in budget_bounds(schema, 512).problems)


def test_a_bound_never_excludes_a_value_another_all_of_branch_requires() -> None:
    schema = {"definitions": {"Request": {"type": "object", "properties": {"command": {"type": "string"}},
                                          "required": ["command"]}},
              "allOf": [{"$ref": "#/definitions/Request"},
                        {"properties": {"command": {"type": "string", "enum": ["setExceptionBreakpoints"]}}}]}
    bounded = grammar_schema(schema, 16, 2)
    assert bounded["definitions"]["Request"]["properties"]["command"]["maxLength"] == len("setExceptionBreakpoints")


def test_an_untyped_node_is_any_value_even_with_properties() -> None:
    # XGrammar let the bundled model write {"$schema": {...}, ...} for {"properties": {"bar": ...}} (no type)
    schema = {"properties": {"bar": {"type": "integer"}}}
    assert longest_output_chars(schema) is None
    assert any(p.startswith("/: a value of any type") for p in budget_bounds(schema, 512).problems)
