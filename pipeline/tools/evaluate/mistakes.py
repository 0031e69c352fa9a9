"""The wrong, missed and invented values of a scored run, each with its document id, gold, predicted value and a
snippet of the document around it: what `extract eval` lists in eval.md, eval.json (`mistakes`) and
`--format csv`, and the report's run page.

A value's place in the document is the row's `_spans` entry for the predicted leaf (where the run wrote spans),
else a search of the document for the value (`schemas.spans.record_spans`, which reads numbers and dates as the
grounding does); a gold value's place is found the same way. Fields with the most mistakes come first, and within
a field the commonest (kind, gold, predicted) pairs, so a pattern (postcodes read as rents) shows in the first
lines."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from pipeline.tools.evaluate.compare import Comparer, Event
from pipeline.tools.evaluate.leaves import canonical
from pipeline.tools.evaluate.options import EvalOptions
from schemas.spans import record_spans

MISTAKE_KINDS = ("wrong", "missed", "spurious")  # spurious: a value the gold does not have (invented)
KIND_WORDS = {"wrong": "wrong", "missed": "missed", "spurious": "invented"}
SNIPPET_CHARS = 40  # characters each side of the value
CSV_COLUMNS = ("field", "kind", "doc_id", "gold", "predicted", "snippet", "gold_snippet")


@dataclass
class Mistake:
    field: str  # the field path, as the field table names it (`items[].sku`)
    kind: str  # wrong | missed | spurious
    doc_id: str
    gold: Any
    predicted: Any
    at: str | None = None  # the predicted leaf's concrete path (`items[2].sku`)
    snippet: str | None = None  # the document around the predicted value (for a missed one: the gold value)
    span: tuple[int, int] | None = None  # the predicted value's place
    gold_span: tuple[int, int] | None = None  # where the document writes the gold value
    gold_snippet: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["kind_word"] = KIND_WORDS[self.kind]
        return out


class ValueComparer(Comparer):
    """A `Comparer` that keeps each leaf event's predicted and gold values (`values[id(event)]`)."""

    def __init__(self, schema: dict[str, Any] | None, options: EvalOptions) -> None:
        super().__init__(schema, options)
        self.values: dict[int, tuple[Event, Any, Any]] = {}

    def compare(self, pred: Any, gold: Any, node: Any, path: str, absent: bool = False, at: str = "") -> list[Event]:
        events = super().compare(pred, gold, node, path, absent, at)
        if len(events) == 1 and not isinstance(pred, dict | list) and not isinstance(gold, dict | list):
            self.values[id(events[0])] = (events[0], pred, gold)
        return events


def snippet(text: str, span: tuple[int, int], chars: int = SNIPPET_CHARS) -> str:
    """The text around `span`, the value itself marked ⟦so⟧, whitespace runs folded to one space."""
    start, end = span
    before, value, after = text[max(0, start - chars):start], text[start:end], text[end:end + chars]
    lead, tail = ("…" if start > chars else ""), ("…" if end + chars < len(text) else "")
    return " ".join(f"{lead}{before}⟦{value}⟧{after}{tail}".split())


def span_of(place: Any) -> tuple[int, int]:
    """A `_spans` place as (start, end): Parquet gives `{"start", "end"}`, the actor a pair."""
    if isinstance(place, dict):
        return int(place["start"]), int(place["end"])
    return int(place[0]), int(place[1])


def _place(path: str | None, value: Any, spans: dict[str, Any] | None, text: str | None) -> tuple[int, int] | None:
    """Where the document writes `value`: the row's `_spans` at `path`, else a search of the text."""
    if path and spans and spans.get(path):
        return span_of(spans[path][0])
    if value is None or text is None or isinstance(value, bool):
        return None
    found = record_spans({"v": value}, text) or {}
    return tuple(found["v"][0]) if found.get("v") else None  # type: ignore[return-value]


def document_mistakes(doc_id: str, pred: dict[str, Any] | None, gold: dict[str, Any], comparer: ValueComparer,
                      spans: dict[str, Any] | None = None, text: str | None = None) -> list[Mistake]:
    """One document's wrong, missed and invented leaves, with their places and snippets where the text is known."""
    events = comparer.record(pred, gold)
    out = []
    for event in events:
        if event.kind not in MISTAKE_KINDS or id(event) not in comparer.values:
            continue
        _, p, g = comparer.values[id(event)]
        m = Mistake(event.path, event.kind, doc_id, g, p, event.at or None)
        m.span = _place(m.at, p, spans, text) if p is not None else None
        m.gold_span = _place(None, g, None, text) if g is not None else None
        if text is not None:
            m.gold_snippet = snippet(text, m.gold_span) if m.gold_span else None
            m.snippet = snippet(text, m.span) if m.span else m.gold_snippet
        out.append(m)
    return out


