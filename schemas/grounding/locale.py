"""A document's locale, as grounding reads it: its language (for month names and word lists), and where the job
says so, its territory (for the decimal mark, the date order and which currency a `$` means).

`input.locale` (or `schema_policy.grounding.locale`): `auto` detects the language of each document with lingua
(`lingua-language-detector`, low-accuracy mode, restricted to the languages that have word lists here: about
0.5 ms for 2,000 characters after a one-off 0.5 s load); a locale such as `de_DE` or `pt_BR` sets it. A detected
language never decides an ambiguous form by itself (a misdetected English invoice must keep `1,234` as 1234):
the document's own unambiguous forms do (`finders.numbers`), and a locale the job sets does.

The CLDR data come from Babel: decimal and group symbols, month names, the order of a short date, and the symbols
currencies are written with. The word lists (money words, placeholders, abbreviations, currency names) are data,
one JSON file per language in `schemas/grounding/data/`.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

DATA = Path(__file__).with_name("data")
LANGUAGES = ("en", "de", "fr", "es", "it", "nl", "pt", "zh")  # the languages with word lists (data/<lang>.json)
AUTO = "auto"


@dataclass(frozen=True)
class Locale:
    """What grounding knows of a document's locale. `decided`: the job set it (it decides ambiguous forms);
    a detected language only chooses word lists and month names."""

    language: str | None = None
    territory: str | None = None
    decided: bool = False
    mark: str | None = None  # the decimal mark the document's own unambiguous numbers use (`numbers.evidence`)

    @property
    def languages(self) -> tuple[str, ...]:
        """The languages whose words the finders read: the document's and English (labels and codes are often
        English), or every language with data where the language is unknown."""
        if self.language in LANGUAGES:
            return tuple(dict.fromkeys((self.language, "en")))
        return LANGUAGES

    @property
    def decimal(self) -> str | None:
        """The decimal mark a set locale writes (`,` for de_DE, `.` for en_US), else the one the document's own
        unambiguous numbers use (`mark`), else None (undecided: an ambiguous `1.234` keeps both readings)."""
        return _symbols(self.tag)[0] if self.decided and self.tag else self.mark

    @property
    def day_first(self) -> bool | None:
        """Whether a set locale writes a numeric date day first (de, fr, en_GB) or month first (en_US); None
        where the locale does not decide (then 01/02/2026 keeps both readings)."""
        return _day_first(self.tag) if self.decided and self.tag else None

    @property
    def tag(self) -> str | None:
        if not self.language:
            return None
        return f"{self.language}_{self.territory}" if self.territory else self.language


UNKNOWN = Locale()
TAG = re.compile(r"([a-z]{2,3})(?:[_-]([A-Za-z]{2}|\d{3}))?")


def parse_locale(value: str | None) -> Locale | None:
    """`de_DE`, `pt-BR`, `fr` → a set Locale; `auto` or None → None (detect per document). A clear error for
    anything else."""
    if value is None or value == AUTO:
        return None
    match = TAG.fullmatch(value.strip())
    if not match:
        raise ValueError(f"locale {value!r} is neither 'auto' nor a locale such as de_DE, pt_BR or fr")
    language, territory = match.group(1), match.group(2)
    return Locale(language, territory.upper() if territory else None, decided=True)


def resolve(setting: str | Locale | None, document: str) -> Locale:
    """The locale to read `document` by: the job's, or the language lingua detects (`UNKNOWN` when unsure)."""
    if isinstance(setting, Locale):
        return setting
    parsed = parse_locale(setting)
    return parsed if parsed is not None else detect(document)


def detect(document: str) -> Locale:
    """The document's language among `LANGUAGES` (lingua, first 2,000 characters), or UNKNOWN."""
    return _detected(document[:2000])


