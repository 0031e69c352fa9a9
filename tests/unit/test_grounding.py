"""Grounded fields: per document, the grammar's schema offers only values the document writes."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pyarrow.parquet as pq
import pytest
import yaml

from pipeline.config import ConfigError, load_config
from schemas.contract import SchemaContract
from schemas.examples import ExampleError, check_examples, load_examples_file
from schemas.grounding import bad_marks, cells, dates, ground, has_grounded, numbers, refusal, spans, words

ROOT = Path(__file__).resolve().parents[2]
DOC = ("Acme Office Supply\n77 Market St, San Francisco, CA 94105\n\nINVOICE ACM-2026-7186\n"
       "Date of issue: May 01, 2026\nPayment due: 15/06/2026\n\nDescription | Qty | Amount\n"
       "Design revisions | 6 | $420.60\nTotal due (USD): $1,872.60\n")


def invoice_schema() -> dict:
    return SchemaContract.from_model_ref("schemas.invoice:Invoice", ROOT).json_schema


def test_the_finders_read_numbers_dates_words_spans_and_cells_as_the_document_writes_them() -> None:
    assert numbers(DOC) == [77, 94105, 2026, 7186, 1, 15, 6, 420.6, 1872.6]
    assert dates(DOC) == ["2026-05-01", "2026-06-15"]  # 15/06/2026 can only be day first
    assert "ACM-2026-7186" in words(DOC) and "USD" in words(DOC) and "|" not in words(DOC)
    found = spans(DOC)
    assert "Acme Office Supply" in found and "San Francisco" in found and "Design revisions" in found
    assert "Supply 77" not in found  # a span never crosses a line
    assert "revisions 6" not in found  # nor a table cell
    assert cells(DOC)[:2] == ["Acme Office Supply", "77 Market St, San Francisco, CA 94105"]
    assert "Office Supply" not in cells(DOC) and "Design revisions" in cells(DOC)


def test_an_ambiguous_numeric_date_offers_both_readings() -> None:
    assert dates("Date: 03/04/2026") == ["2026-04-03", "2026-03-04"]


def test_a_grounded_field_becomes_an_enum_of_the_candidates_its_own_bounds_allow_and_keeps_null() -> None:
    schema = {"type": "object", "properties": {
        "figure": {"anyOf": [{"type": "number", "minimum": 100}, {"type": "null"}], "x-grounded": "number"},
        "code": {"type": "string", "maxLength": 8, "x-grounded": "word"},
        "note": {"type": "string"}}}
    grounded = ground(schema, DOC)
    assert grounded["properties"]["figure"] == {"anyOf": [{"enum": [94105, 2026, 7186, 420.6, 1872.6], "x-literals": [
        "94105", "2026", "7186", "420.6", "1872.6"]}, {"type": "null"}]}
    assert "ACM-2026-7186" not in grounded["properties"]["code"]["enum"]  # longer than maxLength 8
    assert "Acme" in grounded["properties"]["code"]["enum"]
    assert grounded["properties"]["note"] == {"type": "string"}  # unmarked: as written
    assert schema["properties"]["figure"]["x-grounded"] == "number"  # the schema itself is not changed


def test_no_candidate_keeps_the_fields_plain_type_never_only_null() -> None:
    """Issue 54: a finder that finds nothing never forbids the value (was: a nullable field became only null)."""
    nullable = {"anyOf": [{"type": "string", "format": "date"}, {"type": "null"}], "x-grounded": "date"}
    required = {"type": "string", "format": "date", "x-grounded": "date"}
    schema = {"type": "object", "properties": {"a": nullable, "b": required}}
    grounded = ground(schema, "no dates here")
    assert grounded["properties"]["a"] == {"anyOf": [{"type": "string", "format": "date"}, {"type": "null"}]}
    assert grounded["properties"]["b"] == {"type": "string", "format": "date"}


def test_a_field_left_free_is_bounded_so_a_small_model_cannot_run_away() -> None:
    """A field whose finder finds nothing keeps its type, bounded: a number within ±1e15, a short token (an id,
    a word) within 64 characters. Any real value passes; the runaway `order_number` "1234567890…" of the tickets
    job (5 of 40 truncated at max_tokens without the bounds) does not. A text field, a pattern or a format keeps
    its own bounds."""
    schema = {"type": "object", "properties": {
        "order_number": {"anyOf": [{"type": "string"}, {"type": "null"}]},
        "amount": {"anyOf": [{"type": "number"}, {"type": "null"}]},
        "count": {"type": "integer", "maximum": 10},
        "order_code": {"type": "string", "pattern": "^[A-Z]+$"},
        "note": {"anyOf": [{"type": "string"}, {"type": "null"}]}}}
    free = ground(schema, "The blanket arrived torn, and nobody answers.", mode="auto")["properties"]
    assert free["order_number"] == {"anyOf": [{"type": "string", "maxLength": 64}, {"type": "null"}]}
    assert free["amount"] == {"anyOf": [{"type": "number", "maximum": 1e15, "minimum": -1e15}, {"type": "null"}]}
    assert free["count"] == {"type": "integer", "maximum": 10, "minimum": -1e15}
    assert free["order_code"] == {"type": "string", "pattern": "^[A-Z]+$"}
    assert "maxLength" not in json.dumps(free["note"])  # a text field: the document's spans, unbounded here
    jsonschema.validate({"order_number": "ORD-2026-00042", "amount": 1234.56}, {**schema, "properties": free})
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"order_number": "1234567890" * 10}, {**schema, "properties": free})


def test_a_schema_without_marks_or_a_missing_document_is_used_as_it_is() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "string"}}}
    assert ground(schema, DOC) is schema and not has_grounded(schema)
    marked = invoice_schema()
    assert has_grounded(marked) and ground(marked, None) is marked


def test_every_gold_record_of_the_sample_is_allowed_by_its_documents_grounded_schema() -> None:
    """The finders never take the right answer away: each of the 50 gold records validates against the schema
    grounded in its own document (enums are what the grammar allows)."""
    texts = dict(zip(*pq.read_table(ROOT / "jobs/sample/invoices.parquet").to_pydict().values(), strict=True))
    schema = invoice_schema()
    golds = [json.loads(line) for line in (ROOT / "jobs/sample/invoices_gold.jsonl").read_text().splitlines()]
    assert len(golds) == 50
    for gold in golds:
        doc_id = gold.pop("doc_id")
        assert refusal(schema, texts[doc_id], gold) is None, doc_id
    wrong = {**golds[0], "total": 1337.78}
    assert "total 1337.78 is not a value the document writes" in refusal(schema, texts["inv-0000"], wrong)


def test_grounded_schemas_stay_valid_json_schema() -> None:
    texts = pq.read_table(ROOT / "jobs/sample/invoices.parquet").column("text").to_pylist()
    for text in texts[:5]:
        jsonschema.Draft202012Validator.check_schema(ground(invoice_schema(), text))


def test_an_example_the_grounding_refuses_fails_naming_it_and_grounding_off_lets_it_pass(tmp_path: Path) -> None:
    doc = "ACME Ltd\nINVOICE A-17\nDate of issue: March 02, 2026\nTotal due (USD): $1,250.00\n"
    output = {"total": 1250.0, "vendor": {"address": None, "name": "ACME Ltd"}, "invoice_number": "A-17",
              "issue_date": "2026-03-02", "currency": "USD", "items": ["Consulting"]}
    path = tmp_path / "ex.jsonl"
    path.write_text(json.dumps({"document": doc, "output": output}) + "\n")
    contract = SchemaContract.from_model_ref("schemas.invoice:Invoice", ROOT)
    with pytest.raises(ExampleError, match=r"example ex.jsonl:1: grounding refuses it: items.0 'Consulting'"):
        check_examples(load_examples_file(path), contract)
    assert len(check_examples(load_examples_file(path), contract, grounding="off")) == 1


def test_an_unknown_grounding_kind_fails_the_config_naming_where(tmp_path: Path) -> None:
    schema = {"type": "object", "properties": {"total": {"type": "number", "x-grounded": "numbr"}}}
    assert bad_marks(schema) == ["#/properties/total: x-grounded 'numbr' is not one of number, date, word, text, "
                                 "cell, or false"]
    (tmp_path / "schema.json").write_text(json.dumps(schema))
    (tmp_path / "extract.yaml").write_text(yaml.safe_dump({
        "name": "t", "input": {"uri": "docs.parquet"}, "schema_file": "schema.json", "prompt": "{document}",
        "output": {"uri": "out"}}))
    with pytest.raises(ConfigError, match=r"schema_file: #/properties/total: x-grounded 'numbr'"):
        load_config(tmp_path / "extract.yaml")


def test_grounding_off_is_a_new_output_and_on_keeps_the_hash_of_before() -> None:
    on = load_config(ROOT / "jobs/extract.yaml")
    off = load_config(ROOT / "jobs/extract.yaml", {"schema_policy.grounding": False})
    assert "grounding" not in on.decisive["policy"] and off.decisive["policy"]["grounding"] is False
    assert on.output_hash != off.output_hash


def test_ground_numbers_grounds_every_plain_number_field_and_leaves_enums_and_strings_alone() -> None:
    schema = {"type": "object", "properties": {
        "year": {"type": "integer"},
        "score": {"anyOf": [{"type": "number", "maximum": 10}, {"type": "null"}]},
        "stars": {"type": "integer", "enum": [1, 2, 3]},
        "rows": {"type": "array", "items": {"type": "number"}},
        "name": {"type": "string"}}}
    doc = "In 2023 it scored 8.7 and 9.1 out of 10."
    assert ground(schema, doc) is schema  # nothing marked, and ground_numbers off
    grounded = ground(schema, doc, all_numbers=True)["properties"]
    assert grounded["year"] == {"enum": [2023, 10]}  # 8.7 and 9.1 are not integers
    assert grounded["score"] == {"anyOf": [{"enum": [8.7, 9.1, 10], "x-literals": ["8.7", "9.1", "10"]},
                                           {"type": "null"}]}  # 2023 is above maximum
    assert grounded["stars"] == {"type": "integer", "enum": [1, 2, 3]}
    assert grounded["rows"]["items"] == {"enum": [2023, 8.7, 9.1, 10], "x-literals": ["2023", "8.7", "9.1", "10"]}
    assert grounded["name"] == {"type": "string"}


def test_a_marked_field_whose_bounds_are_a_ref_is_filtered_through_the_definition() -> None:
    schema = {"type": "object", "$defs": {"Currency": {"type": "string", "enum": ["USD", "EUR", "GBP"]}},
              "properties": {"currency": {"$ref": "#/$defs/Currency", "x-grounded": "word"}}}
    assert ground(schema, "Total due (EUR): 12.00, or USD 13")["properties"]["currency"] == {"enum": ["EUR", "USD"]}



@pytest.mark.parametrize("ref, where", [
    ("#/properties/home_currency", {}),
    ("#currency", {"$anchor": "currency"}),
    ("https://example.test/currency.json", {"$id": "https://example.test/currency.json"}),
    ("currency.json", {"$id": "currency.json"}),
])
def test_a_marked_field_whose_bounds_are_a_ref_outside_defs_is_filtered_through_its_target(ref: str, where: dict
                                                                                            ) -> None:
    """A grounded branch's references resolve in the whole schema (schemas.verdicts.branch_validator): before, the
    branch was validated with only `$defs` copied beside it, so a reference to another property (by pointer,
    `$anchor` or `$id`) did not resolve."""
    schema = {"$id": "https://example.test/root.json", "type": "object",
              "properties": {"home_currency": {**where, "type": "string", "enum": ["USD", "EUR", "GBP"]},
                             "currency": {"$ref": ref, "x-grounded": "word"}}}
    assert ground(schema, "Total due (EUR): 12.00, or USD 13")["properties"]["currency"] == {"enum": ["EUR", "USD"]}

PLAIN = {"type": "object", "$defs": {"Party": {"type": "object", "properties": {
    "name": {"anyOf": [{"type": "string"}, {"type": "null"}]}}}},
    "properties": {
        "title": {"type": "string", "maxLength": 40},
        "party": {"$ref": "#/$defs/Party"},
        "when": {"anyOf": [{"type": "string", "format": "date"}, {"type": "null"}]},
        "stamp": {"type": "string", "format": "date-time"},
        "email": {"type": "string", "format": "email"},
        "total": {"type": "number"},
        "lines": {"type": "array", "items": {"type": "string"}},
        "kind": {"type": "string", "enum": ["a", "b"]},
        "paid": {"type": "boolean"},
        "summary": {"type": "string", "x-grounded": False},
        "not_a_value": {"not": {"type": "string"}},
        "contains": {"type": "string"}}}


def test_auto_infers_a_kind_for_every_plain_field_and_leaves_enums_booleans_formats_and_free_marks() -> None:
    from schemas.grounding import field_kinds

    kinds = {"/".join(map(str, p)): k for p, k in field_kinds(PLAIN, "auto").items()}
    assert kinds == {"properties/title": "text", "$defs/Party/properties/name": "text", "properties/when": "date",
                     "properties/email": "word", "properties/total": "money", "properties/lines/items": "item",
                     "properties/summary": None, "properties/contains": "text"}
    assert {p: k for p, k in field_kinds(PLAIN, "marked").items() if k} == {}
    assert {p: k for p, k in field_kinds(PLAIN, "off").items() if k} == {}


def test_auto_grounds_a_plain_schema_per_document_and_keeps_what_it_must() -> None:
    doc = "Quarterly report | Acme Ltd\nSent 2026-03-02 by ops@acme.example\nTotal: 1,250.50\nBolts\nNuts\n"
    grounded = ground(PLAIN, doc, mode="auto")
    props = grounded["properties"]
    assert "Quarterly report" in props["title"]["enum"] and "Acme Ltd" in props["title"]["enum"]
    assert all(len(v) <= 40 for v in props["title"]["enum"])  # the field's own maxLength filters candidates
    assert props["when"] == {"anyOf": [{"enum": ["2026-03-02"]}, {"type": "null"}]}
    assert props["email"] == {"enum": ["ops@acme.example"]}  # only words shaped as an email
    assert 1250.5 in props["total"]["enum"]
    assert "Bolts" in props["lines"]["items"]["enum"]
    assert props["kind"] == PLAIN["properties"]["kind"] and props["paid"] == {"type": "boolean"}
    assert props["stamp"] == PLAIN["properties"]["stamp"]  # date-time stays free
    assert props["summary"] == PLAIN["properties"]["summary"]  # x-grounded: false stays free
    assert props["not_a_value"] == PLAIN["properties"]["not_a_value"]  # never inside `not`
    assert "Acme Ltd" in grounded["$defs"]["Party"]["properties"]["name"]["anyOf"][0]["enum"]
    assert ground(PLAIN, doc, mode="off") is PLAIN and ground(PLAIN, doc, mode="marked") is PLAIN


def test_auto_with_no_candidate_leaves_a_field_free() -> None:
    grounded = ground(PLAIN, "nothing numeric or dated here", mode="auto")["properties"]
    assert grounded["when"] == PLAIN["properties"]["when"]  # nullable: as written (issue 54; was: only null)
    # required: its type, never a dead letter; bounded as every free field (no value a document writes is refused)
    assert grounded["total"] == {"type": "number", "maximum": 1e15, "minimum": -1e15}


def test_grounding_modes_keep_the_old_hashes_and_auto_is_marked_where_it_adds_nothing() -> None:
    marked = load_config(ROOT / "jobs/extract.yaml", {"schema_policy.grounding": "marked"})
    assert load_config(ROOT / "jobs/extract.yaml").output_hash == marked.output_hash  # auto adds no field here
    assert load_config(ROOT / "jobs/extract.yaml", {"schema_policy.grounding": True}).output_hash == marked.output_hash
    off = load_config(ROOT / "jobs/extract.yaml", {"schema_policy.grounding": "off"})
    assert off.output_hash == load_config(ROOT / "jobs/extract.yaml", {"schema_policy.grounding": False}).output_hash
    plain = {"schema": "sample.unmarked_invoice:UnmarkedInvoice"}
    auto = load_config(ROOT / "jobs/extract.yaml", plain)
    assert auto.grounding_in_effect == "auto" and auto.decisive["policy"]["grounding"] == "auto"
    assert auto.output_hash != load_config(ROOT / "jobs/extract.yaml", {**plain, "schema_policy.grounding": "marked"}
                                           ).output_hash
    with pytest.raises(ConfigError, match="schema_policy.grounding"):
        load_config(ROOT / "jobs/extract.yaml", {"schema_policy.grounding": "sometimes"})


def test_validate_lines_say_how_each_field_is_decoded_and_warn_about_what_measured_worse() -> None:
    from schemas.levers import field_decodings, summary, warnings

    decodings = field_decodings(PLAIN, "auto", string_bound=None)
    lines = [d.line() for d in decodings]
    assert "title: grounded (text)" in lines and "party.name: grounded (text)" in lines
    assert "lines[]: grounded (item)" in lines and "kind: enum (2 values)" in lines
    assert "summary: free (string, x-grounded: false, no bound)" in lines
    assert "stamp: free (string, bounded by its format)" in lines
    assert summary(decodings) == "7 grounded (date 1, item 1, money 1, text 3, word 1), 1 enum, 4 free"
    found = warnings(decodings, examples=0)
    assert found[0].startswith("no few-shot examples") and "free string with no bound: summary" in found[1]
    off = warnings(field_decodings(PLAIN, "off"), examples=3)
    assert any(w.startswith("number not grounded: total") for w in off)


def test_auto_narrows_an_enum_of_codes_to_those_the_document_writes_and_leaves_categories_alone() -> None:
    schema = {"type": "object", "properties": {
        "currency": {"anyOf": [{"type": "string", "enum": ["USD", "EUR", "GBP"]}, {"type": "null"}]},
        "topic": {"type": "string", "enum": ["billing", "shipping"]}}}
    doc = "Refund for shipping: 12.00 EUR (was billed in USD by mistake)."
    props = ground(schema, doc, mode="auto")["properties"]
    assert props["currency"] == {"anyOf": [{"enum": ["EUR", "USD"]}, {"type": "null"}]}
    assert props["topic"] == schema["properties"]["topic"]  # a category is the model's judgement
    # issue 54: a currency's name or symbol is evidence of its code (was: the whole enum, no code being written)
    named = ground(schema, "Refund for shipping, twelve euros.", mode="auto")["properties"]
    assert named["currency"] == {"anyOf": [{"enum": ["EUR"]}, {"type": "null"}]}
    none_written = ground(schema, "Refund for shipping, twelve of them.", mode="auto")["properties"]
    assert none_written["currency"] == schema["properties"]["currency"]  # no code written: the whole enum


def test_a_text_span_never_runs_from_one_sentence_into_the_next() -> None:
    found = spans("We are hiring a Data Engineer at Acme in Berlin. Pay is good. Ask Mr. Smith of St. Louis.")
    assert "Data Engineer at Acme in Berlin" in found and "Pay is good" in found
    assert not any("Berlin. Pay" in s for s in found)
    assert "Mr. Smith of St. Louis" in found  # abbreviations do not end a sentence


def test_a_lists_strings_are_whole_cells_in_a_table_and_spans_in_prose() -> None:
    from schemas.grounding import items

    assert items(DOC) == cells(DOC)  # an invoice: every cell short
    prose = ("The studio released Echoes of the Horizon in 2023, a sequel that blends science fiction with a "
             "family drama and a courtroom story, and critics praised its score and its lead actors a great deal.")
    assert items(prose) == spans(prose) and "science fiction" in items(prose)


def test_an_enum_of_decimals_is_spliced_as_written_in_every_mode() -> None:
    """XGrammar writes 0.1 as 0.10000000000000001 (ten tokens more); the grammar gets the values as JSON writes
    them. Only enums of numbers with a decimal: an enum of integers, of strings or under `not` stays."""
    schema = {"type": "object", "properties": {
        "rarity": {"type": "number", "enum": [0.1, 0.5, 1.0, 10.0]},
        "maybe": {"anyOf": [{"enum": [2.5, None]}, {"type": "null"}]},
        "stars": {"type": "integer", "enum": [1, 2, 3]},
        "mixed": {"enum": ["a", 0.5]},
        "never": {"not": {"enum": [0.5, 1.5]}}}}
    for mode in ("auto", "marked", "off"):
        grounded = ground(schema, "no numbers here", mode=mode)["properties"]
        assert grounded["rarity"] == {"type": "number", "enum": [0.1, 0.5, 1.0, 10.0],
                                      "x-literals": ["0.1", "0.5", "1.0", "10.0"]}
        assert grounded["maybe"]["anyOf"][0] == {"enum": [2.5, None], "x-literals": ["2.5", "null"]}
        assert grounded["stars"] == schema["properties"]["stars"]
        assert grounded["mixed"] == schema["properties"]["mixed"]
        assert grounded["never"] == schema["properties"]["never"]
    assert "x-literals" not in schema["properties"]["rarity"]  # the user's schema is not changed
    plain = {"type": "object", "properties": {"stars": {"enum": [1, 2]}}}
    assert ground(plain, "text", mode="off") is plain  # nothing to splice: the schema itself
    # a value the enum allows is not a grounding refusal (the literals only shape the grammar)
    assert refusal(schema, "no numbers here", {"rarity": 0.1}, mode="off") is None


def test_an_enum_of_decimals_reaches_the_grammar_as_its_literals() -> None:
    pytest.importorskip("xgrammar")
    from schemas.substring import to_ebnf

    schema = {"type": "object", "properties": {"rarity": {"type": "number", "enum": [0.1, 5.0]}},
              "required": ["rarity"]}
    ebnf = to_ebnf(ground(schema, "doc", mode="off"))
    assert '("0.1") | ("5.0")' in ebnf and "0.10000000000000001" not in ebnf


def test_the_named_finders_read_emails_phones_and_web_addresses_without_the_punctuation_around_them() -> None:
    from schemas.grounding import emails, phones, urls

    doc = ("From: Dana Whitfield <dana.whitfield@gmail.example>\nTo: support@brightlane.com\n"
           "Date: Sun, 22 Feb 2026 19:48:04 +0000\nCall +44 (0)20 7946 0958 or 555-123-4567, or (555) 987.6543.\n"
           "Order 64225 of 2026-04-12, paid 129.00 EUR on 03/10/2026. See https://brightlane.com/help?x=1, "
           "www.example.org. or brightlane.com/returns. Write to carlos.mendes@fastmail.net.")
    assert emails(doc) == ["dana.whitfield@gmail.example", "support@brightlane.com", "carlos.mendes@fastmail.net"]
    assert phones(doc) == ["+44 (0)20 7946 0958", "555-123-4567", "(555) 987.6543"]  # no date, order or amount
    assert urls(doc) == ["https://brightlane.com/help?x=1", "www.example.org", "brightlane.com/returns"]


@pytest.mark.parametrize(("name", "kind"), [
    ("customer_email", "email"), ("EmailAddress", "email"), ("e_mail", "email"), ("Emails", "email"),
    ("PhoneNumber", "phone"), ("phone_no", "phone"), ("fax", "phone"), ("ContactPhone", "phone"),
    ("websiteURL", "url"), ("Website", "url"), ("homepage", "url"),
    ("order_number", "id"), ("StudentID", "id"), ("TrackingNumber", "id"), ("sku", "id"),
    ("email_subject", None), ("address", None), ("HomeAddress", None), ("name", None), ("number", None),
    ("country_code", None), ("code", None)])
def test_a_plain_string_fields_name_says_when_it_holds_an_email_phone_web_address_or_id(name, kind) -> None:
    from schemas.grounding import named_kind

    assert named_kind(("properties", name)) == kind


def test_auto_grounds_a_named_field_in_values_of_its_shape_and_a_format_or_a_mark_wins() -> None:
    from schemas.grounding import field_kinds

    schema = {"type": "object", "properties": {
        "customer_email": {"anyOf": [{"type": "string"}, {"type": "null"}]},
        "PhoneNumbers": {"type": "array", "items": {"type": "string"}},
        "website": {"type": "string"},
        "email_subject": {"type": "string"},
        "contact_email": {"type": "string", "format": "email"},  # its format decides: a word shaped as an email
        "backup_email": {"type": "string", "x-grounded": "text"}}}  # a mark decides
    kinds = {"/".join(map(str, p)): k for p, k in field_kinds(schema, "auto").items()}
    assert kinds == {"properties/customer_email": "email", "properties/PhoneNumbers/items": "phone",
                     "properties/website": "url", "properties/email_subject": "text",
                     "properties/contact_email": "word", "properties/backup_email": "text"}
    assert {p: k for p, k in field_kinds(schema, "marked").items() if k} == {("properties", "backup_email"): "text"}
    doc = "Hi, this is just Olu. My door code is 4411. Reach me at olu@example.com or 020 7946 0958, see olu.dev."
    props = ground(schema, doc, mode="auto")["properties"]
    assert props["customer_email"] == {"anyOf": [{"enum": ["olu@example.com"]}, {"type": "null"}]}
    assert props["PhoneNumbers"]["items"] == {"enum": ["020 7946 0958"]}
    assert props["website"] == {"enum": ["olu.dev"]}
    assert "just" in props["email_subject"]["enum"]
    # A document that writes no email: the field is decoded as written, nullable or not (issue 54; was: only null).
    nothing = ground(schema, "No address here.", mode="auto")["properties"]
    assert nothing["customer_email"] == schema["properties"]["customer_email"]
    assert nothing["website"] == {"type": "string"}


def test_every_gold_record_of_the_tickets_is_allowed_by_its_documents_auto_grounded_schema() -> None:
    """The tickets job (a plain schema, `auto`): the named finders never take a right answer away."""
    schema = SchemaContract.from_model_ref("ticket:SupportTicket", ROOT / "jobs" / "tickets").json_schema
    table = pq.read_table(ROOT / "jobs/tickets/tickets.parquet").to_pydict()
    texts = dict(zip(table["ticket_id"], table["text"], strict=True))
    golds = [json.loads(line) for line in (ROOT / "jobs/tickets/tickets_gold.jsonl").read_text().splitlines()]
    assert len(golds) == 40 and all(g["ticket_id"] in texts for g in golds)
    for gold in golds:
        grounded = ground(schema, texts[gold["ticket_id"]], mode="auto")
        assert "enum" in json.dumps(grounded["properties"]["customer_email"])
        errors = [e.message for e in jsonschema.Draft202012Validator(grounded).iter_errors(gold["record"])]
        assert errors == [], (gold["ticket_id"], errors)


def test_a_number_sign_before_a_code_is_not_part_of_it() -> None:
    doc = "This is about order #W365213573. Ticket #60589 is closed. C# and # alone stay."
    assert {"W365213573", "#W365213573", "60589"} <= set(words(doc)) and "C#" in words(doc)
    assert {"W365213573", "order #W365213573"} <= set(spans(doc)) and "C#" in spans(doc)


def test_the_money_finder_reads_amounts_written_as_money_and_nothing_else() -> None:
    from schemas.grounding import money

    assert money("I paid USD 159.99 plus USD 4.99 for shipping on 9 Mar 2026, order 64225.") == [159.99, 4.99]
    assert money("Total due (USD): $1,872.60") == [1872.6] and money("129.00 EUR, then £59.") == [129.0, 59]
    assert money("Amount paid: 389") == [389] and money("priced at a delightful 150.0 yuan") == [150.0]
    assert money("On 15.06.2026, 6 units at 420.60") == [420.6]  # a date's parts and a count are not money
    assert money("Order ORD-2026-18198 of 3 items, 12 days ago") == []


@pytest.mark.parametrize(("name", "is_money"), [
    ("amount", True), ("unit_price", True), ("TotalCost", True), ("salary", True), ("Total", True),
    ("price_count", False), ("tax_rate", False), ("total_items", False), ("quantity", False)])
def test_a_number_fields_name_says_when_it_holds_money(name, is_money) -> None:
    from schemas.grounding import named_money

    assert named_money(("properties", name)) is is_money


def test_auto_grounds_a_money_field_in_the_amounts_and_falls_back_where_the_document_writes_none() -> None:
    schema = {"type": "object", "properties": {
        "amount": {"anyOf": [{"type": "number"}, {"type": "null"}]},
        "price": {"type": "number"},
        "quantity": {"type": "integer"},
        "total": {"type": "number", "x-grounded": "number"}}}  # a mark decides
    doc = "Order 64225: 2 lamps. I paid USD 34.50 plus USD 9.95 for shipping."
    props = ground(schema, doc, mode="auto")["properties"]
    assert props["amount"]["anyOf"][0]["enum"] == [34.5, 9.95] and props["price"]["enum"] == [34.5, 9.95]
    assert props["quantity"]["enum"] == [64225, 2] and 64225 in props["total"]["enum"]
    props = ground(schema, "Order 64225: 2 lamps, never delivered.", mode="auto")["properties"]
    # nullable: no amount leaves the plain type (issue 54; was: only null)
    assert props["amount"] == {"anyOf": [{"type": "number", "maximum": 1e15, "minimum": -1e15}, {"type": "null"}]}
    assert props["price"]["enum"] == [64225, 2]  # required: any number the document writes, as before


def test_the_identifier_finder_reads_words_with_digits_that_are_not_dates_times_amounts_or_years() -> None:
    from schemas.grounding import identifiers

    doc = ("Order #W365213573 of 03/10/2026 at 17:47, a 16-inch bike, paid $1,250.00 and 34.50 in 2026; "
           "ticket 64225, course CS305, a 2nd try #60589, the 1990s.")
    assert identifiers(doc) == ["W365213573", "64225", "CS305", "60589"]  # a 16-inch bike: a quantity
    assert identifiers("a 65W charger, a 1.7L kettle, a 10-Piece set, 4K video, 500ml, S3, BL8449-1") == \
        ["S3", "BL8449-1"]


def test_auto_grounds_an_id_field_in_the_identifiers_and_falls_back_where_the_document_writes_none() -> None:
    schema = {"type": "object", "properties": {"order_number": {"anyOf": [{"type": "string"}, {"type": "null"}]},
                                               "ticket_id": {"type": "string"}}}
    props = ground(schema, "This is about order #BL1457-8, placed 2026-03-01.", mode="auto")["properties"]
    assert props["order_number"]["anyOf"][0]["enum"] == ["BL1457-8"] and props["ticket_id"]["enum"] == ["BL1457-8"]
    props = ground(schema, "My lamp, bought on 1 March 2026, never came.", mode="auto")["properties"]
    # issue 54 (was: only null); within 64 characters, as every free short token
    assert props["order_number"] == {"anyOf": [{"type": "string", "maxLength": 64}, {"type": "null"}]}
    assert "My lamp" in props["ticket_id"]["enum"]  # required: any span, as before
