"""The report's "Least sure values": the run's lowest-confidence leaves beside the document text they came from.

From the rows' `_confidence` and `_spans` (pipeline/output/tables.py): the `top` least confident leaves, at most
`per_document` of one document, each with a window of its document around the first place the document writes
the value, that place marked. Documents are read back from the partition's input files, only the few shown.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from workers.outcome import RowCol

WINDOW = 90  # characters of document shown on each side of the value


@dataclass
class Unsure:
    doc_id: str
    field: str
    confidence: float
    value: str
    places: list[tuple[int, int]] | None  # None: the row records no spans (rows from before `_spans`)
    before: str = ""  # the document around the value's first place (empty: not written there, or not read)
    marked: str = ""
    after: str = ""


def _leaf(record: Any, path: str) -> Any:
    """The value at a concrete leaf path (`items[2]`, `vendor.name`) of a row's columns."""
    import re

    node = record
    for key, index in re.findall(r"([^.\[\]]+)|\[(\d+)\]", path):
        try:
            node = node[int(index)] if index else node[key]
        except (KeyError, IndexError, TypeError):
            return None
    return node


def least_sure(rows: pa.Table | None, top: int = 10, per_document: int = 2) -> list[Unsure]:
    if rows is None or RowCol.CONFIDENCE not in rows.column_names or not rows.num_rows:
        return []
    id_column = rows.column_names[0]
    spans = rows.column(RowCol.SPANS).to_pylist() if RowCol.SPANS in rows.column_names else [None] * rows.num_rows
    candidates = []
    for i, (doc_id, leaves) in enumerate(zip(rows.column(id_column).to_pylist(),
                                            rows.column(RowCol.CONFIDENCE).to_pylist(), strict=True)):
        for path, confidence in leaves or ():
            candidates.append((confidence, str(doc_id), path, i))
    candidates.sort()
    shown: Counter[str] = Counter()
    out: list[Unsure] = []
    for confidence, doc_id, path, i in candidates:
        if len(out) == top:
            break
        if shown[doc_id] == per_document:
            continue
        shown[doc_id] += 1
        row = {name: rows.column(name)[i].as_py() for name in rows.column_names if not name.startswith("_")}
        if isinstance(row.get("record"), str):  # a per-row-schema job: the record as JSON text
            import json

            row = json.loads(row["record"])
        places = None if spans[i] is None else [(p["start"], p["end"]) for p in dict(spans[i]).get(path, [])]
        out.append(Unsure(doc_id, path, confidence, str(_leaf(row, path)), places))
    return out


def with_text(items: list[Unsure], texts: dict[str, str]) -> list[Unsure]:
    """Each item's window of its document, the value's first place marked."""
    for item in items:
        text = texts.get(item.doc_id)
        if text is None or not item.places:
            continue
        start, end = item.places[0]
        if not (0 <= start < end <= len(text)):
            continue
        lo, hi = max(0, start - WINDOW), min(len(text), end + WINDOW)
        item.before = ("…" if lo else "") + text[lo:start]
        item.marked = text[start:end]
        item.after = text[end:hi] + ("…" if hi < len(text) else "")
    return items


def read_texts(input_files: list[str], input_uri: str, id_column: str, text_column: str, ids: set[str],
               settings: Any = None) -> dict[str, str]:
    """The texts of `ids` from a partition's input files (the few documents the section shows)."""
    from pipeline.output.tables import read_columns
    from pipeline.storage import storage_for

    storage = storage_for(input_uri, settings)
    texts: dict[str, str] = {}
    for uri in input_files:
        if len(texts) == len(ids):
            break
        table = read_columns(storage, uri, [id_column, text_column])
        if id_column not in table.column_names or text_column not in table.column_names:
            continue
        keep = table.filter(pc.is_in(table.column(id_column).cast(pa.string()), value_set=pa.array(sorted(ids))))
        for doc_id, text in zip(keep.column(id_column).to_pylist(), keep.column(text_column).to_pylist(),
                                strict=True):
            if isinstance(text, str):
                texts[str(doc_id)] = text
    return texts
