"""Batch bookkeeping with an engine double: every document gets exactly one outcome, in order.

The real engine runs in test_pipeline_e2e.py; here the double lets a test make generation raise,
which the real engine does not do on demand.
"""

import json

import pyarrow as pa

from schemas.contract import SchemaContract
from workers.classify import DEAD_LETTER_REASONS
from workers.engine import Generation
from workers.engine.contract import Engine
from workers.extractor import BatchExtractor
from workers.spec import ExtractionSpec

GOOD = {"customer": {"name": "Ann"}, "product": "Kettle", "priority": "low", "summary": "Broken"}


class ScriptedEngine(Engine):
    """Tokenizes by whitespace and answers from a script; `fail` makes generate raise."""

    def __init__(self, fail: bool = False, answers=None, refuse_titles=()) -> None:
        self.fail = fail
        self.calls: list[int] = []
        self.warmed: list[dict] = []
        self.schemas: list = []
        self.answers = answers or {}
        self.refuse_titles = set(refuse_titles)

    def prompt_token_ids(self, text: str) -> list[int]:
        return list(range(len(text.split())))

    def warm(self, json_schema) -> float:
        if json_schema.get("title") in self.refuse_titles:
            raise ValueError("grammar compilation failed")
        self.warmed.append(json_schema)
        return 0.01

    def generate(self, prompts, json_schemas, max_tokens, temperature):
        self.calls.append(len(prompts))
        self.schemas.append(json_schemas)
        if self.fail:
            raise RuntimeError("EngineDeadError: engine core died")
        return [Generation(json.dumps(self.answers.get((s or {}).get("title"), GOOD)), "stop", len(p), 12)
                for p, s in zip(prompts, json_schemas, strict=True)]


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
    assert out.column("_typed")[0].as_py()["product"] == "Kettle"


def test_engine_exception_dead_letters_the_generated_documents_only():
    out = BatchExtractor(ScriptedEngine(fail=True), spec(), 100)(batch(["a", "", "b"]))
    assert out.column("_reason").to_pylist() == ["engine_error", "empty_input", "engine_error"]
    assert "EngineDeadError" in json.loads(out.column("_error")[0].as_py())["message"]
    assert out.schema.field("id").type == pa.int64()


NAME = {"title": "name", "type": "object", "required": ["name"],
        "properties": {"name": {"type": "string", "maxLength": 5}}}
CITY = {"title": "city", "type": "object", "required": ["city"], "properties": {"city": {"type": "string"}}}


def per_row_spec(**extra) -> ExtractionSpec:
    from schemas.limits import SchemaLimits

    contract = SchemaContract.for_rows("job", "input.schema_column: schema")
    return ExtractionSpec(run_id="r", id_column="id", text_column="text", prompt_template="{schema} {document}",
                          contract=contract, model_path="m", model_name="m", max_tokens=50, temperature=0.0,
                          max_model_len=1000, schema_column="schema", schema_table={"city": CITY},
                          schema_limits=SchemaLimits(max_depth=4), **extra)


def test_per_row_schemas_resolve_inline_or_by_key_compile_once_and_dead_letter_bad_schemas():
    engine = ScriptedEngine(answers={"name": {"name": "Ann"}, "city": {"city": "Oslo"}, "long": {"name": "Annabel"}})
    deep = {"type": "object", "properties": {"a": {"type": "object", "properties": {"b": {"type": "object",
            "properties": {"c": {"type": "object", "properties": {"d": {"type": "object"}}}}}}}}}
    long = dict(NAME, title="long")
    schemas = [json.dumps(NAME), "city", json.dumps(NAME), "nope", "{not json", json.dumps(deep),
               json.dumps(long), None]
    extractor = BatchExtractor(engine, per_row_spec(), 1000)
    out = extractor(pa.table({"id": list(range(8)), "text": ["doc"] * 8, "schema": schemas}))
    reasons = out.column("_reason").to_pylist()
    assert reasons == [None, None, None, "schema_invalid", "schema_invalid", "schema_invalid",
                       "schema_violation", "schema_invalid"]
    records = [json.loads(r["record"]) if r else None for r in out.column("_typed").to_pylist()]  # per-row: JSON
    assert records[:3] == [{"name": "Ann"}, {"city": "Oslo"}, {"name": "Ann"}]
    assert "max_depth" in json.loads(out.column("_error")[5].as_py())["message"]
    # maxLength is enforced by the full post-check whatever the engine did: named keyword and path
    errors = json.loads(out.column("_error")[6].as_py())["errors"]
    assert errors[0]["keyword"] == "maxLength" and errors[0]["loc"] == ["name"]
    # each distinct schema compiled once, the same schema shares it; hashes identify rows' schemas
    assert sorted(s["title"] for s in engine.warmed) == ["city", "long", "name"]
    hashes = out.column("_schema_hash").to_pylist()
    assert hashes[0] == hashes[2] != hashes[1] and hashes[1] is not None
    assert "schema" not in out.column_names and "text" not in out.column_names


