"""Grounding made cheaper without changing what it gives (issue 57 item 4): each faster path against the path it
replaced, on the jobs' own documents (the sample, tickets, multilingual invoices), and what is now made once."""

from __future__ import annotations

import json
from typing import Any

import pyarrow.parquet as pq
import pytest

from schemas.cells import EDGE_BUT_BRACKETS, EDGE_PUNCTUATION, MAX_WORDS, POSSESSIVE, WORD, sentences_of
from schemas.grounding import concepts as concepts_module
from schemas.grounding import durations as durations_module
from schemas.grounding.concepts import value_concepts
from schemas.grounding.durations import asks_duration
from schemas.grounding.finders import _unnumbered, spans
from schemas.grounding.index import DocumentIndex
from schemas.grounding.screens import FieldContext, placeholders
from schemas.labels import field_words, label_index, labelled, named_only, names

JOB_TEXTS = ("jobs/sample/invoices.parquet", "jobs/tickets/tickets.parquet", "jobs/multilingual/invoices.parquet")


def documents() -> list[str]:
    found = []
    for path in JOB_TEXTS:
        table = pq.read_table(path)
        column = "text" if "text" in table.column_names else table.column_names[1]
        found += [t for t in table.column(column).to_pylist() if t]
    assert len(found) > 100
    return found


def spans_before(text: str, max_words: int = MAX_WORDS) -> list[str]:
    """`schemas.grounding.finders.spans` as it was before issue 57's rewrite."""
    found: dict[str, None] = {}
    for cell in sentences_of(text):
        bounds = [m.span() for m in WORD.finditer(cell)]
        for i, (start, _) in enumerate(bounds):
            for _, end in bounds[i:i + max_words]:
                span = cell[start:end]
                stripped = span.strip(EDGE_PUNCTUATION)
                more: tuple[str, ...] = (stripped[:-2],) if stripped.endswith(POSSESSIVE) else ()
                if span[-1:] in "\"'”’" and span[-2:-1] in ")]}":
                    more = (*more, span.strip(EDGE_BUT_BRACKETS))
                for candidate in (span, span.rstrip(EDGE_PUNCTUATION), stripped, _unnumbered(stripped), *more):
                    if candidate:
                        found[candidate] = None
    return list(found)


def test_spans_are_the_same_in_the_same_order_as_before():
    texts = documents() + ["#W365 order #60589's (2022 Edition)\" — “quoted” *bold* _it_ ...", ")", "'s", "#", "a"]
    for text in texts:
        assert spans(text) == spans_before(text), text[:80]


def named_only_before(candidates: list[Any], index: Any, words: set[str], rivals: Any = ()) -> list[Any]:
    free, under = index
    rivals = list(rivals)
    named = {value for value, labels in under.items() if any(names(label, words, rivals) for label in labels)}
    if not named & {json.dumps(c) for c in candidates}:
        return candidates
    return [c for c in candidates if (key := json.dumps(c)) in free or key in named or key not in under]


@pytest.mark.parametrize("kind", ["text", "word", "date", "number"])
def test_named_only_is_the_same_as_before(kind):
    fields = [({"issue", "date"}, [{"due", "date"}]), ({"due", "date"}, [{"issue", "date"}]), ({"total"}, []),
              ({"invoice", "number"}, [{"order", "number"}]), ({"vendor"}, [{"customer"}]), ({"nothing"}, [])]
    checked = 0
    for text in documents():
        index = DocumentIndex(text)
        candidates = index.values(kind)
        labels = index.label_index(kind) if kind in ("date", "number") else label_index(
            index.finder(kind), text, labelled(text))
        for words, rivals in fields:
            assert named_only(candidates, labels, words, rivals) == named_only_before(candidates, labels, words, rivals)
            checked += 1
    assert checked


