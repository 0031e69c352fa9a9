"""Issue 54: a nullable field whose finder finds nothing keeps null and its plain type in the grammar (nothing is
forbidden); a value the model writes there and is unsure of (confidence under 0.5) is null after decoding, a value
it is sure of is kept (`schemas.grounding.unsure`)."""

import json
import math
import re

import jsonschema
import pytest

from schemas.contract import SchemaContract
from schemas.grounding import ground
from schemas.grounding.unsure import FREE_KEY, UNSURE_BELOW, free_fields, unsure_free
from workers.classify import classify
from workers.engine import Generation

DOC = "INVOICE NOR-2026-1234\nNorthwind Traders\nDate of issue: 2026-03-02\nTotal: $10.00"
TICKET = {"type": "object", "properties": {
    "order_number": {"anyOf": [{"type": "string"}, {"type": "null"}]},
    "amount": {"anyOf": [{"type": "number"}, {"type": "null"}]},
    "items": {"type": "array", "items": {"type": "object", "properties": {
        "sku": {"anyOf": [{"type": "string"}, {"type": "null"}]}}}},
    "total": {"type": "number"}}}


def test_a_nullable_field_left_free_is_marked_only_when_asked_and_the_marks_come_off_before_the_grammar() -> None:
    document = "The blanket arrived torn, and nobody answers."
    plain = ground(TICKET, document, mode="auto")
    assert FREE_KEY not in json.dumps(plain)  # reach, validate and tune see the grammar as it is compiled
    marked = ground(TICKET, document, mode="auto", mark_free=True)
    grammar, free = free_fields(marked)
    assert FREE_KEY not in json.dumps(grammar) and grammar == plain  # the engine gets the same grammar
    assert sorted(p.pattern for p in free) == ["amount", "items\\[\\d+\\]\\.sku", "order_number"]  # required: none
    # never forbids: a real value of each free field is still allowed, and so is null
    jsonschema.validate({"order_number": "ORD-2026-00042", "amount": 389.0, "items": [{"sku": "A1"}], "total": 1},
                        grammar)
    jsonschema.validate({"order_number": None, "amount": None, "items": [], "total": 1}, grammar)


def test_a_field_whose_finder_finds_a_value_is_not_marked() -> None:
    marked = ground(TICKET, "Order ORD-2026-00042, I paid $389.00.", mode="auto", mark_free=True)
    _, free = free_fields(marked)
    assert "order_number" not in [p.pattern for p in free] and "amount" not in [p.pattern for p in free]


def test_only_unsure_leaves_of_free_fields_are_null() -> None:
    free = (re.compile("order_number"), re.compile(r"items\[\d+\]\.sku"))
    text = json.dumps({"order_number": "1234567890", "amount": 5.0, "items": [{"sku": "A"}, {"sku": "B"}]})
    confidence = {"order_number": 0.01, "amount": 0.01, "items[0].sku": 0.9, "items[1].sku": 0.2}
    out, nulled = unsure_free(text, confidence, free)
    assert json.loads(out) == {"order_number": None, "amount": 5.0, "items": [{"sku": "A"}, {"sku": None}]}
    assert nulled == ["order_number", "items[1].sku"]  # amount was grounded (no pattern): kept however unsure
    assert unsure_free(text, {"order_number": UNSURE_BELOW}, free) == (text, [])  # at the threshold: kept
    assert unsure_free(text, None, free) == (text, []) and unsure_free(text, confidence, ()) == (text, [])
    assert unsure_free("{not json", confidence, free) == ("{not json", [])


@pytest.fixture(scope="module")
def contract():
    return SchemaContract.from_model_ref("schemas.invoice:Invoice")


def generation(record: dict, unsure_value: str, probability: float) -> Generation:
    """A token a character, each at 0.99, except the characters of `unsure_value` at `probability`."""
    text = json.dumps(record)
    start = text.index(json.dumps(unsure_value))
    pieces = tuple(text)
    logprobs = tuple(math.log(probability if start <= i < start + len(json.dumps(unsure_value)) else 0.99)
                     for i in range(len(pieces)))
    return Generation(text, "stop", 100, len(pieces), token_pieces=pieces, token_logprobs=logprobs)