@lru_cache(maxsize=4)
def _detected(sample: str) -> Locale:
    """`detect` of a document's first 2,000 characters: a windowed document's first window and the whole document
    (its merged record's spans) begin alike, and are detected once."""
    if not re.search(r"[^\W\d_]{3}", sample):
        return UNKNOWN
    found = _detector().detect_language_of(sample)
    if found is None:
        return UNKNOWN
    code = found.iso_code_639_1.name.lower()
    return Locale(code) if code in LANGUAGES else UNKNOWN


@lru_cache(maxsize=1)
def _detector() -> Any:
    from lingua import IsoCode639_1, LanguageDetectorBuilder

    codes = [getattr(IsoCode639_1, code.upper()) for code in LANGUAGES]
    return LanguageDetectorBuilder.from_iso_codes_639_1(*codes).with_low_accuracy_mode().build()


@lru_cache(maxsize=32)
def likely_territory(language: str) -> str | None:
    """The territory CLDR deems likeliest for a language (`zh` → CN, `pt` → BR), for ordering a `¥` or `$`."""
    from babel.core import get_global

    subtags = get_global("likely_subtags").get(language, "")
    parts = [p for p in subtags.split("_") if len(p) == 2 and p.isupper()]
    return parts[0] if parts else None


def language_mark(locale: Locale) -> str | None:
    """The decimal mark CLDR gives the locale's language (`,` for de, `.` for en), or None without one."""
    return _symbols(locale.language)[0] if locale.language else None


@lru_cache(maxsize=64)
def _symbols(tag: str) -> tuple[str, str]:
    from babel.numbers import get_decimal_symbol, get_group_symbol

    return get_decimal_symbol(tag), get_group_symbol(tag)


@lru_cache(maxsize=64)
def _day_first(tag: str) -> bool | None:
    from babel.dates import get_date_format

    pattern = get_date_format("short", locale=tag).pattern
    day, month = pattern.find("d"), pattern.find("M")
    return None if day < 0 or month < 0 else day < month


@lru_cache(maxsize=16)
def words(language: str) -> dict[str, Any]:
    """The word lists of one language (data/<language>.json); empty lists for a language without data."""
    path = DATA / f"{language}.json"
    if not path.exists():
        return {"money_words": [], "placeholders": [], "abbreviations": [], "currency_names": {}}
    return json.loads(path.read_text(encoding="utf-8"))


def word_list(locale: Locale, key: str) -> list[str]:
    """One word list (`money_words`, `placeholders`, `abbreviations`) over the locale's languages."""
    return list(dict.fromkeys(w for lang in locale.languages for w in words(lang)[key]))


@lru_cache(maxsize=16)
def month_names(languages: tuple[str, ...]) -> dict[str, tuple[int, ...]]:
    """Month name (lower case, without its stop) → the months it names, from CLDR through Babel: wide and
    abbreviated, format and stand-alone forms of each language (`januar`, `janv`, `enero`, `mrt`, `sept`)."""
    from babel.dates import get_month_names

    found: dict[str, set[int]] = {}
    for tag in (t for language in languages for t in _regional(language)):
        for width in ("wide", "abbreviated"):
            for context in ("format", "stand-alone"):
                for month, name in get_month_names(width, context, locale=tag).items():
                    key = name.lower().rstrip(".")
                    if not key.isdigit() and not re.search(r"\d", key):
                        found.setdefault(key, set()).add(month)
    found.setdefault("sept", set()).add(9)  # English writes `Sept.` beside CLDR's `Sep`
    return {name: tuple(sorted(months)) for name, months in found.items()}


@lru_cache(maxsize=16)
def _regional(language: str) -> tuple[str, ...]:
    """The language and its territories' CLDR locales (`de`, `de_AT`, `de_CH`, ...): a region's own month names
    are the language's but for a few (Austria's `Jänner`, `Jän.`; Peru's and Uruguay's `setiembre`), which a
    document from there writes (`15. Jänner 2026` was no date: a spot check of Austrian forms after issue 54's
    blind euro job)."""
    from babel import localedata

    pattern = re.compile(rf"{re.escape(language)}_[A-Z]{{2}}")
    return (language, *sorted(t for t in localedata.locale_identifiers() if pattern.fullmatch(t)))
