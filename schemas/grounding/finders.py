"""The finders: for each kind, every value of that kind a document writes (`FINDERS`)."""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import partial
from typing import Any

from schemas.cells import EDGE_BUT_BRACKETS, EDGE_PUNCTUATION, MAX_WORDS, POSSESSIVE, WORD, cells_of, sentences_of
from schemas.grounding.dates import dates as read_dates
from schemas.grounding.durations import durations
from schemas.grounding.kinds import ID_SHAPE
from schemas.grounding.layout import wrapped
from schemas.grounding.locale import LANGUAGES, UNKNOWN, Locale
from schemas.grounding.numbers import all_codes
from schemas.grounding.numbers import currencies as read_currencies
from schemas.grounding.numbers import money as read_money
from schemas.grounding.numbers import numbers as read_numbers
from schemas.grounding.phrases import fold, phrases
from schemas.grounding.places import places
from schemas.substring import UNSPACED_CHARS, UNSPACED_LETTERS

# The English-only shapes grounding read before issue 54, kept for readers of old spans (tests/unit/test_spans.py)
NUMBER = re.compile(r"(?<![\w.])-?\d{1,3}(?:,\d{3})+(?:\.\d+)?(?![\d])|(?<![\w.,])-?\d+(?:\.\d+)?(?![\d])")
MONTH = r"[A-Z][a-z]{2,8}\.?"
DATE_SHAPES: tuple[tuple[re.Pattern[str], tuple[str, ...]], ...] = (
    (re.compile(r"\b\d{4}-\d{1,2}-\d{1,2}\b"), ("%Y-%m-%d",)),
    (re.compile(rf"\b{MONTH} \d{{1,2}},? \d{{4}}\b"), ("%B %d, %Y", "%b %d, %Y", "%B %d %Y", "%b %d %Y")),
    (re.compile(rf"\b\d{{1,2}} {MONTH},? \d{{4}}\b"), ("%d %B %Y", "%d %b %Y", "%d %B, %Y", "%d %b, %Y")),
    (re.compile(r"\b\d{1,2}[./-]\d{1,2}[./-]\d{4}\b"), ("%d.%m.%Y", "%d/%m/%Y", "%m/%d/%Y", "%d-%m-%Y", "%m-%d-%Y")),
)



def numbers(text: str, locale: Locale = UNKNOWN) -> list[float | int]:
    """Every number the text writes, each reading once (`schemas.grounding.numbers`), in order of first appearance."""
    return read_numbers(text, locale)


def dates(text: str, locale: Locale = UNKNOWN) -> list[str]:
    """Every date the text writes in a usual form of its languages, as YYYY-MM-DD (an ambiguous 01/02/2026 gives
    both; `schemas.grounding.dates`)."""
    return read_dates(text, locale)


def money(text: str, locale: Locale = UNKNOWN) -> list[float | int]:
    """Every amount the text writes as money: beside a currency sign, code or name (`USD 34.50`, `1.234,56 €`,
    `R$ 59`), with two decimals (`389.00`), or after a money word of its languages (`Amount paid: 389`,
    `Gesamtbetrag 1.234`); in order of first appearance (`schemas.grounding.numbers.money`)."""
    return read_money(text, locale)


def currencies(text: str, locale: Locale = UNKNOWN) -> list[str]:
    """The ISO 4217 codes the text writes or whose symbols or names it writes (`€` → EUR, `R$` → BRL)."""
    return read_currencies(text, locale)


def codes(text: str, locale: Locale = UNKNOWN) -> list[str]:
    """An enum of codes' candidates: the words the text writes (`apart_runs` too), then the currency codes its
    symbols stand for."""
    return list(dict.fromkeys([*words(text), *apart_runs(text), *currencies(text, locale)]))


UNSPACED_TEXT = re.compile(f"[{UNSPACED_CHARS}]")
UNSPACED_APART = re.compile(rf"[^\s{UNSPACED_CHARS}]+")


def apart_runs(text: str) -> list[str]:
    """In a text with Chinese, Japanese or Thai, each run of other characters between them, as a word (`血型为AB+型`
    writes `AB+`; DeepJSONEval zh dev, all 130: a blood type's enum right 8 of 21 times, left whole); none in a
    text without: its words are all there is."""
    if not UNSPACED_TEXT.search(text):
        return []
    return [run for run in (r.strip(EDGE_PUNCTUATION) for r in UNSPACED_APART.findall(text)) if run]


def words(text: str) -> list[str]:
    """Every whitespace-delimited word, without the punctuation around it."""
    found: dict[str, None] = {}
    for word in text.split():
        stripped = word.strip(EDGE_PUNCTUATION)
        for candidate in (stripped, _unnumbered(stripped)):
            if candidate:
                found[candidate] = None
    return list(found)