def ordered(mistakes: list[Mistake]) -> list[Mistake]:
    """Fields with the most mistakes first; in a field, the commonest (kind, gold, predicted) first; then by id."""
    per_field = Counter(m.field for m in mistakes)
    pairs = Counter((m.field, m.kind, canonical(m.gold), canonical(m.predicted)) for m in mistakes)
    kinds = Counter((m.field, m.kind) for m in mistakes)
    return sorted(mistakes, key=lambda m: (
        -per_field[m.field], m.field, -kinds[(m.field, m.kind)], m.kind,
        -pairs[(m.field, m.kind, canonical(m.gold), canonical(m.predicted))], m.doc_id))


def run_mistakes(golds: dict[str, dict[str, Any]], rows: dict[str, dict[str, Any]],
                 schema_for: Callable[[str], dict[str, Any] | None], options: EvalOptions,
                 spans: dict[str, dict[str, Any]] | None = None, texts: dict[str, str] | None = None
                 ) -> list[Mistake]:
    """Every mistake of the rows that have gold (dead letters are counted by reason, not listed), ordered."""
    out: list[Mistake] = []
    for doc_id, gold in golds.items():
        if doc_id in rows:
            out += document_mistakes(doc_id, rows[doc_id], gold, ValueComparer(schema_for(doc_id), options),
                                     (spans or {}).get(doc_id), (texts or {}).get(doc_id))
    return ordered(out)


def by_field(mistakes: list[Mistake]) -> dict[str, list[dict[str, Any]]]:
    """eval.json's `mistakes`: field → its mistakes, in order."""
    out: dict[str, list[dict[str, Any]]] = {}
    for m in mistakes:
        out.setdefault(m.field, []).append(m.to_dict())
    return out


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return value.isoformat() if hasattr(value, "isoformat") else canonical(value)  # a date as it reads


def markdown(mistakes: dict[str, list[dict[str, Any]]], limit: int = 20) -> list[str]:
    """eval.md's "Wrong values" section: a table per field, at most `limit` lines each."""
    if not mistakes:
        return ["", "## Wrong values", "", "None: every scored value equals its gold."]
    lines = ["", "## Wrong values", "",
             "Per field, most frequent first: wrong (gold ≠ predicted), missed (gold has a value, the row none), "
             "invented (the row has a value, the gold none). ⟦…⟧ marks the value in the document."]
    for field, items in mistakes.items():
        counts = Counter(m["kind_word"] for m in items)
        lines += ["", f"### {field or '(record)'}: " + ", ".join(f"{n} {k}" for k, n in counts.items()), "",
                  "| document | kind | gold | predicted | in the document |", "|---|---|---|---|---|"]
        for m in items[:limit]:
            cells = (m["doc_id"], m["kind_word"], _cell(m["gold"]), _cell(m["predicted"]), m.get("snippet") or "")
            lines.append("| " + " | ".join(_md(c) for c in cells) + " |")
        if len(items) > limit:
            lines.append(f"| … {len(items) - limit} more in eval.json |  |  |  |  |")
    return lines


def _md(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def csv_rows(mistakes: dict[str, list[dict[str, Any]]]) -> list[tuple[str, ...]]:
    """`extract eval --format csv`: a row per mistake, in eval.json's order."""
    return [(field, m["kind_word"], m["doc_id"], _cell(m["gold"]), _cell(m["predicted"]), m.get("snippet") or "",
             m.get("gold_snippet") or "") for field, items in mistakes.items() for m in items]


def output_mistakes(loaded: Any, golds: dict[str, dict[str, Any]], output: Any, options: EvalOptions,
                    spans: dict[str, dict[str, Any]] | None, texts: dict[str, str] | None) -> list[Mistake]:
    """`run_mistakes` of a run's committed output (`pipeline.tools.evaluate.output.RunOutput`), each document under
    its schema (a per-row-schema job's own, else the job's)."""
    default = loaded.contract.json_schema if not loaded.contract.per_row else None
    return run_mistakes(golds, output.rows, lambda doc_id: output.schemas.get(doc_id, default), options, spans,
                        texts)
