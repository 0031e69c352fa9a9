"""`DocumentIndex`: a document scanned once for grounding, `schemas.spans` and the screens.

It resolves the document's locale once (the job's, or the detected language, with the decimal mark the
document's own unambiguous numbers use), then reads each kind's values once, on demand: the values by kind
(`values`), the numbers, amounts and dates with their offsets (`readings`), the labelled values and the label
texts (`labels`, `label_texts`), the sentences of its cells (`sentences`). Every field of every record reads the
same index, so a document is scanned once per kind, not once per field and screen.
"""

from __future__ import annotations

import json
import re
import threading
from bisect import bisect_right
from collections import OrderedDict
from dataclasses import replace
from typing import Any

from schemas.cells import sentences_of
from schemas.grounding.dates import readings as date_readings
from schemas.grounding.finders import apart_runs, finder
from schemas.grounding.locale import Locale, language_mark, resolve
from schemas.grounding.numbers import decimal_mark, money_readings
from schemas.grounding.numbers import readings as number_readings
from schemas.labels import STRING_JSON, LabelIndex, json_text, label_texts, labelled, labelled_values, unlabelled_values
from schemas.substring import UNSPACED_LETTERS

Reading = tuple[Any, int, int]
OFFSET_KINDS = frozenset({"number", "money", "date"})  # kinds whose values the index holds with their offsets


UNSPACED = re.compile(f"[{UNSPACED_LETTERS}]")  # Korean is not among them: it writes spaces


def spaced(document: str) -> bool:
    """Whether the document's script writes spaces between words: under a third of its letters are Chinese,
    Japanese or Thai characters (Korean counts as spaced: it writes spaces)."""
    sample = document[:4000]
    letters = sum(map(str.isalpha, sample))
    unspaced = len(UNSPACED.findall(sample))
    return not letters or unspaced < letters / 3


