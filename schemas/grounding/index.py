"""`DocumentIndex`: a document scanned once for grounding, `schemas.spans` and the screens.

It resolves the document's locale once (the job's, or the detected language, with the decimal mark the
document's own unambiguous numbers use), then reads each kind's values once, on demand: the values by kind
(`values`), the numbers, amounts and dates with their offsets (`readings`), the labelled values and the label
texts (`labels`, `label_texts`), the sentences of its cells (`sentences`). Every field of every record reads the
same index, so a document is scanned once per kind, not once per field and screen.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

from schemas.cells import sentences_of
from schemas.grounding import dates as date_reader
from schemas.grounding import numbers as number_reader
from schemas.grounding.finders import finder
from schemas.grounding.locale import Locale, language_mark, resolve
from schemas.labels import label_texts, labelled

Reading = tuple[Any, int, int]


UNSPACED = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\u0e00-\u0e7f\uf900-\ufaff]")


def spaced(document: str) -> bool:
    """Whether the document's script writes spaces between words: under a third of its letters are Chinese,
    Japanese or Thai characters (Korean counts as spaced: it writes spaces)."""
    sample = document[:4000]
    letters = sum(c.isalpha() for c in sample)
    unspaced = len(UNSPACED.findall(sample)) - len(re.findall(r"[\uac00-\ud7af]", sample))
    return not letters or unspaced < letters / 3


class DocumentIndex:
    """A document's values by kind, with offsets where a kind has them, read once each. Its decimal mark: the
    job's locale's, else the one the document's own unambiguous numbers use, else its detected language's (an
    English document's `2,800` is 2800; with none of these, `2,800` keeps both readings)."""

    def __init__(self, document: str, locale: str | Locale | None = "auto") -> None:
        self.document = document
        found = resolve(locale, document)
        if found.decimal is None:
            found = replace(found, mark=number_reader.decimal_mark(document) or language_mark(found))
        self.locale = found
        self.spaced = spaced(document)
        self._values: dict[str, list[Any]] = {}
        self._readings: dict[str, list[Reading]] = {}
        self._cache: dict[Any, Any] = {}

    def values(self, kind: str) -> list[Any]:
        """Every value of `kind` the document writes (its finder, by the document's locale)."""
        if kind not in self._values:
            self._values[kind] = self.finder(kind)(self.document)
        return self._values[kind]

    def finder(self, kind: str) -> Any:
        """The kind's finder reading by this document's locale (for a part of the document: a label's value)."""
        return finder(kind, self.locale)

    def readings(self, kind: str) -> list[Reading]:
        """(value, start, end) of each number (`number`) or date (`date`) the document writes, in order."""
        if kind not in self._readings:
            reader = {"number": number_reader.readings, "date": date_reader.readings}[kind]
            self._readings[kind] = reader(self.document, self.locale)
        return self._readings[kind]

    def labels(self) -> list[tuple[set[str], int, int]]:
        """Each labelled value: (the label's words, the value's start, its end)."""
        return self.cached("labelled", lambda: labelled(self.document))

    def label_texts(self) -> set[str]:
        return self.cached("label texts", lambda: label_texts(self.document))

    def sentences(self) -> list[str]:
        return self.cached("sentences", lambda: list(sentences_of(self.document)))

    def cached(self, key: Any, make: Any) -> Any:
        """A value derived from the document, made once (the screens keep theirs here)."""
        if key not in self._cache:
            self._cache[key] = make()
        return self._cache[key]
