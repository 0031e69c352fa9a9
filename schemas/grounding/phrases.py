"""Label phrases: each language's words for an invoice's concepts as one pattern (`phrases`), matched without
accents (`fold`). Read by `schemas.grounding.concepts` (which concept a value's label names) and by the `id` finder
(`schemas.grounding.finders`: what follows a document's number label)."""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache

from schemas.grounding.locale import words


def _normal(text: str) -> str:
    return " ".join(text.casefold().split())


def fold(text: str) -> str:
    """The text with each accented letter as its base letter, one character for one (`vóór` → `voor`, `ÉCHÉANCE` →
    `ECHEANCE`, `Nº` as is): a label phrase matches however the document accents it (a Dutch invoice's `Te betalen
    vóór`, a French one's capitals without accents). Offsets stay those of the text."""
    if text.isascii():
        return text
    return text.translate(_folds(frozenset(c for c in text if ord(c) > 127)))


@lru_cache(maxsize=64)
def _folds(characters: frozenset[str]) -> dict[int, str]:
    found = {}
    for c in characters:
        base = unicodedata.normalize("NFD", c)
        if len(base) > 1 and base[0].isascii() and all(unicodedata.combining(m) for m in base[1:]):
            found[ord(c)] = base[0]
    return found


@lru_cache(maxsize=16)
def phrases(languages: tuple[str, ...]) -> tuple[re.Pattern[str] | None, dict[str, str]]:
    """The label phrases of `languages` as one pattern, longest first, and phrase (lower case) → its concept (the
    first language's, where two languages give one phrase two concepts). Phrases without accents (`fold`): match
    them in a folded text."""
    concept_of: dict[str, str] = {}
    for language in languages:
        for concept, listed in words(language).get("concepts", {}).items():
            for phrase in listed:
                concept_of.setdefault(_normal(fold(phrase)), concept)
    if not concept_of:
        return None, {}
    parts = []
    for phrase in sorted(concept_of, key=len, reverse=True):
        body = r"[ \t]+".join(re.escape(part) for part in phrase.split(" "))
        whole = len(phrase) < 4 or not phrase[-1].isalpha()
        parts.append(body + (r"(?![^\W\d_])" if whole else ""))
    initials = "".join(sorted({re.escape(c) for p in concept_of for c in (p[0].lower(), p[0].upper())}))
    return re.compile(rf"(?<![^\W\d_])(?=[{initials}])(?i:" + "|".join(parts) + ")"), concept_of
