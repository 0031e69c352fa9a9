"""Places a document names, for a field that holds a place (a jurisdiction, a governing law, a country, a province).

A free-text field decoded as runs of the document's words (`schemas.substring`) lets a small model write any run:
asked for a contract's `jurisdiction`, the bundled 135M model starts writing the field's own name again, and the
grammar turns that into the nearest run that starts the same way (`joint`, `January`: Kleister NDA train, issue
56, 0 of 16 jurisdictions right, no window wrote the state). A field that holds a place is instead offered the
places the document names, as an enum: the model chooses among `Delaware`, `New York` and `United States`.

- **Which fields**: by the field's name as English users write it (`jurisdiction`, `governing_law`, `country`,
  `province`, ...: key `place_fields` of `data/en.json`, the whole name's words or its last word). Only a plain
  text field (kind `text`); `x-grounded: false` opts out.
- **Which places**: a gazetteer of countries and first-level subdivisions (states, provinces, Länder, cantons,
  regions): ISO 3166 through `pycountry` (subdivision names as ISO writes them, `Bayern`, with their translations
  into the document's languages, `Bavaria`), and CLDR's country names in the document's languages through Babel
  (`Deutschland`, `Allemagne`, `Alemania`). A name counts where the document writes it as a name: its first letter
  upper case, and, for a one-word subdivision, the document nowhere writing that word in lower case (`Central` and
  `Centre` are subdivisions of some country, and common words where a document writes `central`; a country is
  kept: French writes `droit suisse` beside `Suisse`). A one-word name that starts a longer one is a word of
  it, not a place (`North` of `North Carolina`, `New` of `New York`).
- **The value**: the gazetteer's name as the document's language (or English) writes it (`DELAWARE` → `Delaware`).
- **Never forbids**: a document (or window) that names no place leaves the field its plain type (a string of at
  most 64 characters, or null; a nullable field's value the model is unsure of is null: `schemas.grounding.unsure`).
"""

from __future__ import annotations

import gettext
import re
from functools import lru_cache
from typing import Any

from schemas.grounding.locale import UNKNOWN, Locale, words

try:  # ISO 3166-1/-2 names and their translations (a well-kept, pure-Python package)
    import pycountry
except ImportError:  # pragma: no cover - the project depends on it; without it, CLDR's country names only
    pycountry = None

PLACE_KIND = "place"
# A word of a name: letters, maybe joined by a hyphen or apostrophe (`Île-de-France`, `Côte d'Ivoire`); a stop
# (`St. Gallen`) or comma is no part of the key
WORD = re.compile(r"[^\W\d_]+(?:['’-][^\W\d_]+)*")
MIN_LETTERS = 4  # a shorter name (`Ga`, `Bar`, `Ain`) is more often something else
NAME_TOKENS = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+")


def _key(name: str) -> tuple[str, ...]:
    return tuple(w.casefold() for w in WORD.findall(name))


@lru_cache(maxsize=16)
def gazetteer(languages: tuple[str, ...]) -> dict[tuple[str, ...], str]:
    """A place's name, as its words in lower case → the name as written (the first language's form where two give
    one key): ISO 3166 countries and first-level subdivisions (pycountry, with their translations into `languages`)
    and CLDR's country names in `languages` (Babel)."""
    return {key: name for key, (name, _) in _names(languages).items()}


@lru_cache(maxsize=16)
def _names(languages: tuple[str, ...]) -> dict[tuple[str, ...], tuple[str, bool]]:
    """`gazetteer`, each name with whether it names a country (or else a subdivision)."""
    names: list[tuple[str, bool]] = []
    if pycountry is not None:
        for language in languages:
            for domain, entries in (("iso3166-1", pycountry.countries), ("iso3166-2", _top_subdivisions())):
                translate = _translation(domain, language)
                for entry in entries:
                    for attribute in ("common_name", "name", "official_name"):
                        own = getattr(entry, attribute, None)
                        if own:
                            names += [(translate(own), domain == "iso3166-1"), (own, domain == "iso3166-1")]
    from babel import Locale as BabelLocale

    for language in languages:
        try:
            territories = BabelLocale.parse(language).territories
        except (ValueError, TypeError):  # a language CLDR does not know
            continue
        names += [(name, True) for code, name in territories.items() if len(code) == 2 and code.isalpha()
                  and code not in NOT_COUNTRIES]
    found: dict[tuple[str, ...], tuple[str, bool]] = {}
    for name, country in names:
        key = _key(name)
        if key and sum(len(w) for w in key) >= MIN_LETTERS:
            found.setdefault(key, (name, country))
    starts = {key[0] for key in found if len(key) > 1}  # `North` of `North Carolina`, `New` of `New York`
    return {key: named for key, named in found.items() if len(key) > 1 or key[0] not in starts}


