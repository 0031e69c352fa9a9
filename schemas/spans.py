"""Where each value of a row came from: the character offsets in the document where it is written (`_spans`).

For every string, number and date leaf of a row, the places the document writes that value, in document order,
at most `MAX_PLACES` of them:
- a string: each occurrence of the exact text (a grounded string was chosen from the document, so it has one);
- a number: each number the document writes (as `schemas.grounding` reads numbers: `€1,450.61` and
  `1.450,61 €` are 1450.61) that equals it;
- a `YYYY-MM-DD` string that the document writes in another form (`January 30, 2026`): each such date.
A leaf the document does not write has no entry: the value came from the model, not from the text (a free
field's summary, a category, or a value worth a second look). Offsets are Python string indexes (code points),
end exclusive: `document[start:end]` is the text.
"""

from __future__ import annotations

import re
from typing import Any

from schemas.grounding.index import document_index

MAX_PLACES = 8
ISO_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
DECIMAL = re.compile(r"-?\d+(?:\.\d+)?")


def join_path(path: str, key: str) -> str:
    """A concrete leaf path one key deeper: `vendor` + `name` → `vendor.name`."""
    return f"{path}.{key}" if path else key


def leaves(value: Any, path: str = "", booleans: bool = False) -> list[tuple[str, Any]]:
    """A record's non-null scalar leaves with their concrete paths (`items[0].sku`); booleans only if asked."""
    if isinstance(value, dict):
        return [leaf for key, item in value.items() for leaf in leaves(item, join_path(path, key), booleans)]
    if isinstance(value, list):
        return [leaf for i, item in enumerate(value) for leaf in leaves(item, f"{path}[{i}]", booleans)]
    if value is None or (isinstance(value, bool) and not booleans):
        return []
    return [(path, value)]


class DocumentIndex:
    """A document's numbers and dates with their offsets, read once per document, as grounding reads them
    (`schemas.grounding.index.DocumentIndex`: by the document's locale, `1.234,56 €` is 1234.56)."""

    def __init__(self, document: str, locale: str | None = "auto") -> None:
        self.document = document
        self._index = document_index(document, locale)  # grounding's, when it read the document just before
        self._numbers: list[tuple[float, int, int]] | None = None

    def numbers(self) -> list[tuple[float, int, int]]:
        if self._numbers is None:  # read once: each numeric leaf of a record looks its value up in them
            self._numbers = [(float(v), s, e) for v, s, e in self._index.readings("number")]
        return self._numbers

    def dates(self) -> list[tuple[str, int, int]]:
        return list(self._index.readings("date"))

    def text(self, value: str) -> list[tuple[int, int]]:
        places, start = [], self.document.find(value) if value else -1
        while start >= 0 and len(places) < MAX_PLACES:
            places.append((start, start + len(value)))
            start = self.document.find(value, start + 1)
        return places

    def places(self, value: Any) -> list[tuple[int, int]]:
        if isinstance(value, str):
            found = self.text(value)
            if not found and ISO_DATE.fullmatch(value):
                found = [(s, e) for d, s, e in self.dates() if d == value][:MAX_PLACES]
            if not found and DECIMAL.fullmatch(value):  # a Decimal field, which a row holds as text
                found = self.places(float(value))
            return found
        if isinstance(value, int | float):
            return [(s, e) for n, s, e in self.numbers() if n == float(value)][:MAX_PLACES]
        return []


def record_spans(record: dict[str, Any], document: str | None) -> dict[str, list[tuple[int, int]]] | None:
    """Concrete leaf path → the (start, end) offsets where the document writes its value; None without a document."""
    if not document:
        return None
    index = DocumentIndex(document)
    out = {}
    for path, value in leaves(record):
        places = index.places(value)
        if places:
            out[path] = places
    return out
