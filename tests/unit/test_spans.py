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


def _written(text: str) -> object:
    """What the document's text at a span says, read the way the value was: a number, a date, or text."""
    from datetime import datetime

    from schemas.grounding import DATE_SHAPES, NUMBER

    if NUMBER.fullmatch(text):
        return float(text.replace(",", ""))
    for shape, formats in DATE_SHAPES:
        if shape.fullmatch(text):
            for fmt in formats:
                try:
                    return datetime.strptime(text.replace(".,", ",").replace(". ", " "), fmt).date().isoformat()
                except ValueError:
                    continue
    return text


def test_every_span_of_the_sample_gold_rows_reads_back_as_its_value():
    """All 50 gold records of the sample, as rows: each place a leaf points at says that leaf's value, and every
    string, number and date of them is found (the gold is what the documents write)."""
    import json
    from pathlib import Path

    import pyarrow.parquet as pq

    from schemas.spans import leaves

    root = Path(__file__).resolve().parents[2] / "jobs" / "sample"
    texts = dict(zip(*pq.read_table(root / "invoices.parquet", columns=["doc_id", "text"]).to_pydict().values(),
                     strict=True))
    golds = [json.loads(line) for line in (root / "invoices_gold.jsonl").read_text().splitlines() if line.strip()]
    checked = missing = 0
    for gold in golds:
        doc = texts[gold.pop("doc_id")]
        spans = record_spans(gold, doc)
        for path, value in leaves(gold):
            if path not in spans:
                missing += 1
                continue
            for start, end in spans[path]:
                written = _written(doc[start:end])
                expected = float(value) if isinstance(value, int | float) else value
                assert written == expected or doc[start:end] == value, (gold, path, doc[start:end])
                checked += 1
    assert len(golds) == 50 and checked > 400
    assert missing == 0, f"{missing} gold leaves have no span"
