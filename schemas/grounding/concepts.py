"""Concepts: what a document's label says a value is, in any language with a word list, and which concept a
schema's field holds.

An invoice or receipt writes each of its key values under a label: `Rechnungsdatum:`, `Échéance :`, `Summe netto`,
`TVA 20 %`, `Totale da pagare`, `Te betalen voor:`. The same few concepts recur in every language (the issue
date, the due date, the document's number, the net amount, the tax, the total, the issuer's tax id), and each
language prints them with its own words. Those words are data, one list per language and concept
(`data/<lang>.json`, key `concepts`); the English names a schema's fields have when they hold a concept are data
too (`data/en.json`, key `concept_fields`: `issue_date`, `vat`, `net`, `total`, ...).

A value's concept is the one whose label phrase starts first in the text before it: on its line, or from the
label's start where the value stands in a `label: value` pair (`schemas.labels`), so that `Date: 5 March  Due:
19 March` gives each date its own. Where two phrases start at the same place the longer one wins (`Total HT` is
the net amount, `Total TTC` the total, `Date d'échéance` the due date, `USt-IdNr.` a tax id, not the tax). A
phrase matches at a word's start: `netto` in `Nettobetrag`, `totale` in `Totale documento` (one of three letters
or fewer, `tax`, `iva`, `ht`, `due`, must be a whole word).

`schemas.grounding.screens.concepts` uses this to keep, for a field that holds a concept, the candidates the
document labels with it (chosen on jobs/multilingual; what it is worth elsewhere: that screen's docstring).
"""

from __future__ import annotations

import json
import re
from bisect import bisect_right
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from schemas.grounding.locale import LANGUAGES, words
from schemas.grounding.phrases import _normal, fold, phrases
from schemas.labels import labelled_matches

if TYPE_CHECKING:
    from schemas.grounding.index import DocumentIndex

NAME_TOKENS = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+")
# A number a `%` follows (`MwSt. 10 %`, `IVA (21%)`) is a rate, never the amount a money concept names (chosen on
# jobs/multilingual, where a VAT field kept `10` beside `902,93` under `IVA al 10%`; on the held-out set of the
# `concepts` screen's docstring the VAT amount is the only candidate in 29 of 30 documents, 0 before)
# A line of this many words or more is prose, whose clauses each name their own amounts (`DocumentConcepts._clause`)
PROSE_WORDS = 12
# A clause's end in prose: a sentence's (a stop, `!` or `?` before a capital), a semicolon, a comma before a space
CLAUSE_END = re.compile(r"[.!?][ \t]+(?=[A-ZÀ-ÖØ-Þ])|;[ \t]*|,[ \t]+")
# A letter's date line up to its date: a place of one to four capitalised words, a comma and maybe `den`, `am`, `le`,
# `el`, `a`, `il`, `em` (`Stuttgart, den `, `Lyon, le `, `Madrid, a `, `Den Haag, `)
LETTER_HEAD = re.compile(r"[ \t]*(?:[A-ZÀ-Þ][\w'’.-]*[ \t]+){0,3}[A-ZÀ-Þ][\w'’.-]*,[ \t]+"
                         r"(?:(?:den|am|le|el|a|il|em|op)[ \t]+)?")
# The word that dates a document after its number, right before the date: `Rechnung Nr. 1528 vom 15.01.2026`,
# `Facture n° 2026-118 du 15/01/2026`, `Fattura n. 12/2026 del 15/01/2026`, `factuur 2026-001 d.d. 15-01-2026`,
# `Factura 12 de fecha 15/01/2026`, `Invoice 123 dated 15 Jan 2026` (the document's date: its issue date)
DATED = re.compile(r"(?<![^\W\d_])(?i:vom|du|del|de fecha|d\.d\.|dated|de)[ \t]+\Z")
DATE_CONCEPTS = frozenset({"issue_date", "due_date", "other_date"})
PERCENT = re.compile(r"[ \u00a0\u202f]?%")


@lru_cache(maxsize=1)
def _fields() -> dict[str, str]:
    """A field's name (its words, lower case, joined by a space) → the concept it holds."""
    return {name: concept for concept, names in words("en").get("concept_fields", {}).items() for name in names}


def field_concept(name: str | None) -> str | None:
    """The concept a field holds by its name (`issue_date`, `InvoiceDate`, `vat`, `total_amount`), else None
    (`order_date`, `amount`, `price`: no invoice concept)."""
    key = " ".join(w.lower() for w in NAME_TOKENS.findall(name or ""))
    return _fields().get(key)


def money_concept(concept: str | None) -> bool:
    """Whether a concept is an amount (`net`, `tax`, `total`)."""
    return concept in words("en").get("money_concepts", [])


