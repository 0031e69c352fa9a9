"""What grounding leaves out of a field's candidates because of how the document writes them (`schemas.labels`):
a label's own text, a placeholder, a value written only under another field's label, an e-mail's sent date, and
every candidate of a form field left blank. `schemas.grounding` calls `screened` with its finders."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from schemas.labels import (
    PLACEHOLDERS,
    blank_labels,
    label_index,
    label_texts,
    named_only,
    names,
    names_message,
    outside,
    sent_line,
)

Finder = Callable[[str], list[Any]]
# Kinds screened by labels: a value the document writes only under another field's label is left out where the
# document labels one with this field's words (`schemas.labels.named_only`).
LABELLED_KINDS = frozenset({"number", "date", "money", "email", "phone", "url", "id", "text", "word"})
WORD_KINDS = frozenset({"word", "text", "id"})  # kinds whose candidates are the document's words


def screened(candidates: list[Any], kind: str, finders: Mapping[str, Finder], nullable: bool, document: str,
             cache: dict[str, Any], words_: set[str] | None, rivals: tuple[set[str], ...]) -> list[Any]:
    """The candidates without what is not a value of the field: for words, a label's own text (`Subject`,
    `Product` of `Product:`) and, for a nullable field, a placeholder (`N/A`); for a value of a shape, one written
    under another field's label (`_by_label`)."""
    if kind in WORD_KINDS:
        if "label texts" not in cache:
            cache["label texts"] = label_texts(document)
        candidates = [c for c in candidates if not isinstance(c, str) or (
            c.strip().rstrip(":#").strip().casefold() not in cache["label texts"]
            and not (nullable and c.strip().casefold() in PLACEHOLDERS))]
    if kind in LABELLED_KINDS and words_:
        candidates = _by_label(candidates, kind, finders, document, cache, words_, rivals)
        if candidates and nullable and _left_blank(kind, finders[kind], document, cache, words_, rivals):
            return []
    return candidates


def _left_blank(kind: str, finder: Finder, document: str, cache: dict[str, Any], words_: set[str],
                rivals: tuple[set[str], ...]) -> bool:
    """Whether the document leaves the field's label blank (`Product: `, `Order #: N/A`) and writes no value of
    the field's kind under a label that names it: a form that says it has none."""
    if "blank labels" not in cache:
        cache["blank labels"] = blank_labels(document)
    if not any(names(label, words_, rivals) for label in cache["blank labels"]):
        return False
    if ("labels", kind) not in cache:
        cache[("labels", kind)] = label_index(finder, document)
    _, under = cache[("labels", kind)]
    return not any(names(label, words_, rivals) for labels in under.values() for label in labels)


def _by_label(candidates: list[Any], kind: str, finders: Mapping[str, Finder], document: str,
              cache: dict[str, Any], words_: set[str], rivals: tuple[set[str], ...]) -> list[Any]:
    """The candidates of a field named `words_` without those written under another field's label (`named_only`),
    and for a date without an e-mail's sent date where the field is not named for it (`_not_sent`)."""
    if kind == "date" and candidates and not names_message(words_):
        candidates = _not_sent(candidates, finders["date"], document, cache)
    if len(candidates) > 1:
        if ("labels", kind) not in cache:
            cache[("labels", kind)] = label_index(finders[kind], document)
        candidates = named_only(candidates, cache[("labels", kind)], words_, rivals)
    return candidates


def _not_sent(candidates: list[Any], dates: Finder, document: str, cache: dict[str, Any]) -> list[Any]:
    """The date candidates without the one an e-mail's header writes only as when the message was sent
    (`Date: Sat, 07 Mar 2026 17:26:44 +0000`): a field not named for the message (`order_date`) is not that date."""
    if "sent" not in cache:
        span = sent_line(document)
        cache["sent"] = (set(dates(document[span[0]:span[1]])), outside(dates, document, span)) if span else None
    if cache["sent"] is None:
        return candidates
    sent, elsewhere = cache["sent"]
    return [c for c in candidates if c not in sent or json.dumps(c) in elsewhere]