class DocumentIndex:
    """A document's values by kind, with offsets where a kind has them, read once each. Its decimal mark: the
    job's locale's, else the one the document's own unambiguous numbers use, else its detected language's (an
    English document's `2,800` is 2800; with none of these, `2,800` keeps both readings)."""

    def __init__(self, document: str, locale: str | Locale | None = "auto") -> None:
        self.document = document
        found = resolve(locale, document)
        if found.decimal is None:
            found = replace(found, mark=decimal_mark(document) or language_mark(found))
        self.locale = found
        self.spaced = spaced(document)
        self._values: dict[str, list[Any]] = {}
        self._readings: dict[str, list[Reading]] = {}
        self._cache: dict[Any, Any] = {}

    def values(self, kind: str) -> list[Any]:
        """Every value of `kind` the document writes (its finder, by the document's locale)."""
        if kind not in self._values:
            if kind in OFFSET_KINDS:  # as the finder reads them, from the readings already made
                found: dict[str, Any] = {}
                for value, _, _ in self.readings(kind):
                    found.setdefault(value if isinstance(value, str) else repr(float(value)), value)
                self._values[kind] = list(found.values())
            elif kind == "code":  # `finders.codes`: the words, then the currencies (each read once)
                self._values[kind] = list(dict.fromkeys([*self.values("word"), *apart_runs(self.document),
                                                         *self.values("currency")]))
            else:
                self._values[kind] = self.finder(kind)(self.document)
        return self._values[kind]

    def finder(self, kind: str) -> Any:
        """The kind's finder reading by this document's locale (for a part of the document: a label's value)."""
        return finder(kind, self.locale)

    def readings(self, kind: str) -> list[Reading]:
        """(value, start, end) of each number, amount or date (`number`, `money`, `date`) the document writes."""
        if kind not in self._readings:
            if kind == "money":
                found = money_readings(self.document, self.locale, self.readings("number"), self.readings("date"))
            else:
                reader = {"number": number_readings, "date": date_readings}[kind]
                found = reader(self.document, self.locale)
            self._readings[kind] = found
        return self._readings[kind]

    def label_index(self, kind: str) -> LabelIndex:
        """For one kind: (the values written outside every labelled value, value → the words of each label it
        stands under), values as JSON text (`schemas.labels.label_index`), from the offsets where a kind has
        them (numbers, amounts, dates), else by reading each labelled value again."""
        if kind not in OFFSET_KINDS:
            return self.unlabelled_values(kind), self.labelled_values(kind)
        return self.cached(("labels", kind), lambda: self._label_index(kind))

    def labelled_values(self, kind: str) -> dict[str, list[set[str]]]:
        """The second of `label_index`: value → the words of each label it stands under (the labelled values
        read, not the rest of the document)."""
        if kind in OFFSET_KINDS:
            return self.label_index(kind)[1]
        return self.cached(("labelled", kind), lambda: labelled_values(self.finder(kind), self.document, self.labels()))

    def unlabelled_values(self, kind: str) -> set[str]:
        """The first of `label_index`: the values written outside every labelled value."""
        if kind in OFFSET_KINDS:
            return self.label_index(kind)[0]
        return self.cached(("unlabelled", kind),
                           lambda: unlabelled_values(self.finder(kind), self.document, self.labels()))

    def _label_index(self, kind: str) -> LabelIndex:
        regions = self.labels()
        if not regions:
            return set(), {}
        free: set[str] = set()
        under: dict[str, list[set[str]]] = {}
        # the labelled values are `LABELLED`'s matches in order, apart and not empty: the one that may hold a
        # reading is the last that starts at or before it (each reading looked up, not every value read)
        firsts = [first for _, first, _ in regions]
        for value, start, end in self.readings(kind):
            key = json_text(value)
            at = bisect_right(firsts, start) - 1
            if at >= 0 and end <= regions[at][2]:
                under.setdefault(key, []).append(regions[at][0])
            else:
                free.add(key)
        return free, under

    def labels(self) -> list[tuple[set[str], int, int]]:
        """Each labelled value: (the label's words, the value's start, its end)."""
        return self.cached("labelled", lambda: labelled(self.document))

    def label_texts(self) -> set[str]:
        return self.cached("label texts", lambda: label_texts(self.document))

    def sentences(self) -> list[str]:
        return self.cached("sentences", lambda: list(sentences_of(self.document)))

    def json_texts(self, values: list[Any]) -> list[str]:
        """`[json.dumps(v) for v in values]`, a string's kept for the document (its fields' screens read the same
        candidates each)."""
        texts: dict[str, str] = self.cached("json texts", dict)
        out = []
        for value in values:
            if type(value) is str:
                text = texts.get(value)
                if text is None:
                    text = texts[value] = STRING_JSON(value)
                out.append(text)
            else:
                out.append(json.dumps(value))
        return out

    def cached(self, key: Any, make: Any) -> Any:
        """A value derived from the document, made once (the screens keep theirs here)."""
        if key not in self._cache:
            self._cache[key] = make()
        return self._cache[key]


RECENT = 64  # documents whose index `document_index` keeps: a batch's, between its grounding and its spans


class _Recent:
    """The indexes of the last `RECENT` documents read, by (text, locale): grounding reads a document before its
    generation, `schemas.spans` after; each made its own index (two language detections and two number scans a
    document: a sixth of an actor's CPU beside the engine on the sample). An index only adds what it derives from
    its document, so one serves both."""

    def __init__(self) -> None:
        self._lock = threading.Lock()  # a batch's threads share it (workers.batches_in_flight)
        self._indexes: OrderedDict[tuple[str, Any], DocumentIndex] = OrderedDict()

    def get(self, document: str, locale: str | Locale | None) -> DocumentIndex:
        key = (document, locale)
        with self._lock:
            found = self._indexes.get(key)
            if found is not None:
                self._indexes.move_to_end(key)
                return found
        made = DocumentIndex(document, locale)
        with self._lock:
            self._indexes[key] = made
            while len(self._indexes) > RECENT:
                self._indexes.popitem(last=False)
        return made


_recent = _Recent()


def document_index(document: str, locale: str | Locale | None = "auto") -> DocumentIndex:
    """The document's index (`DocumentIndex`), the one made for it last if it is among the `RECENT` read."""
    return _recent.get(document, locale)