def test_unsupported_schemas_dead_letter_without_generation():
    from schemas.contract import schema_hash

    engine = ScriptedEngine(refuse_titles={"city"})
    spec = per_row_spec(unsupported={schema_hash(NAME): "schema name compiles on no backend"})
    out = BatchExtractor(engine, spec, 1000)(pa.table({"id": [1, 2], "text": ["a", "b"],
                                                       "schema": [json.dumps(NAME), "city"]}))
    assert out.column("_reason").to_pylist() == ["schema_unsupported", "schema_unsupported"]
    assert "no backend" in json.loads(out.column("_error")[0].as_py())["message"]
    assert "cannot compile" in json.loads(out.column("_error")[1].as_py())["message"]
    assert engine.calls == []


class DirectEngine(ScriptedEngine):
    """Compiles grammars without a request, as the real engine does while it decodes; refuses "refuse" titles."""

    def __init__(self, **kw) -> None:
        super().__init__(**kw)
        self.compiled: list[str] = []

    def compile(self, json_schema) -> float:
        self.compiled.append(json_schema.get("title"))
        return 0.02

    def generate(self, prompts, json_schemas, max_tokens, temperature):
        out = super().generate(prompts, json_schemas, max_tokens, temperature)
        return [Generation("", "refused", g.prompt_tokens, 0, "ValueError: multipleOf is not supported")
                if (s or {}).get("title") == "refuse" else g for g, s in zip(out, json_schemas, strict=True)]


def test_a_busy_engine_compiles_new_schemas_directly_and_a_refused_request_dead_letters_alone():
    engine = DirectEngine(answers={"name": {"name": "Ann"}, "city": {"city": "Oslo"}})
    extractor = BatchExtractor(engine, per_row_spec(), 1000)
    extractor.prepare()  # before any batch: the backend is warmed by a request, on an idle engine
    extractor.contract_for("city")
    assert [s.get("title") for s in engine.warmed] == [None, "city"] and engine.compiled == []
    refuse = {"title": "refuse", "type": "object", "properties": {"x": {"type": "number", "multipleOf": 0.5}}}
    out = extractor(pa.table({"id": [1, 2, 3], "text": ["a", "b", "c"],
                              "schema": [json.dumps(NAME), json.dumps(refuse), "city"]}))
    # once batches run, a new schema is compiled beside the engine, never queued in it behind documents
    assert engine.compiled == ["name", "refuse"] and len(engine.warmed) == 2
    assert out.column("_reason").to_pylist() == [None, "schema_unsupported", None]
    assert "multipleOf" in json.loads(out.column("_error")[1].as_py())["message"]
    assert out.column("_finish_reason").to_pylist()[1] == "refused"
    assert set(extractor.compile_seconds.values()) == {0.01, 0.02}


def test_unconstrained_generation_sends_no_grammar_and_reads_json_out_of_prose():
    import dataclasses

    engine = ScriptedEngine()
    engine.generate = lambda prompts, schemas, *a: (engine.schemas.append(schemas) or
                                                    [Generation("Sure! ```json\n" + json.dumps(GOOD) + "\n```",
                                                                "stop", 3, 9) for _ in prompts])
    out = BatchExtractor(engine, dataclasses.replace(spec(), constrained=False), 100)(batch(["a b", "c"]))
    assert out.column("_kind").to_pylist() == ["row", "row"]
    assert engine.schemas == [[None, None]] and engine.warmed == []
