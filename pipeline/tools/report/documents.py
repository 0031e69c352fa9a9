"""A page per document (OUT/<run_id>/docs/<page>.html): the whole document with each extracted value highlighted
at its span and coloured by its confidence; where `extract eval` scored it, each field's predicted value against
the gold (right, wrong, missed, invented) with the gold value's own place in the document; for a dead letter, its
reason, error and raw output.

Where a value sits: the row's `_spans` (every place the document writes it), else a search of the text
(`schemas.spans.record_spans`). Gold comes from the run's eval.json (its `mistakes` and `per_document`), so the
gold file itself is not needed. Pages are written for the documents the run page links (sample rows, dead letters,
least sure values, wrong values) and the gold documents, at most `MAX_PAGES`."""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa

from pipeline.storage import StorageError
from pipeline.tools.least_sure import read_texts
from pipeline.tools.report.errors import error_messages
from pipeline.tools.report.outcomes import ROW
from schemas.spans import leaves, record_spans
from workers.outcome import RowCol

MAX_PAGES = 500
DOCS_DIR = "docs"
VERDICTS = {"correct": "right", "wrong": "wrong", "missed": "missed", "spurious": "invented"}


def confidence_class(confidence: float | None) -> str:
    """The colour band of a value: high (≥ 0.9), mid (≥ 0.5), low, or none (no confidence recorded)."""
    if confidence is None:
        return "c-none"
    return "c-high" if confidence >= 0.9 else "c-mid" if confidence >= 0.5 else "c-low"


@dataclass
class Segment:
    text: str
    path: str | None = None  # the leaf written here (None: plain text)
    confidence: float | None = None
    css: str = ""
    gold: bool = False  # the gold value's place (a value the row missed or got wrong)


@dataclass
class FieldLine:
    path: str
    predicted: Any
    confidence: float | None = None
    span: tuple[int, int] | None = None
    verdict: str | None = None  # right | wrong | missed | invented (None: no gold)
    gold: Any = None
    gold_span: tuple[int, int] | None = None
    window: int | None = None  # the window (0-based) the value came from, for a document read in windows


@dataclass
class DocumentPage:
    doc_id: str
    href: str  # relative to the run's folder
    status: str  # row or the dead letter's reason
    text: str | None = None
    segments: list[Segment] = field(default_factory=list)
    fields: list[FieldLine] = field(default_factory=list)
    error: str | None = None
    raw_output: str | None = None
    has_gold: bool = False
    windows: int = 1  # how many windows the document was read in (`_windows`; workers.windows)


def page_name(doc_id: str) -> str:
    """A file name for any document id: its plain characters and a short hash (ids may hold `/`, `..`, spaces)."""
    plain = re.sub(r"[^A-Za-z0-9_.-]", "_", doc_id)[:60].strip(".") or "doc"
    return f"{plain}-{hashlib.sha1(doc_id.encode('utf-8', 'surrogatepass')).hexdigest()[:8]}.html"


def _record(row: dict[str, Any]) -> dict[str, Any]:
    fields = {k: v for k, v in list(row.items())[1:] if not k.startswith("_")}
    if isinstance(fields.get("record"), str) and len(fields) == 1:  # a per-row-schema job: JSON text
        try:
            return json.loads(fields["record"])
        except json.JSONDecodeError:
            return fields
    return fields


def _spans(row: dict[str, Any], record: dict[str, Any], text: str | None) -> dict[str, list[tuple[int, int]]]:
    given = row.get(RowCol.SPANS)
    if given:
        return {path: [(int(p["start"]), int(p["end"])) for p in places] for path, places in dict(given).items()}
    return record_spans(record, text) or {}


def _leaf_lines(record: dict[str, Any], spans: dict[str, list], confidence: dict[str, float]) -> list[FieldLine]:
    lines = []
    for key, value in record.items():
        found = leaves(value, key, booleans=True) if value is not None else []
        for path, leaf in found or [(key, None)]:
            places = spans.get(path) or []
            lines.append(FieldLine(path, leaf, confidence.get(path), places[0] if places else None))
    return lines


