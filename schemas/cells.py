"""A document's text as grounding reads it: cells (a line cut at `|`, tabs, runs of spaces and after a
`label:`) and the sentences inside them. Both the grounded enums (schemas.grounding) and the substring
grammar for long documents (schemas.substring) take a value's words from one sentence of one cell."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from functools import lru_cache
from pathlib import Path

MAX_WORDS = 12  # the longest `text` value, in words
CELL_BREAK = re.compile(r"\s*(?:\||\t| {2,})\s*|(?<=:)\s+")
HARD_BREAK = re.compile(r"\s*(?:\||\t| {2,})\s*")  # a cell's edges but a label's colon
# Markdown's emphasis (`**Holographic HUD**`, `*Quantum Shift*`, `_Dionaea muscipula_`) and typographic quotes
# are punctuation around a value too (DeepJSONEval en, first 32: 21 of 44 refused gold names were written in bold
# or italics).
EDGE_PUNCTUATION = ".,;:!?()[]{}|\"'*_“”‘’"
# The same without closing brackets: `"The Succulent Manual (2022 Edition)" provides` ends `(2022 Edition)` too
EDGE_BUT_BRACKETS = EDGE_PUNCTUATION.replace(")", "").replace("]", "").replace("}", "")
# A word: a run without spaces or dashes between words (`minutes—a task`, `Patel—the Indian`): a value stops at
# an em dash as at a space.
WORD = re.compile(r"[^\s—]+")
POSSESSIVE = ("'s", "’s")  # `Anya Petrova's role`: the name is `Anya Petrova` (a run may end without it)
# A sentence ends at . ! ? or ; and a space before a capital or a quote, unless the word before the stop is
# an abbreviation (Mr., St., Co., Ing., Dott., Sr., a one-letter initial): English's and those of every language
# with word lists (schemas/grounding/data/<lang>.json, read here directly: that package imports this module).
SENTENCE_END = re.compile(r"(?<=[.!?;])\s+(?=[A-ZÀ-ÖØ-Þ\"“(])")


def _abbreviations() -> list[str]:
    found = {"Mr", "Mrs", "Ms", "Dr", "St", "Co", "No", "Jr", "Sr", "Inc", "Ltd", "Corp", "vs", "etc", "e.g", "i.e"}
    for path in sorted((Path(__file__).parent / "grounding" / "data").glob("*.json")):
        found.update(json.loads(path.read_text(encoding="utf-8")).get("abbreviations", []))
    return sorted(found, key=len, reverse=True)


ABBREVIATION = re.compile(r"(?:^|\s)(?:[A-Z]|" + "|".join(re.escape(a) for a in _abbreviations()) + r")\.$")
# An `ABBREVIATION` match ends at its text's end and is at most this long: searched in a longer sentence's last
# this many characters, where `^` cannot start one (it would be one character too short to reach the end)
ABBREVIATION_REACH = max(map(len, _abbreviations())) + 2


def cells_of(text: str, labels: bool = True) -> Iterator[str]:
    """Each cell of each line: a line cut at `|`, tabs, runs of spaces and (with `labels`) after a `label:`."""
    yield from _cells(text, labels)


def sentences_of(text: str, labels: bool = True) -> Iterator[str]:
    """Each sentence of each cell: a value the model copies never runs from one sentence into the next. Without
    `labels`, a colon does not end a cell (`Eternal Echoes: The Forgotten Chronicles`, a title in prose)."""
    yield from _sentences(text, labels)


# What several readers of one text derive from it (its cells and sentences here, its labelled values, number tokens
# and currency marks) is made once per text, for the last `PER_TEXT_KEPT` texts read: a window's finders and screens
# read it one after another, and a text held here is at most a document (a few MB at the actor's largest).
PER_TEXT_KEPT = 4


# A document's cells and sentences are read by several finders (`text`, `cell`, `item`) and by its index.
@lru_cache(maxsize=PER_TEXT_KEPT)
def _cells(text: str, labels: bool) -> tuple[str, ...]:
    breaks = CELL_BREAK if labels else HARD_BREAK
    marks = ("|", "\t", "  ", ":") if labels else ("|", "\t", "  ")
    # a line without any of the marks a break needs is one cell (most lines of prose)
    return tuple(cell for line in text.splitlines()
                 for cell in (breaks.split(line) if any(mark in line for mark in marks) else (line,)))


@lru_cache(maxsize=PER_TEXT_KEPT)
def _sentences(text: str, labels: bool) -> tuple[str, ...]:
    found = []
    for cell in _cells(text, labels):
        start = 0
        for stop in SENTENCE_END.finditer(cell):
            if not _abbreviation_before(cell, start, stop.start()):
                found.append(cell[start:stop.start()])
                start = stop.end()
        found.append(cell[start:])
    return tuple(found)


def _abbreviation_before(cell: str, start: int, end: int) -> bool:
    """Whether `cell[start:end]` ends in an abbreviation (`ABBREVIATION`), reading no more of it than a match can
    be long: a sentence's whole text searched at every position was a third of `sentences_of` on a long document."""
    return ABBREVIATION.search(cell[max(start, end - ABBREVIATION_REACH):end]) is not None
