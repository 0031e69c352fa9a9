import json
import pickle

import pytest

from schemas import lookup
from schemas.contract import RecordRejected, SchemaContract, schema_hash
from schemas.invoice import Invoice

DOC = """Northwind Traders
INVOICE NOR-2026-1234
Date of issue: March 02, 2026
Total due (USD): $1,234.50"""


def invoice_json(**overrides):
    record = {"invoice_number": "NOR-2026-1234", "vendor": {"name": "Northwind Traders"},
              "issue_date": "2026-03-02", "currency": "USD", "total": 1234.5}
    record.update(overrides)
    return json.dumps(record)


@pytest.fixture(scope="module")
def contract():
    return SchemaContract.from_model_ref("schemas.invoice:Invoice")


def test_registry_names_and_versions_the_model(contract):
    assert (contract.name, contract.version) == ("invoice", "1")
    assert lookup("invoice", "1") is Invoice


def test_hash_is_stable_under_key_order():
    a = {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "integer"}}}
    b = {"properties": {"b": {"type": "integer"}, "a": {"type": "string"}}, "type": "object"}
    assert schema_hash(a) == schema_hash(b)
    assert schema_hash(a) != schema_hash({**a, "required": ["a"]})


def test_contract_pickles_without_the_model_class(contract):
    clone = pickle.loads(pickle.dumps(contract))
    assert clone._model is None
    assert clone.model is Invoice
    assert clone.hash == contract.hash


def test_valid_record_passes_with_document_context(contract):
    record = contract.check(invoice_json(), {"document": DOC})
    assert record["issue_date"] == "2026-03-02"
    assert record["vendor"] == {"name": "Northwind Traders", "address": None}


def test_unparseable_output_is_invalid_json(contract):
    with pytest.raises(RecordRejected) as rejected:
        contract.check('{"invoice_number": "NOR', {"document": DOC})
    assert rejected.value.reason == "invalid_json"


def test_a_raw_control_character_that_the_grammar_of_a_max_length_string_admits_is_read_not_refused():
    """XGrammar decodes a `maxLength` string as `[^"\\\r\n]{0,n}`, so its grammar admits a raw tab or U+0001, which
    strict JSON (and Pydantic's parser) refuse: the output is the model's value, not `invalid_json`."""
    import xgrammar
    from xgrammar.testing import _is_grammar_accept_string

    ticket = SchemaContract.from_model_ref("tests.fixtures.models:Ticket")  # product: str = Field(max_length=60)
    record = {"customer": {"name": "Ann", "email": None}, "product": "Kettle\tK-2\x01", "priority": "low",
              "summary": "broken"}
    output = json.dumps(record, ensure_ascii=False).replace("\\t", "\t").replace("\\u0001", "\x01")
    assert "\t" in output and "\x01" in output  # raw, as the engine may write them
    grammar = xgrammar.Grammar.from_json_schema(json.dumps(ticket.json_schema), any_whitespace=False)
    assert _is_grammar_accept_string(grammar, output)
    plain = xgrammar.Grammar.from_json_schema(json.dumps({"type": "string"}), any_whitespace=False)
    assert not _is_grammar_accept_string(plain, '"a\tb"')  # a string without maxLength must escape them
    assert ticket.check(output, {"document": "Ann: Kettle\tK-2 broken"})["product"] == "Kettle\tK-2\x01"
    with pytest.raises(RecordRejected) as rejected:  # a control character outside a string is still not JSON
        ticket.check("\x01" + output)
    assert rejected.value.reason == "invalid_json"


def test_validator_errors_carry_location_message_and_type(contract):
    with pytest.raises(RecordRejected) as rejected:
        contract.check(invoice_json(invoice_number="NOR-2026-9999", total=99.0), {"document": DOC})
    assert rejected.value.reason == "semantic_invalid"
    errors = {tuple(e["loc"]): e for e in rejected.value.errors}
    assert "does not appear in the document" in errors[("invoice_number",)]["msg"]
    assert errors[("invoice_number",)]["type"] == "value_error"
    assert ("total",) in errors


def test_grounding_is_by_whole_word(contract):
    # "1234" is inside NOR-2026-1234 but is not itself the invoice number.
    with pytest.raises(RecordRejected):
        contract.check(invoice_json(invoice_number="1234"), {"document": DOC})


def test_dates_out_of_order_are_rejected(contract):
    document = DOC + "\nDue: January 01, 2026"  # written in the document, so only the order is wrong
    with pytest.raises(RecordRejected, match="before issue_date"):
        contract.check(invoice_json(due_date="2026-01-01"), {"document": document})


def test_a_date_the_document_does_not_write_is_rejected(contract):
    with pytest.raises(RecordRejected, match="due_date 2026-01-01 is not a date the document writes"):
        contract.check(invoice_json(due_date="2026-01-01"), {"document": DOC})


def test_json_schema_file_contract_reports_schema_violations(tmp_path):
    path = tmp_path / "person.json"
    path.write_text(json.dumps({"title": "person", "type": "object", "required": ["age"],
                                "properties": {"age": {"type": "integer", "minimum": 0},
                                               "email": {"type": "string", "format": "email"}}}))
    contract = SchemaContract.from_file(path)
    assert contract.check('{"age": 3}') == {"age": 3}
    with pytest.raises(RecordRejected) as rejected:
        contract.check('{"age": -1, "email": "not-an-email"}')
    assert rejected.value.reason == "schema_violation"
    assert {tuple(e["loc"]) for e in rejected.value.errors} == {("age",), ("email",)}


def test_invalid_json_schema_file_is_refused(tmp_path):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({"type": "object", "properties": {"a": {"type": "no-such-type"}}}))
    with pytest.raises(ValueError, match="not a valid JSON Schema"):
        SchemaContract.from_file(path)