def _unnumbered(value: str) -> str:
    """`#W365213573` without its number sign (`order #60589`), as a record writes the number; else the value."""
    return value[1:].strip(EDGE_PUNCTUATION) if value[:1] == "#" and value[1:2].isalnum() else value


def spans(text: str, max_words: int = MAX_WORDS) -> list[str]:
    """Every run of up to `max_words` consecutive words inside one sentence of a cell, as the text writes it, with
    and without the punctuation around it (and a last word's possessive `'s`). Words are cut at spaces and em
    dashes (`WORD`).

    The most of grounding's CPU on a long document (a 7,000-character window: ~12,000 runs), so made as cheaply as
    the same list allows: a sentence the text writes again adds nothing new (its runs are all in the list already,
    and the list keeps each run's first appearance), and a run whose first word starts and whose last word ends
    with no punctuation (nor `#`, nor a possessive) is added once, as `_span_forms` would add it three times."""
    out: list[str] = []  # in order of first appearance, repeats and empty strings dropped at the end
    add = out.append
    seen: set[str] = set()
    for cell in sentences_of(text):
        if cell in seen:  # its runs are in `out` already
            continue
        seen.add(cell)
        bounds = [m.span() for m in WORD.finditer(cell)]
        ends = [end for _, end in bounds]
        # a run plain at its start (first word) and at its end (last word) is its own stripped forms
        plain_end = [cell[end - 1] not in EDGE_PUNCTUATION and not cell[start:end].endswith(POSSESSIVE)
                     for start, end in bounds]
        for i, (start, _) in enumerate(bounds):
            last = i + max_words
            if cell[start] not in _NOT_PLAIN_START:
                if all(plain_end[i:last]):
                    out += [cell[start:end] for end in ends[i:last]]
                    continue
                for j, end in enumerate(ends[i:last], i):
                    if plain_end[j]:
                        add(cell[start:end])
                    else:
                        _span_forms(cell[start:end], add)
            else:
                for end in ends[i:last]:
                    _span_forms(cell[start:end], add)
    found = dict.fromkeys(out)
    found.pop("", None)
    return list(found)


_NOT_PLAIN_START = frozenset(EDGE_PUNCTUATION + "#")


def _span_forms(span: str, add: Callable[[str], None]) -> None:
    """One run's forms for `spans`: as written, without the punctuation after it, without that around it, and
    without a number sign, a possessive or the quotes around a bracket's end."""
    right = span.rstrip(EDGE_PUNCTUATION)
    stripped = right.lstrip(EDGE_PUNCTUATION)  # span.strip(EDGE_PUNCTUATION)
    add(span)
    add(right)
    add(stripped)
    if stripped[:1] == "#" and stripped[1:2].isalnum():  # `_unnumbered`
        add(stripped[1:].strip(EDGE_PUNCTUATION))
    if stripped.endswith(POSSESSIVE):
        add(stripped[:-2])
    if span[-1:] in "\"'”’" and span[-2:-1] in ")]}":  # `"... (2022 Edition)"` ends at its bracket
        add(span.strip(EDGE_BUT_BRACKETS))


def cells(text: str) -> list[str]:
    """Every whole cell of every line, as written and without the punctuation around it."""
    found: dict[str, None] = {}
    for cell in cells_of(text):
        for candidate in (cell.strip(), cell.strip().rstrip(".,;:")):
            if candidate:
                found[candidate] = None
    return list(found)


TABLE_CELL_WORDS = 24  # a document none of whose cells is longer is tabular (an invoice); else it is prose


def items(text: str) -> list[str]:
    """A list's strings: whole cells in a tabular document (line items, rows), spans in prose, whose cells are
    whole paragraphs no list item is, or lines of wrapped prose (`schemas.grounding.layout.wrapped`)."""
    tabular = all(len(c.split()) <= TABLE_CELL_WORDS for c in cells_of(text)) and not wrapped(text)
    return cells(text) if tabular else spans(text)


# A letter or digit of a script written with spaces: what may not touch an email, phone number or web address.
# A Chinese, Japanese or Thai character may (`邮箱john.smith@example.com发送`, `电话+86 139 8765 4321这是`): such
# a document writes no space around them (DeepJSONEval zh dev: 0 of its 130 documents' 25 gold emails found).
SPACED_WORD = rf"[^\W{UNSPACED_LETTERS}]"
EMAIL = re.compile(rf"(?<![.%+-])(?<!{SPACED_WORD})[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+"
                   rf"(?![@-])(?!{SPACED_WORD})")
