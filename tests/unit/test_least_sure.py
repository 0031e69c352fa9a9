"""The report's least sure values: the lowest-confidence leaves, their document text around the value."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq

from pipeline.tools.least_sure import least_sure, read_texts, with_text
from workers.confidence import CONFIDENCE_TYPE, SPANS_TYPE

DOC = "Invoice INV-7 from Acme Co. Total due: 1,450.61 EUR."


def _rows() -> pa.Table:
    return pa.table({
        "doc_id": ["a", "b"],
        "number": ["INV-7", "X"],
        "items": [["Acme Co."], []],
        "_confidence": pa.array([[("number", 0.9), ("items[0]", 0.2)], [("number", 0.05)]], CONFIDENCE_TYPE),
        "_spans": pa.array([[("number", [{"start": 8, "end": 13}]), ("items[0]", [{"start": 19, "end": 27}])],
                            [("number", [])]], SPANS_TYPE),
    })


def test_the_least_confident_leaves_come_first_with_their_values_and_places():
    items = least_sure(_rows(), top=2)
    assert [(u.doc_id, u.field, u.value, u.places) for u in items] == [
        ("b", "number", "X", []), ("a", "items[0]", "Acme Co.", [(19, 27)])]
    assert len(least_sure(_rows(), top=10, per_document=1)) == 2  # one of each document
    assert least_sure(None) == [] and least_sure(_rows().drop_columns(["_confidence"])) == []


def test_the_document_window_marks_the_value(tmp_path):
    pq.write_table(pa.table({"doc_id": ["a", "b"], "text": [DOC, "other"]}), tmp_path / "in.parquet")
    texts = read_texts([str(tmp_path / "in.parquet")], str(tmp_path), "doc_id", "text", {"a"})
    assert texts == {"a": DOC}
    (unwritten, acme) = with_text(least_sure(_rows(), top=2), texts)
    assert acme.marked == "Acme Co." and acme.before.endswith("from ") and acme.after.startswith(" Total")
    assert unwritten.marked == ""
