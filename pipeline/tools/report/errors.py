"""Dead letters' errors, grouped (pure): the commonest messages per reason with their per-document values
normalised away, the failing field paths, and a few dead letters with their raw output."""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from pipeline.tools.report.formats import truncate
from pipeline.tools.report.outcomes import ROW, RecordOutcome, reason_rank

_DATE = re.compile(r"\b\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?)?\b")
_HEX = re.compile(r"\b0x[0-9a-fA-F]+\b")
_NUMBER = re.compile(r"(?<![\w.-])-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?(?![\w.])")
_WRAPPERS = ("Value error, ", "Assertion failed, ")
MAX_MESSAGE = 160


def normalise_message(message: str) -> str:
    """The message with its per-document values replaced, so that "total 12.0 does not appear" and
    "total 1562.0 does not appear" group together. Pydantic's "Value error, " wrapper is dropped."""
    text = " ".join(str(message).split())
    for wrapper in _WRAPPERS:
        if text.startswith(wrapper):
            text = text[len(wrapper):]
    text = _DATE.sub("<date>", text)
    text = _HEX.sub("<hex>", text)
    text = _NUMBER.sub("<n>", text)
    return text if len(text) <= MAX_MESSAGE else text[: MAX_MESSAGE - 1] + "…"


def format_loc(loc: Iterable[Any]) -> str:
    """`["items", 3, "name"]` → `items[*].name`: list positions differ per document, the path does not."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += "[*]"
        else:
            out += ("." if out else "") + str(part)
    return out


def error_messages(error_json: str | None) -> list[tuple[str, str]]:
    """(group key, raw message) for each error a dead letter records: every Pydantic/JSON Schema error
    (prefixed with its field path) when there is a list, else the one message."""
    if not error_json:
        return [("(no error recorded)", "")]
    try:
        error = json.loads(error_json)
    except json.JSONDecodeError:
        return [(normalise_message(error_json), error_json)]
    if not isinstance(error, dict):
        return [(normalise_message(str(error)), str(error))]
    items = error.get("errors")
    if isinstance(items, list) and items:
        out = []
        for item in items:
            msg = str(item.get("msg", "")) if isinstance(item, dict) else str(item)
            loc = format_loc(item.get("loc") or []) if isinstance(item, dict) else ""
            key = normalise_message(msg)
            out.append((f"{loc}: {key}" if loc else key, msg))
        return out
    message = str(error.get("message", "")) or json.dumps(error)
    return [(normalise_message(message), message)]


@dataclass
class ErrorGroup:
    reason: str
    pattern: str
    documents: int
    examples: list[str]  # document ids
    sample: str  # one raw message, values intact


def group_errors(dead: Iterable[tuple[str, str, str | None]], top: int = 5, examples: int = 3
                 ) -> dict[str, list[ErrorGroup]]:
    """Per reason, the `top` commonest normalised messages with the number of documents showing each
    (a document counts once per message, however many times it repeats) and a few example ids."""
    groups: dict[tuple[str, str], ErrorGroup] = {}
    for doc_id, reason, error_json in dead:
        seen: set[str] = set()
        for key, raw in error_messages(error_json):
            if key in seen:
                continue
            seen.add(key)
            group = groups.setdefault((reason, key), ErrorGroup(reason, key, 0, [], raw))
            group.documents += 1
            if len(group.examples) < examples:
                group.examples.append(doc_id)
    by_reason: dict[str, list[ErrorGroup]] = {}
    for group in sorted(groups.values(), key=lambda g: (-g.documents, g.pattern)):
        bucket = by_reason.setdefault(group.reason, [])
        if len(bucket) < top:
            bucket.append(group)
    return dict(sorted(by_reason.items(), key=lambda kv: reason_rank(kv[0])))


@dataclass
class FieldError:
    path: str  # `items[*].name`; "(document)" for errors with no field path
    documents: int
    reasons: dict[str, int]
    messages: list[tuple[str, int]]  # normalised message → documents, commonest first
    examples: list[str]


def field_errors(dead: Iterable[tuple[str, str, str | None]], top: int = 3, examples: int = 3) -> list[FieldError]:
    """Which field paths fail (`error.errors[].loc`), in how many documents, why and with which messages;
    commonest first. Dead letters without a per-field error list do not appear here."""
    found: dict[str, FieldError] = {}
    messages: dict[str, Counter[str]] = {}
    for doc_id, reason, error_json in dead:
        seen: set[str] = set()
        for loc, message in _located_errors(error_json):
            path = format_loc(loc) or "(document)"
            entry = found.setdefault(path, FieldError(path, 0, {}, [], []))
            messages.setdefault(path, Counter())[normalise_message(message)] += 1
            if path in seen:
                continue
            seen.add(path)
            entry.documents += 1
            entry.reasons[reason] = entry.reasons.get(reason, 0) + 1
            if len(entry.examples) < examples:
                entry.examples.append(doc_id)
    for path, entry in found.items():
        entry.messages = messages[path].most_common(top)
    return sorted(found.values(), key=lambda e: (-e.documents, e.path))


def _located_errors(error_json: str | None) -> list[tuple[list[Any], str]]:
    try:
        error = json.loads(error_json) if error_json else None
    except json.JSONDecodeError:
        return []
    items = error.get("errors") if isinstance(error, dict) else None
    if not isinstance(items, list):
        return []
    return [(list(item.get("loc") or []), str(item.get("msg", ""))) for item in items if isinstance(item, dict)]


@dataclass
class DeadSample:
    doc_id: str
    message: str
    raw_output: str  # truncated, with a marker
    output_tokens: int | None


def dead_samples(outcomes: Sequence[RecordOutcome], per_reason: int = 3) -> dict[str, list[DeadSample]]:
    """For each reason, the first few dead letters with their raw output."""
    out: dict[str, list[DeadSample]] = {}
    for o in outcomes:
        if o.outcome == ROW:
            continue
        bucket = out.setdefault(o.outcome, [])
        if len(bucket) < per_reason:
            message = error_messages(o.error)[0][1] or "(no error recorded)"
            bucket.append(DeadSample(o.doc_id, truncate(message, 300), truncate(o.raw_output), o.output_tokens))
    return dict(sorted(out.items(), key=lambda kv: reason_rank(kv[0])))