PHONE = re.compile(r"(?<![0-9A-Za-z\u00c0-\u024f_+])\+?(?:\(\d{1,5}\)[ .-]?)?\d[\d .()/-]{5,}\d" rf"(?!{SPACED_WORD})")
NOT_A_PHONE = re.compile(r"\d{4}-\d{1,2}-\d{1,2}|\d{1,2}[./-]\d{1,2}[./-]\d{2,4}|\d+\.\d{1,2}")
URL_CHARS = rf"[^\s<>\"'{UNSPACED_CHARS}]"  # a web address ends where an unspaced script's text begins
URL = re.compile(rf"(?<![@/.-])(?<!{SPACED_WORD})(?:[A-Za-z][A-Za-z0-9+.-]*://|www\.){URL_CHARS}+"
                 rf"|(?<![@/.-])(?<!{SPACED_WORD})[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{{2,}}(?:/{URL_CHARS}*)?"
                 rf"(?!@)(?!{SPACED_WORD})")


def emails(text: str) -> list[str]:
    """Every email address the text writes, without the brackets or stop around it."""
    return list(dict.fromkeys(m.group() for m in EMAIL.finditer(text)))


def phones(text: str) -> list[str]:
    """Every phone number the text writes: a run of 7 to 15 digits with the spaces, dots, dashes, slashes and
    parentheses numbers are written with, maybe after a `+`; a date or a decimal amount is not one."""
    found: dict[str, None] = {}
    for match in PHONE.finditer(text):
        written = match.group().strip(" .-/")
        if 7 <= sum(c.isdigit() for c in written) <= 15 and not NOT_A_PHONE.fullmatch(written):
            found[written] = None
    return list(found)


def urls(text: str) -> list[str]:
    """Every web address the text writes (`https://...`, `www....`, `brightlane.com/help`), without the
    punctuation after it; an email's domain is not one."""
    return list(dict.fromkeys(m.group().rstrip(EDGE_PUNCTUATION) for m in URL.finditer(text)))


NOT_AN_ID = re.compile(r"\d{1,4}[-/.]\d{1,2}[-/.]\d{1,4}|\d{1,2}:\d{2}(?::\d{2})?|-?[\d,]*\.\d+|(?:1[89]|20)\d{2}"
                       r"|\d{1,3}(?:,\d{3})+|\d+(?:st|nd|rd|th|s)|\d{1,4}"
                       r"|(?i:\d+(?:[.,]\d+)?-?(?:inch(?:es)?|in|cm|mm|km|m|kg|g|mg|lbs?|oz|ml|l|kw|w|v|mah|[kmgt]b|"
                       r"[kmg]?hz|mp|px|ft|pcs?|pack|piece|pieces|min|hrs?|h|x|k))")  # a quantity: `16-inch`, `65W`


# What a number's label ends in, in the languages with word lists: `Nr.`, `No.`, `Nº`, `n°`, `núm.`, `#`
# (`n.` with its stop: `Documento n. 2777`), maybe followed by up to two words and a colon (`Numero fattura:`,
# `Nº da fatura:`, `Number of invoice:`): the multilingual job's 4 refused invoice numbers before (it_IT, pt_BR)
NUMBERED = re.compile(r"(?i:(?<![^\W\d_])(?:number|[^\W\d_]*nummer|numéro|número|numero|núm|num|[^\W\d_]*nr|no|n[º°o]"
                      r"|n(?=\.))"
                      r"(?![^\W\d_])\.?(?:(?:[ \t]+[^\W\d_]+){1,2}[ \t]*:)?|#)[ \t]*:?[ \t]*"
                      r"(?P<id>(?=[\w/.-]*\d)[A-Za-z0-9][\w/.-]*[A-Za-z0-9]|\d)")
# A series and a number as two words: `FPR 3715/26`, `RE 2026-0042`
TWO_WORDS = re.compile(r"(?<![\w/-])[A-Z]{1,5} \d[\d/.-]*\d(?![\w/-])")


def identifiers(text: str, locale: Locale = UNKNOWN) -> list[str]:
    """Every word with a digit in it that is not a date, a time, a year, a decimal, a grouped number or a number
    of up to 4 digits (a count, a day): `ORD-2026-18198`, `W365213573`, `64225`, `CS305`; with its number sign
    taken off (`#60589`). And, whatever its shape, what follows a number's label (`Rechnung Nr. 1528`, `Fatura
    nº 56`, `No. 804.089`), and a series and number written as two words (`FPR 3715/26`): the issue-54 report's
    short invoice numbers, which the rule above (chosen on the tickets) refused. A German or Dutch compound label
    ends in its number word (`Rechnungsnummer: 1528`, `Factuurnr. 804`); a document's name in its language (the
    `invoice_number` label phrases of data/<lang>.json) labels the number after it (`Rechnung 1528 vom`, `Betreft:
    factuur 558.882`); and a header row's number label labels the value under it on the next line
    (`Rechnungsnummer   Datum` over `6642   01.06.2026`). These three were found on issue 54's blind euro job
    (lab/experiments/euro_invoices.py: 2 of 42 invoice numbers refused before), written before its finders were
    read."""
    found = [w for w in words(text) if len(w) > 1 and any(c.isdigit() for c in w) and ID_SHAPE.fullmatch(w)
             and not NOT_AN_ID.fullmatch(w)]
    found += [m.group("id").rstrip(".") for m in NUMBERED.finditer(text)]
    found += _after_number_labels(text, locale)
    found += [m.group() for m in TWO_WORDS.finditer(text) if m.group().split()[0] not in all_codes()
              and not re.fullmatch(r"\d+[.,]\d{2}", m.group().split()[1])]
    return list(dict.fromkeys(found))


