from datetime import date, datetime, timezone

import pyarrow as pa
import pytest

from schemas.arrow import UnsupportedSchemaError, record_layout
from schemas.contract import SchemaContract
from tests.fixtures.models import Everything


@pytest.fixture(scope="module")
def layout():
    return record_layout(Everything.model_json_schema())


def field(layout, name):
    return layout.schema.field(name)


def test_scalars_map_to_arrow_types(layout):
    assert field(layout, "name").type == pa.string()
    assert field(layout, "count").type == pa.int64()
    assert field(layout, "ratio").type == pa.float64()
    assert field(layout, "flag").type == pa.bool_()


def test_dates_and_datetimes(layout):
    assert field(layout, "day").type == pa.date32()
    assert field(layout, "at").type == pa.timestamp("us", tz="UTC")


def test_enums_and_literals_are_strings(layout):
    assert field(layout, "level").type == pa.string()
    assert field(layout, "priority").type == pa.string()


def test_nested_models_are_structs_and_lists_are_lists(layout):
    customer = field(layout, "customer").type
    assert pa.types.is_struct(customer)
    assert customer.field("name").type == pa.string()
    assert not customer.field("name").nullable
    assert customer.field("email").nullable
    customers = field(layout, "customers").type
    assert pa.types.is_list(customers) and pa.types.is_struct(customers.value_type)
    assert field(layout, "tags").type == pa.list_(pa.field("item", pa.string()))


def test_optional_fields_are_nullable_and_required_are_not(layout):
    assert field(layout, "maybe_day").nullable and field(layout, "maybe_day").type == pa.date32()
    assert field(layout, "optional_customer").nullable
    assert not field(layout, "name").nullable
    assert not field(layout, "customer").nullable


def test_untyped_values_are_json_strings(layout):
    assert field(layout, "free").type == pa.string()
    assert field(layout, "free").metadata == {b"extract.encoding": b"json"}
    assert field(layout, "mixed").type == pa.string()


def test_records_convert_to_typed_columns(layout):
    record = Everything(
        name="x", count=3, ratio=0.5, flag=True, day=date(2026, 11, 30),
        at=datetime(2026, 11, 30, 12, 0, tzinfo=timezone.utc), level="a", priority="high", tags=["t"],
        customer={"name": "Ann"}, customers=[{"name": "Bo", "email": "bo@example.com"}],
        scores=[1, None], free={"k": 1}, mixed="s",
    ).model_dump(mode="json")
    table = pa.table(layout.to_columns([record]), schema=layout.schema)
    row = table.to_pylist()[0]
    assert row["day"] == date(2026, 11, 30)
    assert row["at"] == datetime(2026, 11, 30, 12, 0, tzinfo=timezone.utc)
    assert row["priority"] == "high"
    assert row["customers"] == [{"name": "Bo", "email": "bo@example.com"}]
    assert row["optional_customer"] is None
    assert row["free"] == '{"k": 1}'
    assert row["scores"] == [1, None]


def test_json_schema_file_layout(tmp_path):
    schema = {
        "title": "order", "type": "object", "required": ["id", "placed"],
        "properties": {
            "id": {"type": "integer"},
            "placed": {"type": "string", "format": "date-time"},
            "note": {"type": ["string", "null"]},
            "lines": {"type": "array", "items": {"type": "object", "properties": {"sku": {"type": "string"}}}},
        },
    }
    path = tmp_path / "order.json"
    import json

    path.write_text(json.dumps(schema))
    contract = SchemaContract.from_file(path)
    s = contract.layout.schema
    assert s.field("id").type == pa.int64() and not s.field("id").nullable
    assert s.field("placed").type == pa.timestamp("us", tz="UTC")
    assert s.field("note").nullable
    assert pa.types.is_struct(s.field("lines").type.value_type)


def test_root_must_be_an_object_with_properties():
    with pytest.raises(UnsupportedSchemaError, match="root must be an object"):
        record_layout({"type": "array", "items": {"type": "string"}})


def test_recursive_refs_become_json():
    schema = {
        "type": "object",
        "properties": {"tree": {"$ref": "#/$defs/node"}},
        "$defs": {"node": {"type": "object", "properties": {"children": {"type": "array",
                                                                          "items": {"$ref": "#/$defs/node"}}}}},
    }
    layout = record_layout(schema)
    children = layout.schema.field("tree").type.field("children").type
    assert children.value_type == pa.string()