# CLDR territories with two-letter codes that are no country a document names as a place of law
NOT_COUNTRIES = frozenset({"EU", "EZ", "UN", "QO", "XA", "XB", "XK", "ZZ"})


# Subdivisions too small to be a place of law, whose names are most often a town's or a word's (`Portland`, a
# parish of Jamaica; `Charlotte`, one of Saint Vincent): ISO 3166-2 types left out
LOCAL_TYPES = frozenset({"municipality", "local council", "parish", "rayon", "city with county rights", "popularate",
                         "administrative atoll", "quarter", "special municipality", "commune", "urban municipality",
                         "town", "borough", "ward", "town council", "island council", "administrative precinct"})


@lru_cache(maxsize=1)
def _top_subdivisions() -> tuple[Any, ...]:
    return tuple(s for s in pycountry.subdivisions if getattr(s, "parent_code", None) is None
                 and str(getattr(s, "type", "")).casefold() not in LOCAL_TYPES)


@lru_cache(maxsize=32)
def _translation(domain: str, language: str) -> Any:
    try:
        return gettext.translation(domain, pycountry.LOCALES_DIR, languages=[language]).gettext
    except OSError:  # no translation into this language
        return lambda name: name


@lru_cache(maxsize=16)
def _lengths(languages: tuple[str, ...]) -> dict[str, tuple[int, ...]]:
    """A name's first word → the lengths (in words) of the names it starts, longest first."""
    found: dict[str, set[int]] = {}
    for key in gazetteer(languages):
        found.setdefault(key[0], set()).add(len(key))
    return {word: tuple(sorted(lengths, reverse=True)) for word, lengths in found.items()}


def places(text: str, locale: Locale = UNKNOWN) -> list[str]:
    """Every place of the gazetteer the text names (longest name first at each word: `New York` before `York`), as
    the gazetteer writes it, in order of first appearance."""
    languages = locale.languages
    names, lengths = _names(languages), _lengths(languages)
    tokens = [(m.group(), m.group().casefold()) for m in WORD.finditer(text)]
    lower = {folded for written, folded in tokens if written[:1].islower()}
    found: dict[str, None] = {}
    i = 0
    while i < len(tokens):
        written, folded = tokens[i]
        step = 1
        if written[:1].isupper():
            for n in lengths.get(folded, ()):
                named = names.get(tuple(f for _, f in tokens[i:i + n])) if i + n <= len(tokens) else None
                if named is not None and (n > 1 or named[1] or folded not in lower):
                    found[named[0]] = None
                    step = n
                    break
        i += step
    return list(found)


def holds_place(name: str | None) -> bool:
    """Whether a field's name says it holds a place (`jurisdiction`, `governing_law`, `Country`, `province`;
    `place_fields` of `data/en.json`): its whole name's words, or its last word, listed there."""
    listed = {" ".join(phrase.split()) for phrase in words("en").get("place_fields", [])}
    name_words = [w.lower() for w in NAME_TOKENS.findall(name or "")]
    return bool(name_words) and (" ".join(name_words) in listed or name_words[-1] in listed)


def place_kind(kind: str, name: str | None) -> str:
    """`place` for a free-text field that holds a place (`holds_place`): its candidates are the places the document
    names (and null where the field allows it), not runs of its words; else `kind`. Where the document names no
    place, the field keeps its plain type, as any field whose finder finds nothing (`schemas.grounding.core`): a
    nullable one is marked free, and a value the model is unsure of there is null (`schemas.grounding.unsure`),
    where runs of its words would have turned the model's start of a name into the nearest run (`J` → `joint`)."""
    return PLACE_KIND if kind == "text" and holds_place(name) else kind
