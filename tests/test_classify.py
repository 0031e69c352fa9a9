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