def _with_gold(lines: list[FieldLine], mistakes: list[dict[str, Any]]) -> list[FieldLine]:
    """Each line's verdict against the gold: the listed mistakes, and right for the rest of the non-null values."""
    by_at = {m["at"]: m for m in mistakes if m.get("at")}
    for line in lines:
        m = by_at.get(line.path)
        if m is not None:
            line.verdict, line.gold = VERDICTS[m["kind"]], m["gold"]
            line.gold_span = tuple(m["gold_span"]) if m.get("gold_span") else None
        elif line.predicted is not None:
            line.verdict, line.gold, line.gold_span = "right", line.predicted, line.span
    for m in mistakes:
        if m["kind"] == "missed":
            lines.append(FieldLine(m["field"], None, verdict="missed", gold=m["gold"],
                                   gold_span=tuple(m["gold_span"]) if m.get("gold_span") else None))
    return lines


def segments(text: str, marks: list[tuple[int, int, Segment]]) -> list[Segment]:
    """The text cut at the marks (start, end, template segment); a mark overlapping an earlier one is left out."""
    out: list[Segment] = []
    pos = 0
    for start, end, mark in sorted(marks, key=lambda m: (m[0], -m[1])):
        if start < pos or not 0 <= start < end <= len(text):
            continue
        if start > pos:
            out.append(Segment(text[pos:start]))
        out.append(Segment(text[start:end], mark.path, mark.confidence, mark.css, mark.gold))
        pos = end
    if pos < len(text):
        out.append(Segment(text[pos:]))
    return out


def _marks(lines: list[FieldLine], spans: dict[str, list[tuple[int, int]]]) -> list[tuple[int, int, Segment]]:
    marks = []
    for line in lines:
        if line.predicted is not None:
            for start, end in spans.get(line.path, []):
                marks.append((start, end, Segment("", line.path, line.confidence, confidence_class(line.confidence))))
        if line.verdict in ("missed", "wrong") and line.gold_span:
            marks.append((*line.gold_span, Segment("", f"{line.path} (gold)", None, "gold", True)))
    return marks


def row_page(row: dict[str, Any], text: str | None, mistakes: list[dict[str, Any]] | None) -> DocumentPage:
    doc_id = str(next(iter(row.values())))
    record = _record(row)
    spans = _spans(row, record, text)
    lines = _leaf_lines(record, spans, dict(row.get(RowCol.CONFIDENCE) or {}))
    window_of = dict(row.get(RowCol.WINDOW_OF) or {})
    for line in lines:
        line.window = window_of.get(line.path)
    if mistakes is not None:
        lines = _with_gold(lines, mistakes)
    page = DocumentPage(doc_id, f"{DOCS_DIR}/{page_name(doc_id)}", ROW, text, fields=lines,
                        has_gold=mistakes is not None, windows=int(row.get(RowCol.WINDOWS) or 1))
    if text is not None:
        page.segments = segments(text, _marks(lines, spans))
    return page


def dead_page(outcome: Any, text: str | None) -> DocumentPage:
    message = error_messages(outcome.error)[0][1] if outcome.error else None
    return DocumentPage(outcome.doc_id, f"{DOCS_DIR}/{page_name(outcome.doc_id)}", outcome.outcome, text,
                        [Segment(text)] if text else [], error=message or "(no error recorded)",
                        raw_output=outcome.raw_output)


def wanted_ids(linked: list[str], scores: dict[str, Any] | None, limit: int = MAX_PAGES) -> list[str]:
    """The documents that get a page: those the run page links, then the gold documents; at most `limit`."""
    gold = [str(d["doc_id"]) for d in (scores or {}).get("per_document") or []]
    return list(dict.fromkeys([*linked, *gold]))[:limit]


