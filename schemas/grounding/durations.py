"""Durations a document writes, in the normal form records write them (`two (2) years` → `2 years`).

A contract writes a term as `two (2) years`, `eighteen (18) months`, `a three-year period` or `thirty-six months`;
a record holds `2 years`, `18 months`, `3 years`, `36 months`. A free-text field decoded as runs of the
document's words (`schemas.substring`) cannot write those forms, so `durations` offers them beside the document's
runs, as `schemas.grounding.normal` offers dates as YYYY-MM-DD: still only durations the document writes.

Spelled numbers are read by `text2num` (`alpha2digit`, English, French, Spanish, Portuguese, German, Dutch, Danish
and Italian numbers); the units are data per language (`UNITS`: English only so far). Without `text2num` only
durations written in digits are read.

Chosen on the Kleister NDA train split (issue 56: terms written `two (2) years`, gold `2 years`; 0 of 4 terms of
docs 1-8 reachable as the document writes them). On the sample, tickets and DeepJSONEval en no gold value is a
duration, and the forms only add to a substring field's runs (never used where a field is an enum of spans).
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

try:  # a well-kept reader of spelled numbers (issue 54: numbers on libraries)
    from text_to_num import alpha2digit
except ImportError:  # pragma: no cover - the project depends on it; without it, digits only
    alpha2digit = None

# Each unit's singular and plural as records write them, and the words a document writes it with, by language
UNITS: dict[str, dict[str, tuple[str, str, tuple[str, ...]]]] = {
    "en": {"day": ("day", "days", ("day", "days")), "week": ("week", "weeks", ("week", "weeks")),
           "month": ("month", "months", ("month", "months")), "year": ("year", "years", ("year", "years"))},
}
# Words a document writes between a number and its unit (`2 calendar years`, `3 full months`), by language
BETWEEN = {"en": ("calendar", "consecutive", "full", "business", "working", "additional")}
SPELLED_LANGUAGES = frozenset({"en", "fr", "es", "pt", "de", "nl", "da", "it"})  # what text2num reads
MAX_AMOUNT = 1000  # a duration's number: past it, not a term (`2019 years` is a year beside a word)


def _pattern(language: str) -> re.Pattern[str] | None:
    units = UNITS.get(language)
    if not units:
        return None
    words = sorted({w for _, _, written in units.values() for w in written}, key=len, reverse=True)
    between = "|".join(BETWEEN.get(language, ()))
    return re.compile(rf"(?<![\w.,])(?P<n>\d+)(?:\s*\(\s*(?P<m>\d+)\s*\))?(?:\s+|\s*-\s*)"
                      rf"(?:(?:{between})\s+)?(?P<unit>{'|'.join(words)})(?!\w)", re.IGNORECASE)


_PATTERNS = {language: _pattern(language) for language in UNITS}
HYPHENED = {language: re.compile(rf"(?<=[^\W\d_])-(?=(?:{'|'.join(w for _, _, ws in units.values() for w in ws)})"
                                 r"(?!\w))", re.IGNORECASE) for language, units in UNITS.items()}


def durations(text: str, language: str | None = "en") -> list[str]:
    """Every duration the text writes (a number of days, weeks, months or years, spelled or in digits, maybe
    with its digits in brackets: `two (2) years`, `a 3-year term`, `eighteen months`), as `N unit` (`2 years`,
    `1 year`), in order of first appearance. Languages without units in `UNITS` give none."""
    language = language if language in _PATTERNS else "en"
    pattern = _PATTERNS[language]
    if pattern is None:
        return []
    digits = text
    if alpha2digit is not None and language in SPELLED_LANGUAGES:  # `two (2) years` → `2 (2) years`; a
        # hyphen before a unit (`three-year`) is a space to it, which text2num does not read
        digits = alpha2digit(HYPHENED[language].sub(" ", text), language, threshold=0)
    found: dict[str, None] = {}
    for match in pattern.finditer(digits):
        unit = _unit(match.group("unit"), language)
        for number in dict.fromkeys(n for n in (match.group("m"), match.group("n")) if n is not None):
            amount = int(number)
            if 0 < amount <= MAX_AMOUNT:
                singular, plural, _ = UNITS[language][unit]
                found[f"{amount} {singular if amount == 1 else plural}"] = None
    return list(found)


def _unit(written: str, language: str) -> str:
    lowered = written.casefold()
    return next(unit for unit, (_, _, words) in UNITS[language].items() if lowered in words)


DURATION_KIND = "duration"


def asks_duration(node: dict[str, Any]) -> bool:
    """Whether a field's description or examples show a duration (`how long the agreement lasts, e.g. 2 years`):
    the form the user wants its value in."""
    shown = [node.get("description"), *(node.get("examples") or [])]
    for branch in node.get("anyOf") or node.get("oneOf") or []:
        if isinstance(branch, dict):
            shown += [branch.get("description"), *(branch.get("examples") or [])]
    return any(_shows_duration(text) for text in shown if isinstance(text, str))


@lru_cache(maxsize=1024)
def _shows_duration(text: str) -> bool:
    """Whether a description or example writes a duration (asked once per text: a schema's texts, every document)."""
    return bool(durations(text))


def duration_kind(kind: str, node: dict[str, Any], index: Any = None) -> str:
    """`duration` for a free-text field that asks for a duration (`asks_duration`): its candidates are the
    document's durations in their normal form (and null where the field allows it), not runs of its words; else
    `kind`. In a document (or window) that writes none, the field keeps its plain type, as any field whose finder
    finds nothing (`schemas.grounding.core`: a nullable one is free, and an unsure value there is null). Runs of
    its words there gave the bundled model a date or a year the window writes, with more confidence than the
    window that wrote the term (Kleister NDA train, issue 56: `2011` at 0.78 over `2 years` at 0.50)."""
    return DURATION_KIND if kind == "text" and asks_duration(node) else kind
