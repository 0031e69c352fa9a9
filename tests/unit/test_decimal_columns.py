"""A Pydantic `Decimal` money field is a decimal column of the schema's own precision, not a JSON string."""

from __future__ import annotations

import io
from decimal import Decimal

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pydantic import BaseModel, Field

from schemas.arrow import FieldTypeError, check_record
from schemas.contract import SchemaContract


class Line(BaseModel):
    amount: Decimal = Field(max_digits=12, decimal_places=2)


class Bill(BaseModel):
    total: Decimal = Field(max_digits=12, decimal_places=2)
    tax: Decimal | None = Field(default=None, max_digits=50, decimal_places=4)
    rate: Decimal = Field(decimal_places=3)  # a scale alone: 38 digits
    loose: Decimal  # no scale to store it at: float64, as documented
    lines: list[Line] = []


@pytest.fixture(scope="module")
def contract() -> SchemaContract:
    return SchemaContract(name="bill", version="1", json_schema=Bill.model_json_schema(), _model=Bill)


def test_decimal_fields_keep_the_schemas_precision(contract):
    schema = contract.layout.schema
    assert schema.field("total").type == pa.decimal128(12, 2)
    assert schema.field("tax").type == pa.decimal128(38, 4) and schema.field("tax").nullable  # DuckDB's widest
    assert schema.field("rate").type == pa.decimal128(38, 3)
    assert schema.field("loose").type == pa.float64()
    assert schema.field("lines").type.value_type.field("amount").type == pa.decimal128(12, 2)
    assert "x-decimal" not in str(contract.json_schema)  # the grammar's schema is Pydantic's own


def test_decimal_values_are_written_exactly_and_sum_exactly_in_duckdb(contract):
    records = [Bill(total="0.10", rate="1.5", loose="2", lines=[{"amount": "0.10"}]).model_dump(mode="json"),
               Bill(total="0.20", tax="0.0125", rate="2", loose="3").model_dump(mode="json")]
    for record in records:
        check_record(contract.layout, record)
    table = pa.table(contract.layout.to_columns(records), schema=contract.layout.schema)
    buffer = io.BytesIO()
    pq.write_table(table, buffer)
    back = pq.read_table(io.BytesIO(buffer.getvalue()))
    assert back.column("total").to_pylist() == [Decimal("0.10"), Decimal("0.20")]
    assert duckdb.sql("SELECT sum(total) AS s FROM back").fetchall()[0][0] == Decimal("0.30")  # not 0.30000000000000004


def test_a_decimal_past_its_precision_is_a_field_error(contract):
    record = Bill(total="1", rate="1", loose="1").model_dump(mode="json")
    record["total"] = "12345678901234.5"  # 16 digits: the column holds 12
    with pytest.raises(FieldTypeError, match="total"):
        check_record(contract.layout, record)


def test_eval_scores_a_decimal_column_against_a_number_or_its_text():
    from pipeline.tools.evaluate import leaf_equal

    assert leaf_equal(Decimal("12.50"), 12.5) and leaf_equal(Decimal("12.50"), "12.5")
    assert not leaf_equal(Decimal("12.50"), 13) and not leaf_equal(Decimal("1"), "one")