class DocumentConcepts:
    """The concept of the label before each offset of one document (`at`)."""

    def __init__(self, document: str, languages: tuple[str, ...]) -> None:
        self.document = document
        self.folded = fold(document)  # the label phrases are matched without accents, at the document's offsets
        self.pattern, self.concept_of = phrases(tuple(lang for lang in languages if lang in LANGUAGES))
        # (the label's start, its value's start, its value's end) of each `label: value` pair
        self.pairs = [(m.start("label"), m.start("value"), m.end("value")) for m in labelled_matches(document)]
        self._value_starts = [value_start for _, value_start, _ in self.pairs]
        self._at: dict[int, str | None] = {}
        self._lines: dict[int, list[tuple[int, int, str | None]]] = {}
        self._ends: list[int] | None = None  # `_number_ends`

    def at(self, start: int) -> str | None:
        """The concept the label before offset `start` names (None: no label phrase there)."""
        if self.pattern is None:
            return None
        if start not in self._at:
            line = window = self._window(start)
            window = self._clause(window, start)
            found = [c for first, end, c in self._matches(window) if end <= start]
            after = self._after_values(window, start)
            if after > window:  # a label after another value on the line names this one (`Netto 1.000,00  MwSt 190,00`)
                found = [c for first, end, c in self._matches(window) if first >= after and end <= start] or found
            if not found and window == line:
                found = [self._header(line, start) or self._letter_head(line, start)]
            elif found and found[0] == "invoice_number" and DATED.search(self.document, window, start):
                found = ["issue_date"]  # `Rechnung Nr. 1528 vom 15.01.2026`, `Facture n° 118 du 15/01/2026`
            self._at[start] = found[0] if found else None
        return self._at[start]

    def _window(self, start: int) -> int:
        """Where the label of the value at `start` may begin: its line's start, or its label's in a `label: value`
        pair that holds it."""
        window = self.document.rfind("\n", 0, start) + 1
        # the pairs are `LABELLED`'s matches in order, their values apart and increasing: the one pair whose
        # value holds `start`, if any, is the last that starts at or before it
        at = bisect_right(self._value_starts, start) - 1
        if at >= 0:
            label_start, _, value_end = self.pairs[at]
            if start <= value_end and label_start >= window:
                window = label_start
        return window

    def _letter_head(self, line: int, start: int) -> str | None:
        """`issue_date` for a letter's date line, a place and a date alone on it (`Stuttgart, den 16. Februar 2026`,
        `Lyon, le 15 août 2026`, `Madrid, a 3 de mayo de 2026`, `Napoli, 11 ottobre 2026`, `São Paulo, 15 de
        janeiro de 2026`): how a letter in each of these languages dates itself (issue 54's blind euro job: its 6
        letters that write two dates offered both for the issue date)."""
        line_end = self.document.find("\n", start)
        rest = self.document[start:len(self.document) if line_end < 0 else line_end]
        return "issue_date" if LETTER_HEAD.fullmatch(self.document, line, start) and len(rest.split()) <= 6 else None

    def _after_values(self, window: int, start: int) -> int:
        """The end of the last number written between `window` and `start` (a rate, `19 %`, aside), else `window`.
        A line of pairs names each value by the label after the value before it (`Base imp. 11,45  IVA 10% 1,15`,
        `Netto 1.000,00 €  MwSt 19 %  190,00 €  Brutto 1.190,00 €`: the line's first label named all three before;
        issue 54's blind euro job, a Spanish receipt's VAT), and a label followed by a rate only keeps its own
        (`Total TTC (dont TVA 20 %)  1 234,56 €` is the total)."""
        ends = self._number_ends()
        at = bisect_right(ends, start) - 1
        while at >= 0 and ends[at] > window:
            if not PERCENT.match(self.document, ends[at]):
                return ends[at]
            at -= 1
        return window

    def _number_ends(self) -> list[int]:
        """The ends of the document's number tokens (`schemas.grounding.numbers`), in order, made once."""
        if self._ends is None:
            from schemas.grounding.numbers import _tokens

            self._ends = sorted(end for _, _, end, _ in _tokens(self.document))
        return self._ends

    def _header(self, line: int, start: int) -> str | None:
        """The concept of the label over offset `start` in a header row: the line right above the value's line (which
        starts at `line`), with no digit in it and the labels of two concepts or more, one over the value's columns
        (`Rechnungsnummer   Rechnungsdatum   Zahlbar bis` over `6642   01.06.2026   15.06.2026`). Found on issue 54's
        blind euro job: 9 grids and 2 DANFE of 42 documents, whose numbers and dates were labelled nowhere). A
        table's column header names one concept at most (`Menge  Einzelpreis  Gesamt`) and no date: not a header row."""
        if line == 0:
            return None
        above = self.document.rfind("\n", 0, line - 1) + 1
        if any(c.isdigit() for c in self.document[above:line]):
            return None
        labels = self._matches(above)
        named = {c for _, _, c in labels if c}
        if len(named) < 2 and not named & DATE_CONCEPTS:  # one date's label (`Vencimento`, `DATA DA EMISSÃO`) will do:
            return None  # no items table heads a column with a date
        value = re.compile(r"\S+").match(self.document, start)
        end = value.end() if value else start + 1
        left, right = start - line, end - line
        over = [(min(right, last - above) - max(left, first - above), c) for first, last, c in labels]
        best = max(over, key=lambda o: o[0], default=(0, None))
        return best[1] if best[0] > 0 else None

    def _clause(self, window: int, start: int) -> int:
        """Where the clause holding offset `start` begins, in a line of prose (`PROSE_WORDS` words or more): after
        the last sentence end (`. ` before a capital), `;` or `, ` between the window and `start`. A letter names
        each amount in its own clause (`..., Ihnen 225,91 EUR zzgl. 7 % Umsatzsteuer in Höhe von 15,81 EUR in
        Rechnung zu stellen. Der Rechnungsbetrag beläuft sich auf 241,72 EUR.`), where the line's first label
        named them all before (issue 54's blind euro job: 2 letters' totals and 2 nets were
        refused). A line of a table or form keeps its first label (`Total TTC (dont TVA 20 %)  1 234,56 €`)."""
        line_end = self.document.find("\n", start)
        line = self.document[window:len(self.document) if line_end < 0 else line_end]
        if len(line.split()) < PROSE_WORDS:
            return window
        ends = [m.end() for m in CLAUSE_END.finditer(self.document, window, start)]
        return ends[-1] if ends else window

    def _matches(self, window: int) -> list[tuple[int, int, str | None]]:
        """The label phrases from `window` to its line's end, each (start, end, concept), made once per window."""
        if window not in self._lines:
            line_end = self.document.find("\n", window)
            line_end = len(self.document) if line_end < 0 else line_end
            assert self.pattern is not None
            self._lines[window] = [(m.start(), m.end(), self.concept_of.get(_normal(m.group())))
                                   for m in self.pattern.finditer(self.folded, window, line_end)]
        return self._lines[window]


