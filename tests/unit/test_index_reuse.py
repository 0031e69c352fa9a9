"""A document's grounding index is made once for its grounding and its spans (`schemas.grounding.index.document_index`),
and the indexes kept are bounded."""

from __future__ import annotations

import json

from schemas.grounding import ground
from schemas.grounding import index as index_module
from schemas.grounding.index import RECENT, DocumentIndex, document_index
from schemas.spans import record_spans

SCHEMA = {"type": "object", "properties": {"total": {"type": ["number", "null"], "x-grounded": "number"},
                                           "code": {"type": ["string", "null"], "x-grounded": "word"}}}


def test_grounding_and_spans_of_a_document_share_one_index(monkeypatch):
    made = []
    original = DocumentIndex.__init__

    def counting(self, document, locale="auto"):
        made.append(document)
        original(self, document, locale)

    monkeypatch.setattr(DocumentIndex, "__init__", counting)
    document = "Invoice INV-7731 from Acme, total 1,250.00 EUR, due 2024-03-01."
    grounded = ground(SCHEMA, document)
    assert "1250" in json.dumps(grounded["properties"]["total"])  # grounded to the document's number
    spans = record_spans({"total": 1250.0, "code": "INV-7731"}, document)
    assert spans["total"] and spans["code"]
    assert made == [document]  # one index: one language detection, one scan of its numbers


def test_the_indexes_kept_are_the_recent_ones_and_no_more():
    first = document_index("document 0 total 5")
    assert document_index("document 0 total 5") is first
    for i in range(1, RECENT + 1):
        document_index(f"document {i} total 5")
    assert len(index_module._recent._indexes) <= RECENT
    assert document_index("document 0 total 5") is not first  # the oldest was let go
    assert document_index("document 0 total 5", "de_DE") is not document_index("document 0 total 5")
