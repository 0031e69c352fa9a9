"""The classification order, on real contracts and `Generation` values as the engine returns them."""

import json

import pytest

from schemas.contract import SchemaContract
from workers.classify import check_input, classify
from workers.engine import Generation
from workers.prompt import render_prompt

DOC = "INVOICE NOR-2026-1234\nNorthwind Traders\nDate of issue: 2026-03-02\nTotal: $10.00"
GOOD = json.dumps({"invoice_number": "NOR-2026-1234", "vendor": {"name": "Northwind Traders"},
                   "issue_date": "2026-03-02", "currency": "USD", "total": 10.0})


@pytest.fixture(scope="module")
def contract():
    return SchemaContract.from_model_ref("schemas.invoice:Invoice")


def gen(text, finish="stop"):
    return Generation(text=text, finish_reason=finish, prompt_tokens=100, output_tokens=20)


def test_good_output_is_a_row(contract):
    outcome = classify(gen(GOOD), contract, {"document": DOC})
    assert outcome.is_row and outcome.reason is None
    assert outcome.record["total"] == 10.0


def test_length_finish_is_truncated_even_when_text_parses(contract):
    outcome = classify(gen(GOOD, finish="length"), contract, {"document": DOC})
    assert outcome.reason == "truncated" and not outcome.is_row


def test_unparseable_is_invalid_json(contract):
    assert classify(gen('{"invoice_number":'), contract, {"document": DOC}).reason == "invalid_json"


def test_failing_validator_is_semantic_invalid(contract):
    outcome = classify(gen(GOOD), contract, {"document": "a document without that number"})
    assert outcome.reason == "semantic_invalid"
    assert outcome.error["errors"][0]["loc"] == ["invoice_number"]


def test_crashing_validator_is_validator_error(contract):
    # A context whose document is not a string makes the user's validator raise TypeError, not ValueError.
    outcome = classify(gen(GOOD), contract, {"document": 12345})
    assert outcome.reason == "validator_error"
    assert "TypeError" in outcome.error["message"]


@pytest.mark.parametrize("text", [None, "", "   \n\t"])
def test_empty_documents(text):
    assert check_input(text, None, 64, 4096).reason == "empty_input"


def test_prompt_plus_budget_past_context_is_input_too_long():
    outcome = check_input("text", 4000, 128, 4096)
    assert outcome.reason == "input_too_long"
    assert outcome.error["prompt_tokens"] == 4000
    assert check_input("text", 3968, 128, 4096) is None


def test_prompt_placeholders_are_replaced_literally_once():
    template = "Schema: {schema}\nKeep {braces} and {{doubles}}.\n{document}"
    out = render_prompt(template, "doc says {schema}", '{"type":"object"}')
    assert out == 'Schema: {"type":"object"}\nKeep {braces} and {{doubles}}.\ndoc says {schema}'


def _contract_with(model=None, json_schema=None):
    """A contract built directly, bypassing `check_limits`: what a pattern or validator the guards missed meets."""
    return SchemaContract(name="t", version="1", json_schema=json_schema or model.model_json_schema(), _model=model)


@pytest.mark.parametrize("exc", [SystemExit(3), KeyboardInterrupt(), GeneratorExit()])
def test_base_exceptions_from_a_validator_are_validator_error(exc):
    """A validator that raises SystemExit or KeyboardInterrupt must not escape classify (it would kill the actor,
    and with actor restarts the same batch would kill the next one too)."""
    from pydantic import BaseModel, field_validator

    class Exits(BaseModel):
        a: str

        @field_validator("a")
        @classmethod
        def boom(cls, value):
            raise exc

    outcome = classify(gen('{"a": "x"}'), _contract_with(Exits), {"document": DOC})
    assert outcome.reason == "validator_error" and type(exc).__name__ in outcome.error["message"]