def key(value: Any) -> str:
    """A candidate as the concepts index keys it (1 and 1.0 alike)."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return repr(float(value))
    return json.dumps(value)


OFFSET_KINDS = ("number", "money", "date")


def value_concepts(index: DocumentIndex, kind: str, candidates: list[Any]) -> dict[str, set[str | None]]:
    """For each candidate (by `key`): the concepts of the labels it stands under, None for an unlabelled place."""
    concepts = index.cached("concepts", lambda: DocumentConcepts(index.document, index.locale.languages))
    if kind in OFFSET_KINDS:  # the document's readings of the kind, whatever the candidates: made once per kind
        return index.cached(("value concepts", kind), lambda: _offset_concepts(index, kind, concepts))
    found: dict[str, set[str | None]] = {}
    document = index.document
    for candidate in candidates:
        if not isinstance(candidate, str) or not candidate:
            continue
        start = document.find(candidate)
        while start >= 0:
            if _whole(document, start, start + len(candidate)):  # not `1` inside `F-61578`
                found.setdefault(key(candidate), set()).add(concepts.at(start))
            start = document.find(candidate, start + len(candidate))
    return found


def _whole(document: str, start: int, end: int) -> bool:
    """Whether document[start:end] is no part of a longer word: no letter or digit joins it on either side where it
    begins or ends with one (issue 54's blind euro job: an item's `1` took the label of the `F-61578` it is in)."""
    before, after = document[start - 1:start], document[end:end + 1]
    joined_before = before.isalnum() and document[start].isalnum()
    return not joined_before and not (after.isalnum() and document[end - 1].isalnum())


def _offset_concepts(index: DocumentIndex, kind: str, concepts: DocumentConcepts) -> dict[str, set[str | None]]:
    found: dict[str, set[str | None]] = {}
    for value, start, _ in index.readings(kind):
        found.setdefault(key(value), set()).add(concepts.at(start))
    return found


def amounts(index: DocumentIndex) -> set[str]:
    """The values (by `key`) the document writes as money somewhere (`schemas.grounding.numbers.money_readings`:
    beside a currency, with two decimals, after a money word), a rate (`10 %`) aside."""
    def make() -> set[str]:
        text = index.document
        return {key(v) for v, _, end in index.readings("money") if not PERCENT.match(text, end)}
    return index.cached("amounts", make)


def rates(index: DocumentIndex, kind: str) -> set[str]:
    """The values (by `key`) the document writes only as a rate (`20 %`), never otherwise: no amount a money concept
    names (`TVA à 20 %` in a letter's clause names the rate, not the tax)."""
    def make() -> set[str]:
        text = index.document
        rate: set[str] = set()
        other: set[str] = set()
        for value, _, end in index.readings(kind) if kind in OFFSET_KINDS else ():
            (rate if PERCENT.match(text, end) else other).add(key(value))
        return rate - other
    return index.cached(("rates", kind), make)


def labelled_concepts(index: DocumentIndex) -> set[str]:
    """The concepts the document's labels name anywhere (a receipt's `Total` and `TVA`, no `Échéance`)."""
    def make() -> set[str]:
        pattern, concept_of = phrases(tuple(lang for lang in index.locale.languages if lang in LANGUAGES))
        if pattern is None:
            return set()
        return {concept_of[_normal(m.group())] for m in pattern.finditer(fold(index.document))
                if _normal(m.group()) in concept_of}
    return index.cached("labelled concepts", make)