def placeholders_before(candidates: list[Any], field: FieldContext, index: DocumentIndex) -> list[Any]:
    labels = index.label_texts()
    empty = {w.casefold() for w in ("n/a", "none", "-", "tbd")} if field.nullable else set()
    return [c for c in candidates if not isinstance(c, str) or (
        c.strip().rstrip(":#").strip().casefold() not in labels and c.strip().casefold() not in empty)]


@pytest.mark.parametrize("nullable", [True, False])
def test_placeholders_screen_is_the_same_as_before(nullable, monkeypatch):
    from schemas.grounding import screens

    monkeypatch.setattr(screens, "word_list", lambda locale, key: ["N/A", "none", "-", "TBD"])
    field = FieldContext("text", nullable, frozenset({"vendor"}))
    for text in [*documents(), "Order #: N/A\nVendor: TBD\nTotal:\n - \nnone"]:
        index = DocumentIndex(text)
        candidates = [*index.values("text"), 12.5, None, " Order #: ", "n/a "]
        assert placeholders(candidates, field, index) == placeholders_before(candidates, field, index)


def test_value_concepts_of_an_offset_kind_are_read_once_per_document(monkeypatch):
    text = next(t for t in documents() if "Total" in t and "Date" in t)
    index = DocumentIndex(text)
    calls = []
    original = concepts_module.DocumentConcepts.at

    def counting(self, start):
        calls.append(start)
        return original(self, start)

    monkeypatch.setattr(concepts_module.DocumentConcepts, "at", counting)
    first = value_concepts(index, "date", index.values("date"))
    read = len(calls)
    assert read > 0
    second = value_concepts(index, "date", index.values("date")[:1])  # another field of the same kind
    assert second == first and len(calls) == read
    fresh = DocumentIndex(text)  # the same answer as a fresh read
    assert value_concepts(fresh, "date", []) == first


def test_a_fields_description_is_read_for_a_duration_once(monkeypatch):
    read = []
    original = durations_module.durations

    def counting(text, language="en"):
        read.append(text)
        return original(text, language)

    monkeypatch.setattr(durations_module, "durations", counting)
    durations_module._shows_duration.cache_clear()
    node = {"type": "string", "description": "How long the agreement lasts, e.g. two (2) years",
            "x-grounded": "text"}
    assert asks_duration(node) and asks_duration(dict(node))  # each document's copy of the schema asks again
    assert read == [node["description"]]
    assert not asks_duration({"type": "string", "description": "The vendor's name"})


def label_index_before(finder: Any, document: str, regions: list[tuple[set[str], int, int]]) -> Any:
    """`schemas.labels.label_index` as it was before issue 57 (one pass for both halves)."""
    if not regions:
        return set(), {}
    blanked = list(document)
    under: dict[str, list[set[str]]] = {}
    for words, start, end in regions:
        blanked[start:end] = " " * (end - start)
        for value in finder(document[start:end]):
            under.setdefault(json.dumps(value), []).append(words)
    return {json.dumps(v) for v in finder("".join(blanked))}, under


@pytest.mark.parametrize("kind", ["text", "word", "cell", "code"])  # offset kinds: from readings, as before
def test_a_documents_label_index_is_the_same_as_before(kind):
    for text in documents():
        index = DocumentIndex(text)
        assert index.label_index(kind) == label_index_before(index.finder(kind), text, labelled(text))


def test_the_rest_of_a_document_is_read_only_for_a_field_some_label_names(monkeypatch):
    from schemas.grounding import screens

    text = "Vendor: Acme Supplies Ltd\nCustomer: Bolt Works\nThanks for your order from Acme Supplies Ltd today"
    index = DocumentIndex(text)
    read = []
    original = DocumentIndex.unlabelled_values

    def counting(self, kind):
        read.append(kind)
        return original(self, kind)

    monkeypatch.setattr(DocumentIndex, "unlabelled_values", counting)
    candidates = index.values("text")
    vendor_words, customer_words, subject_words = (frozenset(field_words([n])) for n in ("vendor", "customer",
                                                                                         "subject"))
    unnamed = FieldContext("text", True, subject_words, (vendor_words, customer_words))
    assert screens.labels(candidates, unnamed, index) == candidates
    assert read == []  # no label names `subject`: the unlabelled runs decide nothing, and are not read
    vendor = FieldContext("text", True, vendor_words, (customer_words, subject_words))
    kept = screens.labels(candidates, vendor, index)
    assert read == ["text"]
    assert "Acme Supplies Ltd" in kept and "Bolt Works" not in kept
    assert kept == named_only_before(candidates, label_index_before(index.finder("text"), text, labelled(text)),
                                     set(vendor_words), [set(customer_words), set(subject_words)])


