"""`_spans`: where the document writes each value of a row (schemas.spans)."""

from __future__ import annotations

from schemas.spans import MAX_PLACES, record_spans

DOC = "Invoice INV-7 from Acme Co.\nIssued: January 30, 2026\nTotal: €1,450.61 (INV-7)\nPaid 2026-02-01."


def test_strings_numbers_and_dates_point_at_the_text_that_writes_them():
    record = {"number": "INV-7", "total": 1450.61, "issued": "2026-01-30", "paid": "2026-02-01",
              "party": {"name": "Acme Co."}, "flag": True, "none": None}
    spans = record_spans(record, DOC)
    assert [DOC[s:e] for s, e in spans["number"]] == ["INV-7", "INV-7"]
    assert [DOC[s:e] for s, e in spans["total"]] == ["1,450.61"]
    assert [DOC[s:e] for s, e in spans["issued"]] == ["January 30, 2026"]
    assert [DOC[s:e] for s, e in spans["paid"]] == ["2026-02-01"]
    assert [DOC[s:e] for s, e in spans["party.name"]] == ["Acme Co."]
    assert "flag" not in spans and "none" not in spans


def test_a_value_the_document_does_not_write_has_no_entry_and_lists_are_indexed():
    spans = record_spans({"summary": "a late invoice", "items": ["Acme", "Zed"], "amount": "1450.61"}, DOC)
    assert "summary" not in spans and "items[1]" not in spans
    assert DOC[slice(*spans["items[0]"][0])] == "Acme"
    assert DOC[slice(*spans["amount"][0])] == "1,450.61"  # a Decimal, held as text


def test_places_are_capped_and_a_missing_document_gives_none():
    assert len(record_spans({"a": "x"}, "x " * 50)["a"]) == MAX_PLACES
    assert record_spans({"a": "x"}, None) is None
