"""Rows are typed on the actor: a value Pydantic or the JSON Schema accepts but its Arrow column cannot hold (an
integer past int64) is that row's `type_overflow` dead letter, naming the field, and the driver's table of the
other rows builds. Before, the driver's typing raised and the whole run ended."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest

from pipeline.output.tables import RecordTables
from schemas.arrow import FieldTypeError, check_record, record_layout
from schemas.contract import SchemaContract
from workers.classify import DEAD_LETTER_REASONS
from workers.engine import Generation
from workers.engine.contract import Engine
from workers.extractor import BatchExtractor
from workers.spec import ExtractionSpec

SCHEMA = {"title": "counts", "type": "object", "required": ["label", "count"],
          "properties": {"label": {"type": "string"}, "count": {"type": "integer"},
                         "parts": {"type": "array", "items": {"type": "object", "properties": {
                             "n": {"type": "integer"}}}}}}
HUGE = 2**70


class AnswerByText(Engine):
    """An engine double that tokenizes by whitespace and answers each prompt with the record its text names."""

    def __init__(self, answers: dict[str, dict]) -> None:
        self.answers = answers
        self.prompts: list[str] = []

    def prompt_token_ids(self, text: str) -> list[int]:
        self.prompts.append(text)
        return [len(self.prompts) - 1] * max(1, len(text.split()))

    def warm(self, json_schema) -> float:
        return 0.0

    def generate(self, prompts, json_schemas, max_tokens, temperature):
        return [Generation(json.dumps(self.answers[self.prompts[p[0]].strip()]), "stop", len(p), 9) for p in prompts]


def test_check_record_names_the_field_whose_value_its_column_cannot_hold():
    layout = record_layout(SCHEMA)
    check_record(layout, {"label": "a", "count": 2**63 - 1, "parts": [{"n": 1}]})
    with pytest.raises(FieldTypeError) as info:
        check_record(layout, {"label": "a", "count": HUGE})
    assert info.value.field == "count" and "int64" in str(info.value)
    with pytest.raises(FieldTypeError) as info:
        check_record(layout, {"label": "a", "count": 1, "parts": [{"n": 2**64}]})
    assert info.value.field == "parts"


def test_an_int_past_int64_is_a_type_overflow_dead_letter_and_the_other_rows_type_on_the_driver():
    contract = SchemaContract.from_dict(SCHEMA)
    spec = ExtractionSpec(run_id="r", id_column="id", text_column="text", prompt_template="{document}",
                          contract=contract, model_path="m", model_name="m", max_tokens=50, temperature=0.0,
                          max_model_len=100)
    engine = AnswerByText({"small": {"label": "s", "count": 7}, "huge": {"label": "h", "count": HUGE},
                           "max": {"label": "m", "count": 2**63 - 1}})
    batch = pa.table({"id": pa.array([1, 2, 3], pa.int64()), "text": ["small", "huge", "max"]})
    out = BatchExtractor(engine, spec, 100)(batch)
    assert out.column("_kind").to_pylist() == ["row", "dead_letter", "row"]
    assert out.column("_reason").to_pylist() == [None, "type_overflow", None]
    error = json.loads(out.column("_error")[1].as_py())
    assert error["field"] == "count" and "count" in error["message"]
    assert "type_overflow" in DEAD_LETTER_REASONS
    rows, dead = RecordTables(contract, pa.field("id", pa.int64()), "r", "m").split(out)
    assert rows.column("count").to_pylist() == [7, 2**63 - 1]
    assert dead.column("id").to_pylist() == [2] and dead.column("reason").to_pylist() == ["type_overflow"]


def test_a_value_of_a_kind_its_column_cannot_take_is_semantic_invalid_and_one_past_its_range_type_overflow():
    from workers.classify import Outcome, check_types

    contract = SchemaContract.from_dict(SCHEMA)
    wrong_kind = check_types(Outcome(record={"label": "a", "count": "seven"}), contract)
    assert wrong_kind.reason == "semantic_invalid" and wrong_kind.error["field"] == "count"
    too_big = check_types(Outcome(record={"label": "a", "count": -(2**63) - 1}), contract)
    assert too_big.reason == "type_overflow" and too_big.error["errors"][0]["loc"] == ["count"]
    assert check_types(Outcome(record={"label": "a", "count": -(2**63)}), contract).is_row


def test_the_batch_typed_at_once_gives_each_row_the_outcome_typed_alone_gives_it():
    """`check_batch_types` (the batch's rows typed together, row by row only when one fails) against `check_types`
    row by row: the same rows and the same dead letters, on batches with no failing value and with some."""
    import copy

    from workers.classify import Outcome, check_batch_types, check_types, dead_letter

    contract = SchemaContract.from_dict(SCHEMA)
    records = [{"label": "a", "count": 1, "parts": [{"n": 2}]}, {"label": "b", "count": 2**63 - 1},
               {"label": "c", "count": HUGE}, {"label": "d", "count": "seven"}, {"label": "e", "count": 3},
               {"label": "f", "count": 1, "parts": [{"n": 2**64}]}]
    batches = [records[:2] + records[4:5], records, records[2:4], [None], records[:1] + [None] + records[3:4]]
    for batch in batches:
        outcomes = [Outcome(record=dict(r)) if r is not None else dead_letter("truncated", "cut") for r in batch]
        alone = [check_types(o, contract) for o in copy.deepcopy(outcomes)]
        together = check_batch_types(outcomes, contract)
        assert [(o.record, o.reason, o.error) for o in together] == [(o.record, o.reason, o.error) for o in alone]
    assert [o.reason for o in check_batch_types([Outcome(record=dict(r)) for r in records], contract)] == \
        [None, None, "type_overflow", "semantic_invalid", None, "type_overflow"]
