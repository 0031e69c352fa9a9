"""The outcome contract (`workers.outcome`): the names it gives are the ones the writers write."""

from __future__ import annotations

import pyarrow as pa
import pytest

from pipeline.output.tables import dead_letter_schema, row_schema
from schemas.contract import SchemaContract
from workers.classify import dead_letter
from workers.extractor import outcome_table
from workers.outcome import (
    DEAD_LETTER_COLUMNS,
    DEAD_LETTER_REASONS,
    LINEAGE,
    OUTCOME_FIELDS,
    ROW_LINEAGE_COLUMNS,
    DeadLetterReason,
    lineage_names,
)


def test_the_reasons_are_the_published_ones_in_their_order():
    assert DEAD_LETTER_REASONS == (
        "invalid_input", "empty_input", "input_too_long", "truncated", "invalid_json", "semantic_invalid",
        "schema_violation", "validator_error", "validator_timeout", "engine_error", "schema_invalid",
        "schema_unsupported", "type_overflow", "actor_crash", "low_confidence")
    assert DeadLetterReason("truncated") == "truncated"


def test_an_actors_outcome_table_has_the_contracts_columns_and_a_reason_as_plain_text():
    layout = SchemaContract.from_dict({"type": "object", "properties": {"a": {"type": "string"}}}).layout
    table = outcome_table(pa.table({"id": [1]}), [dead_letter(DeadLetterReason.TRUNCATED, "cut")], layout)
    assert table.schema.names == ["id", *(f.name for f in OUTCOME_FIELDS), "_typed"]
    assert table.column("_typed").to_pylist() == [None]  # a dead letter has no typed record
    assert table.column("_reason").to_pylist() == ["truncated"]
    assert type(table.column("_reason").to_pylist()[0]) is str


def test_the_committed_tables_are_written_under_the_contracts_names():
    contract = SchemaContract.from_dict({"type": "object", "properties": {"a": {"type": "string"}}})
    rows = row_schema(contract, pa.field("id", pa.int64()))
    assert rows.names == ["id", "a", *ROW_LINEAGE_COLUMNS]
    assert dead_letter_schema(pa.field("id", pa.int64())).names == ["id", *DEAD_LETTER_COLUMNS]


def test_the_lineage_vocabulary_names_a_column_of_each_table():
    rows, dead = lineage_names("rows"), lineage_names("dead_letters")
    assert set(rows) <= set(ROW_LINEAGE_COLUMNS) and set(dead) <= set(DEAD_LETTER_COLUMNS)
    assert sorted(rows.values()) == sorted(dead.values()) == sorted(n.name for n in LINEAGE)
    assert rows["_extracted_at"] == dead["failed_at"] == "at"
    with pytest.raises(ValueError):
        lineage_names("rowz")