def test_classify_nulls_an_unsure_free_value_and_keeps_a_sure_one(contract) -> None:
    """A due date the document does not write: the model unsure of it (a guess) gives a row without it; sure of it,
    the value stands and the contract's own validator judges it (the date is not in the document)."""
    record = {"invoice_number": "NOR-2026-1234", "vendor": {"name": "Northwind Traders"}, "issue_date": "2026-03-02",
              "due_date": "2030-01-01", "currency": "USD", "total": 10.0}
    free = (re.compile("due_date"),)
    unsure = classify(generation(record, "2030-01-01", 0.5), contract, {"document": DOC}, free=free)
    assert unsure.is_row and unsure.record["due_date"] is None and "due_date" not in unsure.confidence
    assert unsure.record["issue_date"] is not None and unsure.raw_output == json.dumps(record)  # output as decoded
    sure = classify(generation(record, "2030-01-01", 0.9999), contract, {"document": DOC}, free=free)
    assert not sure.is_row and sure.reason == "semantic_invalid"  # kept: the validator, not grounding, refuses it
    unmarked = classify(generation(record, "2030-01-01", 0.5), contract, {"document": DOC})
    assert unmarked.reason == "semantic_invalid"  # no free field named: nothing is nulled


FORM = ("--- Contact form submission ---\nSubmitted: 2026-04-24 17:29\nName: Jonas Becker\nOrder #: \n"
        "Purchase date: N/A\nMessage:\nMy account is locked.\n")
FORM_FIELDS = {"type": "object", "properties": {
    "order_number": {"anyOf": [{"type": "string"}, {"type": "null"}]},
    "order_date": {"anyOf": [{"type": "string", "format": "date"}, {"type": "null"}]},
    "customer_name": {"anyOf": [{"type": "string"}, {"type": "null"}]}}}


def test_a_field_whose_own_label_the_form_leaves_blank_is_left_free_not_forced_to_null() -> None:
    """`Purchase date: N/A`: the form's submission date is the only date, and the form says the purchase date is
    not given. Before issue 54 such a field was forced to null (forbidding every value); now it keeps null and
    its plain type, marked free, so a date the model is unsure of is null and one it is sure of stays."""
    props = ground(FORM_FIELDS, FORM, mode="auto", mark_free=True)["properties"]
    assert props["order_date"] == {**FORM_FIELDS["properties"]["order_date"], FREE_KEY: True}
    assert "Jonas Becker" in props["customer_name"]["anyOf"][0]["enum"]  # its label is filled: grounded
    filled = FORM.replace("Purchase date: N/A", "Purchase date: 12 April 2026")
    assert ground(FORM_FIELDS, filled, mode="auto")["properties"]["order_date"]["anyOf"][0]["enum"] == ["2026-04-12"]


def test_a_blank_label_two_fields_share_a_word_with_doubts_neither() -> None:
    """A blank `Order #:` names `order_number` and `order_date` alike (`orde`): it puts neither in doubt, so the
    purchase date stays grounded; alone, without an `order_number`, it doubts `order_date`."""
    form = FORM.replace("Purchase date: N/A", "Purchase date: 12 April 2026")
    props = ground(FORM_FIELDS, form, mode="auto", mark_free=True)["properties"]
    assert props["order_date"]["anyOf"][0]["enum"] == ["2026-04-12"]
    alone = {"type": "object", "properties": {"order_date": FORM_FIELDS["properties"]["order_date"]}}
    assert ground(alone, form, mode="auto", mark_free=True)["properties"]["order_date"][FREE_KEY] is True
    required = {"type": "object", "properties": {"order_date": {"type": "string", "format": "date"}}}
    assert ground(required, FORM, mode="auto")["properties"]["order_date"] == {"enum": ["2026-04-24"]}  # kept