# What a number label's value may be: a word with a digit, not a date, a time or an amount with two decimals
LABELLED_ID = re.compile(r"[ \t]*[:#]?[ \t]*(?P<id>(?=[\w/.-]*\d)[A-Za-z0-9](?:[\w/.-]*[A-Za-z0-9])?)(?![\w/-])")
NOT_A_LABELLED_ID = re.compile(r"\d{1,4}[-/.]\d{1,2}[-/.]\d{2,4}|\d{1,2}:\d{2}(?::\d{2})?|\d+(?:[.,]\d{3})*[.,]\d{2}")


def _after_number_labels(text: str, locale: Locale) -> list[str]:
    """The values after, or in a header row under, a label the document's languages give a document's number
    (`identifiers`)."""
    pattern, concept_of = phrases(tuple(lang for lang in locale.languages if lang in LANGUAGES))
    if pattern is None:
        return []
    labels = [m for m in pattern.finditer(fold(text)) if not text[m.end():m.end() + 1].isalpha()  # a whole word's
              and concept_of.get(" ".join(m.group().casefold().split())) == "invoice_number"]  # (not `Rechnungs...`)
    labels += [m for m in NUMBER_LABEL.finditer(text)]
    found: list[str] = []
    for label in labels:
        value = LABELLED_ID.match(text, label.end())
        if value and not NOT_A_LABELLED_ID.fullmatch(value.group("id")):
            found.append(value.group("id").rstrip("."))
        found += _under(text, label.start(), label.end())
    return found


# A number label alone (`NUMBERED` without its value), for a header row: `Rechnungsnummer`, `Re.-Nr.`, `Nº`
NUMBER_LABEL = re.compile(r"(?i:(?<![^\W\d_])(?:number|[^\W\d_]*nummer|numéro|número|numero|[^\W\d_]*nr"
                          r"|n[º°o])(?![^\W\d_])\.?)")


def _under(text: str, start: int, end: int) -> list[str]:
    """The id-like word on the next line under a label's columns (start..end), where the label's line is a header
    row: no digit in it."""
    line_start = text.rfind("\n", 0, start) + 1
    line_end = text.find("\n", end)
    if line_end < 0 or any(c.isdigit() for c in text[line_start:line_end]):
        return []
    next_end = text.find("\n", line_end + 1)
    below = text[line_end + 1:len(text) if next_end < 0 else next_end]
    left, right = start - line_start, end - line_start
    found = []
    for word in re.finditer(r"\S+(?: \S+)?", below):  # a cell: words one space apart
        if word.start() < right and word.end() > left:
            value = word.group().strip(EDGE_PUNCTUATION)
            if any(c.isdigit() for c in value) and ID_SHAPE.fullmatch(value) and not \
                    NOT_A_LABELLED_ID.fullmatch(value):
                found.append(value)
    return found


# A kind whose finder finds nothing (or nothing the field allows) falls back to a wider one, and a field none
# finds anything for keeps its plain type: grounding narrows, it never forbids.
FALLBACK = {"money": "number", "id": "text", "currency": "text"}


# `code`, `item` and the named kinds are only inferred (auto): an enum of codes, the strings of a list, and a
# plain string whose name says it holds an email, phone number or web address; none is a mark.
LOCALE_FINDERS = {"number": numbers, "date": dates, "money": money, "code": codes, "currency": currencies,
                  "place": places, "id": identifiers}
FINDERS = {"number": numbers, "date": dates, "word": words, "text": spans, "cell": cells, "code": codes,
           "item": items, "email": emails, "phone": phones, "url": urls, "money": money, "id": identifiers,
           "currency": currencies, "duration": durations, "place": places}


def finder(kind: str, locale: Locale = UNKNOWN) -> Callable[[str], list[Any]]:
    """The kind's finder reading by `locale` (the finders of other kinds read no locale)."""
    found = FINDERS[kind]
    return partial(found, locale=locale) if kind in LOCALE_FINDERS else found
