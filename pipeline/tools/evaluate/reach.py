"""Reach: the share of gold values that a document's grammar lets the model write at all.

Grounding (schemas.grounding) narrows a field, per document, to the values its finder reads in the document.
Where the finder misreads the document (`1.234,56 €` read as 1.234), the right value is not among them and
the model cannot write it: the row is wrong whatever the model does. Reach tells that apart from the model's
own mistakes: a gold leaf is *reached* when the grammar's schema for its document (`schemas.grounding.ground`,
as the extractor builds it) accepts it, or accepts a value that `extract eval` counts equal to it (its string
normalisation, its numeric tolerance); it is *refused* when grounding alone makes it impossible (a value the
schema as written refuses too is not grounding's doing and counts as reached).

Only non-null gold leaves count (null stays allowed for a nullable field). Per field path (`items[].sku`) and
overall. A refusal names what the finder read instead: the candidates nearest the gold value.
"""

from __future__ import annotations

import difflib
import json
import unicodedata
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import jsonschema

from pipeline.tools.evaluate.leaves import leaf_equal
from pipeline.tools.evaluate.options import DEFAULT_TOLERANCE, Tolerance
from schemas.grounding import ground
from schemas.substring import ROOT, SUBSTRING_KEY, Automaton, automaton

NEAREST = 3  # candidates a refusal names


SHOWN = 80  # characters of a candidate a refusal's line shows


def _short(text: str) -> str:
    return text if len(text) <= SHOWN else text[:SHOWN - 1] + "…"


@dataclass(frozen=True)
class Refusal:
    """A gold value the grammar refuses: where, and what the document's finder offered instead."""

    doc_id: str
    field: str  # the field path, as eval names it (`items[].sku`)
    at: str  # the leaf's own path (`items[2].sku`)
    gold: Any
    nearest: tuple[Any, ...]  # the candidates nearest the gold value (empty: none but null, or none at all)
    candidates: int  # how many candidates the grammar offered

    def line(self) -> str:
        if self.nearest:
            read = ", ".join(_short(json.dumps(c, ensure_ascii=False)) for c in self.nearest)
            more = f" (of {self.candidates} candidates)" if self.candidates > len(self.nearest) else ""
            instead = f"the finder reads {read}{more}"
        else:
            instead = "the finder reads nothing the field may take (only null)"
        return f"{self.doc_id} {self.at} {json.dumps(self.gold, ensure_ascii=False)}: {instead}"

    def to_dict(self) -> dict[str, Any]:
        return {"doc_id": self.doc_id, "field": self.field, "at": self.at, "gold": self.gold,
                "finder_reads": list(self.nearest), "candidates": self.candidates}


@dataclass
class Reach:
    """Gold leaves per field, and those the grammar refuses."""

    gold: dict[str, int] = field(default_factory=dict)  # field path → non-null gold leaves
    refusals: list[Refusal] = field(default_factory=list)
    documents: int = 0  # documents whose grammar was built
    without_text: list[str] = field(default_factory=list)  # gold documents whose text was not found

    def refused(self, path: str | None = None) -> int:
        return sum(1 for r in self.refusals if path is None or r.field == path)

    def share(self, path: str | None = None) -> float | None:
        total = sum(self.gold.values()) if path is None else self.gold.get(path, 0)
        return round((total - self.refused(path)) / total, 4) if total else None

    def fields(self) -> dict[str, dict[str, Any]]:
        return {path: {"gold": n, "reached": n - self.refused(path), "reach": self.share(path)}
                for path, n in sorted(self.gold.items())}

    def summary(self) -> dict[str, Any]:
        total = sum(self.gold.values())
        return {"overall": {"gold": total, "reached": total - self.refused(), "reach": self.share()},
                "fields": self.fields(), "documents": self.documents,
                "documents_without_text": self.without_text[:50],
                "refused": [r.to_dict() for r in self.refusals[:200]]}


