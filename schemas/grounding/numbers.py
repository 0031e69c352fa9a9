"""Numbers, amounts and currencies as a document writes them, in any of the usual conventions.

A number is read with its offsets (`readings`). `1.234,56` and `1,234.56` are both 1234.56 (the mark written
last, once, is the decimal one); `1 234,56`, `2'450` and `1.180,-` are 1234.56, 2450 and 1180. A form that two
conventions read differently (`1.234`, `1,234`, `12,50` and `1 420`, which may be two numbers) keeps both
readings unless something decides: a locale the job sets (its CLDR decimal mark, through Babel), or the document
itself, when its unambiguous forms all use one decimal mark. This rule was chosen on the issue-54 report's
forms (de, fr, es, it, nl, pt-BR invoices and rentals); on the English sample (52 invoices, tuned for none of
it) every `1,450.61` reads as before and each unambiguous `1,234` still reads 1234 once the document writes
`x.xx` anywhere.

An amount is a number with a currency next to it on its line (a symbol, an ISO code or a currency's name: `€`,
`R$`, `CHF`, `EUR`, `euros`, `元`), a number with two decimals, or one after a money word of the document's
language (`Total`, `Gesamtbetrag`, `importe`, `合计`: data/<lang>.json). `currencies` gives the ISO 4217 codes
the document's symbols and names are evidence of (`€` → EUR, `R$` → BRL, `US$` → USD), from CLDR's symbols.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Callable
from functools import lru_cache

from schemas.cells import PER_TEXT_KEPT
from schemas.grounding.locale import LANGUAGES, UNKNOWN, Locale, likely_territory, words

Reading = tuple[float | int, int, int]  # (value, start, end)
SPACE = " \u00a0\u202f"
# A run of digit groups joined by one mark each (`.`, `,`, `'`, `’` or a space before exactly three digits)
TOKEN = re.compile(r"(?<![0-9A-Za-z\u00c0-\u024f_.,'’])[-−]?\d+"
                   r"(?:(?:[.,'’]|[ \u00a0\u202f](?=\d{3}(?!\d)))\d+)*(?P<dash>,-+)?")
GROUPED = re.compile(r"\d{1,3}(?:(?P<g>[.,'’ \u00a0\u202f])\d{3})(?:(?P=g)\d{3})*")


def readings(text: str, locale: Locale = UNKNOWN) -> list[Reading]:
    """Every number the text writes, each reading of it, with its offsets, in order."""
    tokens = _tokens(text)
    decimal = locale.decimal or evidence([t for t, *_ in tokens])
    found: list[Reading] = []
    for _token, start, end, dashed in tokens:
        written = text[start:end]
        values = _values(written, "," if dashed else decimal)
        found.extend((v, start, end) for v in values)
        scale, scale_end = MULTIPLIERS.get(text[end:end + 1]), end + 1
        word = SCALE_WORD.match(text, end)
        if word:
            scale, scale_end = SCALE_WORDS[word.group(1).lower()], word.end()
        if scale:  # `1750万`, `17.5 million` are 17,500,000 (both readings kept: the digits are written too)
            found.extend((_scaled(v, scale), start, scale_end) for v in values)
        if not written.isdigit() and any(c in SPACE for c in written) and locale.decimal is None:
            found.extend(_pieces(written, start))  # `2 100.00` may be a quantity and a price
    return found


@lru_cache(maxsize=PER_TEXT_KEPT)
def _tokens(text: str) -> tuple[tuple[str, int, int, bool], ...]:
    """(the token as written, its start, its end without a `,-`, whether it has one) of each `TOKEN` the text writes:
    scanned once per text (a document's decimal mark, `decimal_mark`, and its readings read the same tokens)."""
    return tuple((m.group(), m.start(), m.end() - len(m.group("dash") or ""), bool(m.group("dash")))
                 for m in TOKEN.finditer(text))


# A Chinese or Japanese multiplier after the digits (DeepJSONEval zh dev: players `1750万`, 4 of 446 gold leaves)
MULTIPLIERS = {"万": 10_000, "萬": 10_000, "亿": 100_000_000, "億": 100_000_000}
# And English's scale words (DeepJSONEval en, all 136: players `17.5 million`, 1 of 1724 gold leaves)
SCALE_WORDS = {"thousand": 1_000, "million": 1_000_000, "billion": 1_000_000_000, "trillion": 1_000_000_000_000}
SCALE_WORD = re.compile(r"[ \u00a0]?(thousand|million|billion|trillion)(?![^\W\d_])", re.IGNORECASE)


def _scaled(value: float | int, scale: int) -> float | int:
    product = round(value * scale, 6)
    return int(product) if float(product).is_integer() else product


def numbers(text: str, locale: Locale = UNKNOWN) -> list[float | int]:
    """Every number the text writes, each reading once, in order of first appearance."""
    return _unique(v for v, _, _ in readings(text, locale))


def _unique(values) -> list[float | int]:
    found: dict[str, float | int] = {}
    for value in values:
        found.setdefault(repr(float(value)), value)
    return list(found.values())


def decimal_mark(text: str) -> str | None:
    """The decimal mark the text's unambiguous numbers use, or None (`evidence`)."""
    return evidence([t for t, *_ in _tokens(text)])


def evidence(tokens: list[str]) -> str | None:
    """The decimal mark the document's unambiguous numbers use (`1.234,56`, `12,50` → `,`; `3.5`, `1,234.56` →
    `.`), or None where it writes none or both."""
    votes = {".": 0, ",": 0}
    for token in tokens:
        mark = _unambiguous_decimal(token.lstrip("-−"))
        if mark:
            votes[mark] += 1
    if votes["."] and votes[","]:
        return "." if votes["."] >= 3 * votes[","] else "," if votes[","] >= 3 * votes["."] else None
    return "." if votes["."] else "," if votes[","] else None


def _unambiguous_decimal(token: str) -> str | None:
    if "." not in token and "," not in token:  # most tokens: digits alone (the same answer, sooner)
        return None
    marks = [c for c in token if c in ".,"]
    if not marks:
        return None
    last = marks[-1]
    head, _, tail = token.rpartition(last)
    if marks.count(last) != 1 or not tail.isdigit():
        return None
    if len(marks) > 1 or any(c in "'’" + SPACE for c in head):  # 1.234,56 / 1,234.56 / 2'450.50
        return last if GROUPED.fullmatch(head) else None
    return last if len(tail) != 3 and head.isdigit() and len(tail) <= 4 else None


def _values(written: str, decimal: str | None) -> list[float | int]:
    """The readings of one token under a decimal mark (None: every plausible one)."""
    sign = -1 if written[:1] in "-−" else 1
    body = written.lstrip("-−")
    if body.isdigit():  # no mark (most tokens): the same answer as below, sooner
        return [sign * int(body)]
    marks = [c for c in body if not c.isdigit()]
    if not marks:
        return [sign * int(body)]
    if GROUPED.fullmatch(body) and (len(set(marks)) == 1) and not _leading_zero(body):
        grouped = sign * int(re.sub(r"\D", "", body))
        if len(marks) > 1 or marks[0] in "'’" + SPACE:
            return [grouped]
        head, tail = body.split(marks[0])
        as_decimal = sign * float(f"{head}.{tail}")
        if head.startswith("0"):
            return [as_decimal]
        return [as_decimal] if decimal == marks[0] else [grouped] if decimal else [grouped, as_decimal]
    last = marks[-1]
    head, _, tail = body.rpartition(last)
    if last in ".," and marks.count(last) == 1 and (decimal in (None, last)) and (
            head.isdigit() or (GROUPED.fullmatch(head) and last not in head)):
        return [sign * float(re.sub(r"\D", "", head) + "." + tail)]
    return [int(p) for p in re.split(r"\D+", body) if p]  # 15.01.2026, 12,50 in an English document: its parts


def _leading_zero(body: str) -> bool:
    """Whether a run of groups starts with a zero no grouped number writes (`031 312`, a Swiss phone number's
    start; `0,50` and `0.5` are decimals, not groups)."""
    return body[0] == "0" and body[1:2].isdigit()


def parts(written: str, decimal: str | None) -> bool:
    """Whether a token reads as its parts, not as one number (`15.01.2026`, `0585.069.323`, `031 312`): no part of
    an identifier, a date or a phone number is an amount."""
    values = _values(written, decimal)  # several integers: its parts (`_values`' last case), not the readings of
    return len(values) > 1 and all(isinstance(v, int) for v in values)  # an ambiguous form (1234 and 1.234)


def _pieces(written: str, start: int) -> list[Reading]:
    found, offset = [], start
    for piece in re.split(f"([{SPACE}])", written):
        if piece and piece not in SPACE:
            found.extend((v, offset, offset + len(piece)) for v in _values(piece, None))
        offset += len(piece)
    return found


# --- currencies -------------------------------------------------------------------------------------------------

# Locales whose own currency's symbol CLDR gives (`$` is USD in en_US, CAD in en_CA...): the first listed wins the
# first place among a symbol's codes, so `$` offers USD first, then the other dollars.
SYMBOL_LOCALES = ("en_US", "en_GB", "de_DE", "ja_JP", "zh_CN", "pt_BR", "en_IN", "de_CH", "en_CA", "en_AU", "es_MX",
                  "en_NZ", "en_SG", "zh_HK", "sv_SE", "nb_NO", "da_DK", "pl_PL", "cs_CZ", "ko_KR", "ru_RU", "tr_TR",
                  "he_IL", "th_TH", "vi_VN", "fil_PH", "ms_MY", "es_AR", "es_CL", "es_CO", "hu_HU", "en_ZA")
# Codes whose prefixed symbols (`US$`, `R$`, `CA$`, `HK$`, `A$`, `MX$`) CLDR writes in other locales
PREFIXED_CODES = ("USD", "EUR", "GBP", "JPY", "CNY", "BRL", "CAD", "AUD", "HKD", "NZD", "MXN", "INR", "CHF", "SGD")


@lru_cache(maxsize=1)
def symbol_codes() -> dict[str, tuple[str, ...]]:
    """Currency symbol → the ISO 4217 codes CLDR writes with it (through Babel), most common first."""
    from babel import Locale as BabelLocale
    from babel.numbers import get_currency_symbol, get_territory_currencies

    found: dict[str, list[str]] = {}
    for tag in SYMBOL_LOCALES:
        code = get_territory_currencies(BabelLocale.parse(tag).territory)[0]
        symbol = get_currency_symbol(code, tag)
        if symbol != code:
            found.setdefault(symbol, []).append(code)
        for other in PREFIXED_CODES:
            written = get_currency_symbol(other, tag)
            if written != other and (len(written) > 1 or written in "€£¥"):
                found.setdefault(written, []).append(other)
    found.setdefault("Fr.", []).append("CHF")
    return {symbol: tuple(dict.fromkeys(codes)) for symbol, codes in found.items()}


@lru_cache(maxsize=1)
def all_codes() -> frozenset[str]:
    """The ISO 4217 codes some territory uses today (CLDR through Babel): not a withdrawn `PLZ`, which is also
    how a German address writes its postcode's label."""
    from babel.core import get_global
    from babel.numbers import get_territory_currencies

    return frozenset(code for territory in get_global("territory_currencies")
                     for code in get_territory_currencies(territory, tender=True))


@lru_cache(maxsize=16)
def currency_pattern(languages: tuple[str, ...]) -> re.Pattern[str]:
    """A currency mark: a symbol (longest first), an ISO code, or a currency's name in one of the languages."""
    symbols = sorted(symbol_codes(), key=len, reverse=True)
    alpha = [re.escape(s) for s in symbols if s[-1].isalpha()]
    other = [re.escape(s) for s in symbols if not s[-1].isalpha()]
    names = sorted({n for lang in languages for n in words(lang)["currency_names"]}, key=len, reverse=True)
    word_like = [*alpha, *(re.escape(n) for n in names if n[0].isalpha() and n.isascii())]
    loose = [*other, *(re.escape(n) for n in names if not n.isascii())]
    # A mark's first character looked for before its alternatives are tried one by one (half a long document's
    # currency scan): a loose one's, a code's (`[A-Z]`) or, as `(?i:...)` matches it, a word-like one's
    initials = rf"(?=[{_initials(loose)}A-Z]|(?i:[{_initials(word_like)}]))"
    # `[A-Z]{3}` stands for the ISO codes: `_code_of` keeps those that are codes (an alternation of all 300 was
    # most of grounding's cost per document)
    marks = rf"{'|'.join(loose)}|\b(?:[A-Z]{{3}}|(?i:{'|'.join(word_like)}))(?![^\W\d_])"
    return re.compile(rf"{initials}(?P<cur>{marks})")


def _initials(escaped: list[str]) -> str:
    """The first characters of regular expressions of literal text (`re.escape`d), for a character class."""
    return "".join(sorted({e[:2] if e[:1] == "\\" else e[:1] for e in escaped if e}))


@lru_cache(maxsize=PER_TEXT_KEPT)
def _marks(text: str, languages: tuple[str, ...]) -> tuple[tuple[str, int, int], ...]:
    """(the mark, its start, its end) of each `currency_pattern` match: scanned once per text and languages (a
    document's currencies and its amounts, `_beside_marks`, read the same marks)."""
    return tuple((m.group("cur"), m.start(), m.end()) for m in currency_pattern(languages).finditer(text))


@lru_cache(maxsize=4096)
def _code_of(mark: str, languages: tuple[str, ...]) -> tuple[str, ...]:
    if mark in symbol_codes():
        return symbol_codes()[mark]
    if mark.upper() in all_codes() and mark.isupper():
        return (mark,)
    for lang in languages:
        code = words(lang)["currency_names"].get(mark.lower())
        if code:
            return (code,)
    return ()


def currencies(text: str, locale: Locale = UNKNOWN) -> list[str]:
    """The ISO 4217 codes the text writes or is evidence of, in order: `EUR` and `€` → EUR, `R$` → BRL, `$` →
    USD then the other dollars, unless the document writes one of them as a code or a set territory decides
    (en_CA's `$` is CAD). The rule that a written code decides a symbol was chosen on the English sample (its
    `$` invoices write `USD` or `CAD` too); on the issue-54 report's European documents it changes nothing."""
    readings_ = [codes for mark, start, end in _marks(text, locale.languages)
                 if (codes := _code_of(mark, locale.languages))
                 and (len(mark) > 1 or not mark.isalpha() or _beside_number(text, start, end))]
    sure = {codes[0] for codes in readings_ if len(codes) == 1}
    found: list[str] = []
    for codes in readings_:
        if len(codes) > 1 and sure & set(codes):  # `$` beside a written `CAD`: the document decides
            codes = tuple(c for c in codes if c in sure)
        territory = locale.territory or (likely_territory(locale.language) if locale.language else None)
        local = _local_currency(territory) if territory and len(codes) > 1 else None
        if local in codes:  # a set territory decides (en_CA's `$` is CAD); a detected language orders (zh: CNY first)
            codes = (local,) if locale.decided and locale.territory else (local, *(c for c in codes if c != local))
        found.extend(codes)
    return list(dict.fromkeys(found))


def _beside_number(text: str, start: int, end: int) -> bool:
    """Whether a digit stands right before or after a mark (one space between at most): a one-letter symbol (`R`,
    South Africa's rand) is evidence only beside an amount (`R 1 250,00`), not as a word's initial (`R-5285`, an
    invoice number: issue 54's blind euro job offered ZAR beside CHF)."""
    after = text[end:end + 2].lstrip(SPACE)[:1]
    before = text[max(start - 2, 0):start].rstrip(SPACE)[-1:]
    return after.isdigit() or before.isdigit()


@lru_cache(maxsize=32)
def _local_currency(territory: str) -> str | None:
    from babel.numbers import get_territory_currencies

    found = get_territory_currencies(territory)
    return found[0] if found else None


# --- money ------------------------------------------------------------------------------------------------------



def money(text: str, locale: Locale = UNKNOWN) -> list[float | int]:
    """Every amount the text writes as money (beside a currency, with two decimals, or after a money word of the
    document's languages), each reading once, in order of first appearance."""
    return _unique(v for v, _, _ in money_readings(text, locale))


def money_readings(text: str, locale: Locale = UNKNOWN, found: list[Reading] | None = None,
                   dates: list[tuple[str, int, int]] | None = None) -> list[Reading]:
    """The readings (`readings`, or `found`) that are amounts, with their offsets; a number inside a date the
    text writes (`dates`: `schemas.grounding.dates.readings`) is none, even after a money word (`Betrag bis zum
    18. März 2026`: 18 was an amount before; issue 54's blind euro job, where a total kept only a due date's day), and
    nor is a part of a token that reads as its parts (`parts`: `TVA BE 0585.069.323`, `MWST · Tel. 031 312 88 10`)."""
    found = readings(text, locale) if found is None else found
    if not found:
        return []
    if dates is None:
        from schemas.grounding.dates import readings as date_readings

        dates = date_readings(text, locale)
    starts, ends = _beside_marks(text, locale)
    words_ = _money_words(locale.languages)
    inside = _inside(dates)
    decimal = locale.decimal or evidence([t for t, *_ in _tokens(text)])
    split = {(start, end) for token, start, end, dashed in _tokens(text) if not dashed and parts(token, decimal)}
    return [(v, start, end) for v, start, end in found if not inside(start, end) and (start, end) not in split and (
        start in starts or end in ends or _two_decimals(text, start, end) or _after_word(text, start, words_))]


def _inside(spans: list[tuple[str, int, int]]) -> Callable[[int, int], bool]:
    """Whether (start, end) lies inside one of the spans (`(_, start, end)`, in any order)."""
    ordered = sorted((start, end) for _, start, end in spans)
    firsts = [start for start, _ in ordered]
    reach: list[int] = []  # the furthest end of the spans up to each one
    for _, end in ordered:
        reach.append(max(end, reach[-1]) if reach else end)

    def inside(start: int, end: int) -> bool:
        at = bisect_right(firsts, start) - 1
        return at >= 0 and reach[at] >= end
    return inside


def _beside_marks(text: str, locale: Locale) -> tuple[set[int], set[int]]:
    """(offsets where a number beside a currency mark starts, offsets where one ends): right after a mark or one
    space after it, right before one or one space before it; never across a newline."""
    starts: set[int] = set()
    ends: set[int] = set()
    for mark, start, end in _marks(text, locale.languages):
        if not _code_of(mark, locale.languages):
            continue
        starts.update((end, end + 1) if text[end:end + 1] in SPACE and text[end:end + 1] else (end,))
        ends.update((start, start - 1) if start and text[start - 1] in SPACE else (start,))
    return starts, ends


def _two_decimals(text: str, start: int, end: int) -> bool:
    return bool(re.search(r"[.,]\d{2}$", text[start:end])) or text[end:end + 2] == ",-"


@lru_cache(maxsize=16)
def _money_words(languages: tuple[str, ...]) -> re.Pattern[str]:
    listed = sorted({w for lang in languages for w in words(lang)["money_words"]}, key=len, reverse=True)
    return re.compile(r"(?<![^\W\d_])(?i:" + "|".join(re.escape(w) for w in listed) + r")[^\n\d!?;]{0,32}$")


def _after_word(text: str, start: int, pattern: re.Pattern[str]) -> bool:
    line_start = max(text.rfind("\n", 0, start) + 1, start - 48)
    return bool(pattern.search(text[line_start:start]))


__all__ = ["LANGUAGES", "currencies", "money", "numbers", "readings", "symbol_codes"]
