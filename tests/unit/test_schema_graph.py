"""The schema graph (`schemas.refs.SchemaGraph`) as the walkers read it: a reference by `$anchor` or by `$id`
resolves in the prompt's field list, the decoding levers, the examples' key order and the column layout as it
does in the validator, and a reference's siblings and cycles read the same way in each."""

from __future__ import annotations

import json
import random

from schemas.arrow import record_layout
from schemas.bounds import longest_output_chars
from schemas.examples import compact_output
from schemas.levers import field_decodings
from schemas.lint import lint
from schemas.validation import full_validator, schema_errors
from workers.prompt import presented_schema
from workers.simulated import record_for

# A vendor by `$id`, line items by `$anchor`: both local, neither a `#/pointer`.
SCHEMA = {
    "type": "object",
    "properties": {
        "vendor": {"$ref": "urn:example:seller", "description": "Who sold it"},
        "items": {"type": "array", "maxItems": 3, "items": {"$ref": "#line"}},
    },
    "required": ["vendor", "items"],
    "additionalProperties": False,
    "$defs": {
        "seller": {"$id": "urn:example:seller", "type": "object", "additionalProperties": False,
                   "properties": {"name": {"type": "string", "maxLength": 40}, "city": {"type": "string"}},
                   "required": ["name", "city"]},
        "line": {"$anchor": "line", "type": "object", "additionalProperties": False,
                 "properties": {"sku": {"type": "string", "maxLength": 12}, "qty": {"type": "integer"}},
                 "required": ["sku", "qty"]},
    },
}


def test_the_prompt_lists_the_fields_behind_an_id_and_an_anchor_reference():
    shown = presented_schema(SCHEMA, "fields")
    assert "- vendor: object, required. Who sold it" in shown
    assert "  - name: string, at most 40 characters, required" in shown
    assert "  - sku: string, at most 12 characters, required" in shown


def test_the_levers_walk_into_an_id_and_an_anchor_reference():
    fields = [d.field for d in field_decodings(SCHEMA, "off")]
    assert fields == ["vendor.name", "vendor.city", "items[].sku", "items[].qty"]


def test_the_examples_key_order_follows_an_id_and_an_anchor_reference():
    record = {"items": [{"qty": 2, "sku": "A-1"}], "vendor": {"city": "Leeds", "name": "Acme"}}
    assert compact_output(record, SCHEMA) == \
        '{"vendor":{"name":"Acme","city":"Leeds"},"items":[{"sku":"A-1","qty":2}]}'


def test_the_column_layout_types_the_fields_behind_an_id_and_an_anchor_reference():
    layout = record_layout(SCHEMA)
    assert str(layout.schema.field("vendor").type) == "struct<name: string not null, city: string not null>"
    assert str(layout.schema.field("items").type.value_type) == "struct<sku: string not null, qty: int64 not null>"


def test_the_simulated_engine_writes_records_the_validator_accepts_through_those_references():
    record = record_for(SCHEMA, random.Random(0))
    assert schema_errors(full_validator(SCHEMA), record) == []
    assert set(record["vendor"]) == {"name", "city"}


def test_a_references_siblings_apply_beside_its_target_in_every_walker():
    # The one rule: the target's keywords, the referring node's own over them (JSON Schema 2019-09 and later).
    schema = {"type": "object", "required": ["tags"], "additionalProperties": False,
              "properties": {"tags": {"$ref": "#/$defs/tags", "maxItems": 1, "description": "At most one"}},
              "$defs": {"tags": {"type": "array", "items": {"type": "string", "maxLength": 5}}}}
    assert "- tags: list of (string, at most 5 characters), at most 1 items, required. At most one" in \
        presented_schema(schema, "fields")
    assert not [w for w in lint(schema) if w.code == "unbounded_array"]
    assert longest_output_chars(schema) == len(json.dumps({"tags": ["xxxxx"]}, separators=(",", ":")))
    for seed in range(5):
        assert len(record_for(schema, random.Random(seed))["tags"]) <= 1


def test_a_recursive_reference_is_cut_where_it_re_enters_its_target_in_the_prompt_the_layout_and_the_levers():
    schema = {"$ref": "#/$defs/node", "$defs": {"node": {
        "type": "object", "properties": {"name": {"type": "string"}, "child": {"$ref": "#/$defs/node"}}}}}
    assert "- child: any value, optional. (recursive)" in presented_schema(schema, "fields")
    # The layout resolves the root before it walks (a recursive Pydantic model's columns, as ever), so its
    # first `child` is a struct and the recursion is stored as JSON text one level down.
    layout = record_layout(schema)
    assert str(layout.schema.field("child").type) == "struct<name: string, child: string>"
    decodings = {d.field: d for d in field_decodings(schema, "off")}
    assert decodings["child"].detail == "recursive"
