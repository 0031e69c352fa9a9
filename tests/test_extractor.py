"""Batch bookkeeping with an engine double: every document gets exactly one outcome, in order.

The real engine runs in test_pipeline_e2e.py; here the double lets a test make generation raise,
which the real engine does not do on demand.
"""

import json

import pyarrow as pa

from schemas.contract import SchemaContract
from workers.classify import DEAD_LETTER_REASONS
from workers.engine import Generation
from workers.extractor import BatchExtractor
from workers.spec import ExtractionSpec

GOOD = {"customer": {"name": "Ann"}, "product": "Kettle", "priority": "low", "summary": "Broken"}


class ScriptedEngine:
    """Tokenizes by whitespace and answers from a script; `fail` makes generate raise."""

    def __init__(self, fail: bool = False) -> None:
        self.fail = fail
        self.calls: list[int] = []

    def prompt_token_ids(self, text: str) -> list[int]:
        return list(range(len(text.split())))

    def generate(self, prompts, json_schema, max_tokens, temperature):
        self.calls.append(len(prompts))
        if self.fail:
            raise RuntimeError("EngineDeadError: engine core died")
        return [Generation(json.dumps(GOOD), "stop", len(p), 12) for p in prompts]


def spec() -> ExtractionSpec:
    contract = SchemaContract.from_model_ref("tests.fixtures.models:Ticket")
    return ExtractionSpec(run_id="r", id_column="id", text_column="text", prompt_template="{document}",
                          contract=contract, model_path="m", model_name="m", max_tokens=50, temperature=0.0,
                          max_model_len=100)


def batch(texts):
    return pa.table({"id": pa.array(range(len(texts)), pa.int64()), "text": pa.array(texts, pa.string())})


def test_one_outcome_per_document_in_order_with_only_eligible_documents_generated():
    engine = ScriptedEngine()
    out = BatchExtractor(engine, spec(), 100)(batch(["a b c", None, "word " * 80, "REJECT-ME d", "e"]))
    assert out.column("id").to_pylist() == [0, 1, 2, 3, 4]
    assert out.column("_reason").to_pylist() == [None, "empty_input", "input_too_long", "semantic_invalid", None]
    assert out.column("_kind").to_pylist() == ["row", "dead_letter", "dead_letter", "dead_letter", "row"]
    assert engine.calls == [3]
    assert {r for r in out.column("_reason").to_pylist() if r} <= set(DEAD_LETTER_REASONS)
    assert json.loads(out.column("_record")[0].as_py())["product"] == "Kettle"


def test_engine_exception_dead_letters_the_generated_documents_only():
    out = BatchExtractor(ScriptedEngine(fail=True), spec(), 100)(batch(["a", "", "b"]))
    assert out.column("_reason").to_pylist() == ["engine_error", "empty_input", "engine_error"]
    assert "EngineDeadError" in json.loads(out.column("_error")[0].as_py())["message"]
    assert out.schema.field("id").type == pa.int64()
