"""A row's own schema (`input.schema_column`) is resolved in one place (`schemas.row_schema`): the driver's routing,
the actor's extractor and `extract eval` agree on which schema each value names and on which values name none."""

from __future__ import annotations

import json

import pytest

from schemas.contract import schema_hash
from schemas.limits import SchemaLimits
from schemas.row_schema import RowSchemaError, row_contract, row_schema

CITY = {"title": "city", "type": "object", "properties": {"city": {"type": "string"}}}
NAME = {"type": "object", "properties": {"name": {"type": "string"}}}
DEEP = {"type": "object", "properties": {"a": {"type": "object", "properties": {"b": {"type": "object",
        "properties": {"c": {"type": "object", "properties": {"d": {"type": "object"}}}}}}}}}
TABLE = {"city": CITY}
LIMITS = SchemaLimits(max_depth=4)

# value → the message's start when it names no usable schema (None: it names one)
VALUES = {
    "city": None,
    json.dumps(NAME): None,
    "  " + json.dumps(NAME): None,
    "": "schema: the row has no schema",
    "   ": "schema: the row has no schema",
    "nope": "schema: 'nope' is neither a JSON Schema nor a key of input.schema_table",
    "[1, 2]": "schema: '[1, 2]' is neither",
    "{not json": "schema: not valid JSON: Expecting property name",
    json.dumps(DEEP): "schema: ",
    json.dumps({"type": 3}): "schema: not a valid JSON Schema",
}


def test_a_value_is_a_table_key_or_json_text():
    assert row_schema("city", TABLE, "schema") == ("schema_table[city]", CITY)
    assert row_schema(json.dumps(NAME), TABLE, "schema") == ("schema", NAME)
    assert row_schema(json.dumps(NAME), TABLE) == ("schema", NAME)
    contract = row_contract("city", TABLE, LIMITS, "schema")
    assert contract.hash == schema_hash(CITY) and contract.name == "city" and contract.source == "schema_table[city]"
    assert row_contract(json.dumps(NAME), TABLE, LIMITS, "schema").name == "schema"  # untitled: routing's name


@pytest.mark.parametrize("value", list(VALUES))
def test_each_value_resolves_or_says_why_not(value):
    why = VALUES[value]
    if why is None:
        assert row_contract(value, TABLE, LIMITS, "schema").json_schema in (CITY, NAME)
        return
    with pytest.raises(RowSchemaError) as caught:
        row_contract(value, TABLE, LIMITS, "schema")
    assert str(caught.value).startswith(why)


def test_json_nested_past_the_decoders_stack_is_left_to_the_caller():
    with pytest.raises(RecursionError):
        row_schema('{"a": ' * 20_000 + "1" + "}" * 20_000, TABLE, "schema")


def test_routing_the_extractor_and_eval_agree_on_every_value(tmp_path):
    import pyarrow as pa

    from pipeline.config import load_config
    from pipeline.routing import _row_contract
    from pipeline.stage_config import RoutingConfig
    from pipeline.tools.evaluate.output import schema_value
    from tests.conftest import DELETE, write_config
    from tests.unit.test_extractor import ScriptedEngine, per_row_spec
    from workers.extractor import BatchExtractor

    (tmp_path / "table.json").write_text(json.dumps(TABLE))
    loaded = load_config(write_config(tmp_path, schema=DELETE, **{
        "input.schema_column": "schema", "input.schema_table": "table.json", "schema_policy.max_depth": 4}))
    values = list(VALUES)
    extractor = BatchExtractor(ScriptedEngine(answers={}), per_row_spec(), 1000)
    out = extractor(pa.table({"id": list(range(len(values))), "text": ["doc"] * len(values), "schema": values}))
    invalid = [reason == "schema_invalid" for reason in out.column("_reason").to_pylist()]
    routed = [_row_contract(v, RoutingConfig.of(loaded)) is None for v in values]
    assert invalid == routed == [why is not None for why in VALUES.values()]
    # eval reads the schema a value names (unchecked: it compares fields under it), None where it names none
    unreadable = {"", "   ", "nope", "[1, 2]", "{not json"}
    assert [schema_value(loaded, v) is None for v in values] == [v in unreadable for v in values]
    assert schema_value(loaded, "city") == CITY and schema_value(loaded, None) is None