def test_a_grounded_fields_node_is_found_by_its_path_as_the_walk_finds_it():
    from pipeline.config import load_config
    from schemas.grounding.core import _at
    from schemas.walk import iter_subschemas

    nested = {"type": "object", "$defs": {"Item": {"type": "object", "properties": {"n": {"type": "number"}}}},
              "properties": {"items": {"type": "array", "items": {"$ref": "#/$defs/Item"}},
                             "pair": {"type": "array", "prefixItems": [{"type": "string"}, {"type": "integer"}]},
                             "either": {"anyOf": [{"type": "string", "x-grounded": "word"}, {"type": "null"}]},
                             "old": {"type": "array", "items": [{"type": "string"}, {"type": "number"}]}}}
    schemas = [nested] + [load_config(job).contract.json_schema for job in
                          ("jobs/extract.yaml", "jobs/tickets/extract.yaml", "jobs/multilingual/extract.yaml")]
    walked = 0
    for schema in schemas:
        for path, node in iter_subschemas(schema):
            assert _at(schema, path) is node
            walked += 1
    assert walked > 20


@pytest.mark.parametrize("values", [[0.1, 0.5, 1.0], [1, 2.0], ["a", 0.5], [None, 2.5], [True, 0.5], ["x", "y"], [],
                                    [0.5, "a"], [float("inf")], [None]])
def test_an_enum_of_decimals_is_told_as_before(values):
    from schemas.grounding.core import _has_decimal

    before = any(isinstance(v, float) and not v.is_integer() for v in values) and all(
        v is None or (isinstance(v, int | float) and not isinstance(v, bool)) for v in values)
    assert _has_decimal(values) == before


def test_whether_a_document_is_spaced_is_told_as_before():
    import re

    from schemas.grounding.index import spaced

    old = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\u0e00-\u0e7f\uf900-\ufaff]")

    def before(document: str) -> bool:
        sample = document[:4000]
        letters = sum(c.isalpha() for c in sample)
        unspaced = len(old.findall(sample)) - len(re.findall(r"[\uac00-\ud7af]", sample))
        return not letters or unspaced < letters / 3

    texts = [*documents(), "", "123 456", "发票号码 INV-1 合计 ¥1,200", "請求書 合計 5,000円", "½ ² Ⅻ ǅ ʰ",
             "한국어 문서"]
    for text in texts:
        assert spaced(text) == before(text)


@pytest.mark.parametrize("branch", [{"type": "string", "maxLength": 12}, {"type": "number", "minimum": 0},
                                    {"type": "integer"}, {"type": ["string", "number"], "maximum": 100},
                                    {"type": ["integer", "null"]}, {"type": "string", "enum": ["EUR", "USD"]}])
def test_the_candidates_a_fields_bounds_allow_are_the_same_as_before(branch):
    from schemas.grounding.core import TYPE_CHECKS, _allowed, _within

    found = ["EUR", "a much longer candidate", 12, 12.5, -3, 250, True, None, "USD", 7.0, ""]
    kinds = [branch["type"]] if isinstance(branch["type"], str) else branch["type"]
    checks = [TYPE_CHECKS[k] for k in kinds]
    before = [c for c in found if any(check(c) for check in checks) and _within(c, branch)]
    assert _allowed(found, branch, {"definitions": {}}) == before