def mistakes_by_document(scores: dict[str, Any] | None) -> dict[str, list[dict[str, Any]]]:
    """eval.json's mistakes by document id, with an empty list for each scored document that has none."""
    out: dict[str, list[dict[str, Any]]] = {str(d["doc_id"]): [] for d in (scores or {}).get("per_document") or []}
    for items in ((scores or {}).get("mistakes") or {}).values():
        for m in items:
            out.setdefault(str(m["doc_id"]), []).append(m)
    return out


def document_pages(data: Any, rows: pa.Table | None, text_column: str, scores: dict[str, Any] | None,
                   linked: list[str]) -> list[DocumentPage]:
    """The pages of the documents `wanted_ids` picks, from the run's rows, dead letters and input texts."""
    ids = wanted_ids(linked, scores)
    texts = _texts(data, rows, text_column, set(ids))
    gold = mistakes_by_document(scores) if scores and "mistakes" in scores else {}
    by_row = {}
    if rows is not None and ids:
        import pyarrow.compute as pc

        id_name = rows.column_names[0]
        shown = rows.filter(pc.is_in(rows.column(0).cast(pa.string()), value_set=pa.array(ids, pa.string())))
        by_row = {str(r[id_name]): r for r in shown.to_pylist()}
    dead = {o.doc_id: o for o in data.outcomes if o.outcome != ROW}
    pages = []
    for doc_id in ids:
        if doc_id in by_row:
            pages.append(row_page(by_row[doc_id], texts.get(doc_id), gold.get(doc_id) if gold else None))
        elif doc_id in dead:
            pages.append(dead_page(dead[doc_id], texts.get(doc_id)))
    return pages


def _texts(data: Any, rows: pa.Table | None, text_column: str, ids: set[str]) -> dict[str, str]:
    if not ids or not data.input_files:
        return {}
    id_column = rows.column_names[0] if rows is not None else None
    try:
        if id_column is None:
            from pipeline.output.tables import column_names
            from pipeline.storage import storage_for

            id_column = column_names(storage_for(str(data.record.get("input_uri", ""))), data.input_files[0])[0]
        return read_texts(data.input_files, str(data.record.get("input_uri", "")), id_column, text_column, ids)
    except (OSError, StorageError, pa.ArrowException, ValueError, IndexError):
        return {}  # the input moved: the pages show values without their text


def write_pages(pages: list[DocumentPage], out_dir: Path, run_id: str, env: Any) -> dict[str, str]:
    """Each page as OUT_DIR/docs/<page>.html; returns document id → its href (relative to OUT_DIR)."""
    (out_dir / DOCS_DIR).mkdir(parents=True, exist_ok=True)
    template = env.get_template("document.html.j2")
    for page in pages:
        (out_dir / page.href).write_text(template.render(page=page, run_id=run_id, fmt_value=fmt_value))
    return {page.doc_id: page.href for page in pages}


def fmt_value(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, str):
        return value
    return value.isoformat() if hasattr(value, "isoformat") else json.dumps(value, default=str, ensure_ascii=False)


def linked_ids(report: Any) -> list[str]:
    """The documents the run page names: wrong values first, then dead letters, least sure values, sample rows."""
    mistakes = [str(m["doc_id"]) for items in ((report.scores or {}).get("mistakes") or {}).values() for m in items]
    dead = [d.doc_id for samples in report.dead_samples.values() for d in samples]
    unsure = [u.doc_id for u in report.unsure]
    sample = [row[0] for row in report.sample[1]] if report.sample[0] else []
    return list(dict.fromkeys([*mistakes, *dead, *unsure, *sample]))


def write_documents(report: Any, rows: pa.Table | None, out_dir: Path, env: Any) -> dict[str, str]:
    """The run's document pages (`document_pages`) written under OUT_DIR/docs; document id → href."""
    text_column = report.context.text_column if report.context is not None else "text"
    pages = document_pages(report.data, rows, text_column, report.scores, linked_ids(report))
    return write_pages(pages, out_dir, report.data.run_id, env)