def test_engine_fatal_is_not_caught():
    from pydantic import BaseModel, field_validator

    from workers.engine import EngineFatal

    class Dies(BaseModel):
        a: str

        @field_validator("a")
        @classmethod
        def boom(cls, value):
            raise EngineFatal("the engine thread has stopped")

    with pytest.raises(EngineFatal):
        classify(gen('{"a": "x"}'), _contract_with(Dies), {"document": DOC})


def test_a_backtracking_pattern_past_its_budget_is_validator_timeout(monkeypatch):
    """A lookahead keeps this pattern off RE2; Python-style backtracking on it is exponential in the value."""
    import schemas.patterns

    monkeypatch.setattr(schemas.patterns, "PATTERN_BUDGET_S", 0.05)
    schema = {"type": "object", "properties": {"a": {"type": "string", "pattern": "^(a|aa)+(?=b)"}}}
    outcome = classify(gen(json.dumps({"a": "a" * 60 + "c"})), _contract_with(json_schema=schema), {"document": DOC})
    assert outcome.reason == "validator_timeout" and "budget" in outcome.error["message"]


@pytest.mark.parametrize("pattern", ["^(a|aa)+$", "^(.*a){12}$"])
def test_catastrophic_patterns_run_under_re2_and_stay_correct(pattern):
    schema = {"type": "object", "properties": {"b": {"type": "string", "pattern": pattern}},
              "patternProperties": {pattern: {"type": "integer"}}}
    contract = _contract_with(json_schema=schema)
    good, bad = "a" * 1000, "a" * 999 + "!"
    assert classify(gen(json.dumps({"b": good, good: 1})), contract, {"document": DOC}).is_row
    outcome = classify(gen(json.dumps({"b": bad})), contract, {"document": DOC})
    assert outcome.reason == "schema_violation" and outcome.error["errors"][0]["keyword"] == "pattern"
    outcome = classify(gen(json.dumps({good: "not an integer"})), contract, {"document": DOC})
    assert outcome.reason == "schema_violation" and outcome.error["errors"][0]["loc"] == [good]


def test_an_engine_error_is_the_grammar_before_the_first_token_and_the_engine_after(contract):
    """vLLM ends a request with finish_reason 'error' both when its grammar fails to compile (no token yet: the
    schema's fault, `schema_unsupported`) and when XGrammar rejects a sampled token mid-output (the grammar had
    compiled: `engine_error`, as without a grammar)."""
    before = Generation("", "error", 100, 0, "the engine ended this request with an error")
    after = Generation('{"invoice_number":"NOR', "error", 100, 7, "the engine ended this request with an error")
    refused = Generation("", "refused", 100, 0, "ValueError: multipleOf is not supported")
    assert classify(before, contract, {"document": DOC}).reason == "schema_unsupported"
    assert classify(refused, contract, {"document": DOC}).reason == "schema_unsupported"
    mid = classify(after, contract, {"document": DOC})
    assert mid.reason == "engine_error" and "after 7 tokens" in mid.error["message"]
    assert classify(before, contract, {"document": DOC}, constrained=False).reason == "engine_error"


def test_output_calibration_reads_the_documents_labels(contract):
    import math

    from workers.calibrator import FEATURES, Calibrator

    weights = {"bias": 0.0, **dict.fromkeys(FEATURES, 0.0), "label": 3.0, "other_label": -3.0}
    calibrator = Calibrator.from_json({"format": 2, "model": "logistic", "weights": weights, "prior": 0.0,
                                       "fields": {}})
    pieces = tuple(GOOD)  # a token a character, each at 0.9: every leaf has the same raw confidence
    generation = Generation(GOOD, "stop", 100, len(pieces), token_pieces=pieces,
                            token_logprobs=tuple(math.log(0.9) for _ in pieces))
    outcome = classify(generation, contract, {"document": DOC}, calibrator=calibrator)
    assert outcome.is_row
    # "Date of issue: 2026-03-02" labels issue_date with its own words; the vendor's name stands unlabelled
    assert outcome.confidence["issue_date"] > 0.9 > 0.5 == outcome.confidence["vendor.name"]
