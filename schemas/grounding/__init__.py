"""Grounding: the grammar offers, per document, only values the document writes (`ground`).

The package's seam (issue 54):
- `kinds`: which kind each field gets (`field_kinds`: its `x-grounded` mark, or what `auto` infers);
- `finders`: a finder per kind, every value of that kind the document writes, read by its locale
  (`numbers`, `money`, `dates`, `currencies`, ...);
- `locale`: the document's locale (`input.locale` / `schema_policy.grounding.locale`: `auto` detects it),
  CLDR symbols through Babel and the word lists, which are data per language (`schemas/grounding/data/`);
- `index`: `DocumentIndex`, a document scanned once: values by kind with offsets, labels, sentences;
- `screens`: the `Screen` protocol: a screen may reorder or drop candidates, never the last one;
- `core`: `ground` and `refusal`, the public entry points.

Grounding narrows, it never forbids: a field whose finder finds nothing keeps its plain type, a screen never
removes a field's last candidate, and a nullable field keeps null among its choices.
"""

from schemas.grounding.core import MAX_CANDIDATES, ground, literal_decimals, refusal
from schemas.grounding.finders import (
    DATE_SHAPES,
    FALLBACK,
    FINDERS,
    NUMBER,
    cells,
    dates,
    emails,
    identifiers,
    items,
    money,
    numbers,
    phones,
    spans,
    urls,
    words,
)
from schemas.grounding.kinds import (
    KEY,
    KINDS,
    MODES,
    bad_marks,
    field_kinds,
    field_name,
    field_names,
    has_grounded,
    inferred_kind,
    named_kind,
    named_money,
)

__all__ = ["DATE_SHAPES", "FALLBACK", "FINDERS", "KEY", "KINDS", "MAX_CANDIDATES", "MODES", "NUMBER", "bad_marks",
           "cells", "dates", "emails", "field_kinds", "field_name", "field_names", "ground", "has_grounded",
           "identifiers", "inferred_kind", "items", "literal_decimals", "money", "named_kind", "named_money",
           "numbers", "phones", "refusal", "spans", "urls", "words"]