def gold_leaves(value: Any, field_path: str = "", at: str = "") -> Iterable[tuple[str, str, tuple[Any, ...], Any]]:
    """A record's non-null scalar leaves: (field path, concrete path, JSON path tuple, value)."""
    yield from _leaves(value, field_path, at, ())


def _leaves(value: Any, field_path: str, at: str, where: tuple[Any, ...]) -> Iterable[tuple[str, str, tuple, Any]]:
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _leaves(item, f"{field_path}.{key}" if field_path else key, f"{at}.{key}" if at else key,
                               (*where, key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _leaves(item, field_path + "[]", f"{at}[{i}]", (*where, i))
    elif value is not None:
        yield field_path, at, where, value


def _plain(value: Any) -> Any:
    """The record as JSON holds it (a Parquet gold's dates and decimals as text), for the schema's validator."""
    return json.loads(json.dumps(value, default=str))


def _accepts(auto: Automaton, value: str) -> bool:
    """Whether the automaton of a substring node (schemas.substring) accepts `value`: a run of the document's words."""
    stack = [(ROOT, 0)]
    while stack:
        state, at = stack.pop()
        if at == len(value) and state != ROOT:
            return True
        stack.extend((target, at + len(label)) for label, target in auto.edges[state] if value.startswith(label, at))
    return False


def _folded(text: str) -> str:
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


def _substring_check(validator: Any, payload: Any, instance: Any, schema: dict[str, Any]) -> Iterable[Any]:
    """The `x-substring` keyword as the grammar applies it: a string that is a run of the document's words (read
    as eval compares strings: NFKC, casefold, whitespace collapsed, so `Solve all` is within reach of a document
    writing `solve all`)."""
    if not isinstance(instance, str) or not isinstance(payload, dict):
        return
    key = payload.get("id")
    auto = _AUTOMATA.get(key)
    if auto is None:
        auto = _AUTOMATA[key] = automaton([_folded(c) for c in payload["cells"]], payload["max_words"],
                                          payload.get("max_length"), payload.get("unit", "word"))
    if not _accepts(auto, _folded(instance)):
        yield jsonschema.ValidationError(f"{instance!r} is not a run of the document's words")


_AUTOMATA: dict[Any, Automaton] = {}  # per document (a payload's id), while one document is checked
GrammarValidator = jsonschema.validators.extend(jsonschema.Draft202012Validator, {SUBSTRING_KEY: _substring_check})


def _candidates(schema: Any) -> list[Any] | None:
    """The values a grounded node offers (its enum, maybe beside null; a substring node's cells), or None for a
    node of another shape."""
    if not isinstance(schema, dict):
        return None
    if isinstance(schema.get(SUBSTRING_KEY), dict):
        return list(schema[SUBSTRING_KEY].get("cells") or [])
    if isinstance(schema.get("enum"), list):
        return [c for c in schema["enum"] if c is not None]
    for branch in schema.get("anyOf") or schema.get("oneOf") or []:
        found = _candidates(branch)
        if found is not None:
            return found
    return [] if schema.get("type") == "null" else None


def _errors_at(errors: Iterable[jsonschema.ValidationError], leaves: set[tuple]) -> dict[tuple, Any]:
    """The schema node of each error at a leaf (an object's anyOf is followed into its branches)."""
    found: dict[tuple, Any] = {}
    for error in errors:
        where = tuple(error.absolute_path)
        if where in leaves:
            found.setdefault(where, error.schema)
        elif error.context:
            for where_, node in _errors_at(error.context, leaves).items():
                found.setdefault(where_, node)
    return found


def nearest(gold: Any, candidates: list[Any], n: int = NEAREST) -> tuple[Any, ...]:
    """The candidates most like the gold value, as text (`2300` → `2.3`), best first."""
    texts = {json.dumps(c, ensure_ascii=False).strip('"'): c for c in candidates}
    target = json.dumps(gold, ensure_ascii=False).strip('"')
    close = difflib.get_close_matches(target, list(texts), n=n, cutoff=0.0)
    return tuple(texts[t] for t in close)


def document_refusals(doc_id: str, gold: dict[str, Any], document: str, json_schema: dict[str, Any],
                      grounding: str, ground_numbers: bool = False,
                      tolerance: Tolerance = DEFAULT_TOLERANCE,
                      ground_options: dict[str, Any] | None = None) -> tuple[list[tuple[str, str, tuple, Any]],
                                                                             list[Refusal]]:
    """The document's non-null gold leaves, and those its grammar refuses where the schema as written does not
    (`ground_options`: the job's grounding locale and screens, as the extractor passes them)."""
    record = _plain(gold)
    leaves = list(gold_leaves(record))
    grounded = ground(json_schema, document, ground_numbers, grounding, **(ground_options or {}))
    if grounded is json_schema or not leaves:
        return leaves, []
    paths = {where for _, _, where, _ in leaves}
    plain = _errors_at(jsonschema.Draft202012Validator(json_schema).iter_errors(record), paths)
    _AUTOMATA.clear()
    narrowed = _errors_at(GrammarValidator(grounded).iter_errors(record), paths)
    _AUTOMATA.clear()
    refusals = []
    for field_path, at, where, value in leaves:
        if where not in narrowed or where in plain:
            continue
        offered = _candidates(narrowed[where])
        if offered is not None and any(leaf_equal(c, value, tolerance) for c in offered):
            continue  # a value eval counts equal (`ACME GmbH` for `acme gmbh`) is within reach
        refusals.append(Refusal(doc_id, field_path, at, value, nearest(value, offered or []), len(offered or [])))
    return leaves, refusals


def reach(golds: dict[str, dict[str, Any]], documents: dict[str, str], schema_for: Callable[[str], Any],
          grounding: str, ground_numbers: bool = False, tolerance: Tolerance = DEFAULT_TOLERANCE,
          ground_options: dict[str, Any] | None = None) -> Reach:
    """Reach over the gold documents (id → record) with a text in `documents` (id → text), each under its own
    schema (`schema_for(id)`, None: a document without a schema is left out)."""
    found = Reach()
    for doc_id, gold in golds.items():
        text, schema = documents.get(doc_id), schema_for(doc_id)
        if text is None or not isinstance(schema, dict):
            found.without_text.append(doc_id)
            continue
        leaves, refusals = document_refusals(doc_id, gold, text, schema, grounding, ground_numbers, tolerance,
                                             ground_options)
        found.documents += 1
        for field_path, *_ in leaves:
            found.gold[field_path] = found.gold.get(field_path, 0) + 1
        found.refusals += refusals
    return found


def grammar_mode(loaded: Any) -> tuple[str, bool]:
    """The job's grounding as the extractor applies it (schema_policy.grounding and ground_numbers; `off`
    where decoding is unconstrained: without a grammar every value is within reach)."""
    policy = loaded.config.schema_policy
    if not loaded.config.model.constrained:
        return "off", False
    return policy.grounding, policy.ground_numbers


def job_reach(loaded: Any, golds: dict[str, dict[str, Any]], documents: dict[str, str],
              schemas: dict[str, dict[str, Any]] | None = None, tolerance: Tolerance = DEFAULT_TOLERANCE) -> Reach:
    """Reach of the job's grammar over its gold documents (`schemas`: per-row schemas by id, where the job has
    them; else the job's own schema)."""
    mode, ground_numbers = grammar_mode(loaded)
    default = loaded.contract.json_schema if not loaded.contract.per_row else None
    policy = loaded.config.schema_policy
    options = {"locale": loaded.config.grounding_locale, "screens": tuple(policy.grounding_screens)}
    return reach(golds, documents, lambda doc_id: (schemas or {}).get(doc_id, default), mode, ground_numbers,
                 tolerance, options)
