"""Grounded fields: values the grammar lets the model copy from its document, and nothing else.

A validator that checks "this value appears in the document" turns a wrong value into a dead letter after
the fact. A field marked `"x-grounded": KIND` in the JSON Schema (in Pydantic,
`Field(json_schema_extra={"x-grounded": "number"})`) is checked *before* the fact instead: for each
document, the schema the grammar is compiled from replaces that field with an `enum` of the candidates the
document holds, so the model can only choose among values the document really writes. The kinds:

- `number`: every number the document writes (`€1,450.61` gives 1450.61);
- `date`: every date the document writes in a usual form (`January 30, 2026`, `01 Mar 2026`, `30.01.2026`,
  `2026-01-30`, ...), as `YYYY-MM-DD`;
- `word`: every whitespace-delimited word, without surrounding punctuation (codes, numbers, ids);
- `text`: every run of up to `MAX_WORDS` consecutive words inside one cell of a line (a line is cut into
  cells at `|`, tabs, runs of spaces and after a `label:`), with and without trailing punctuation;
- `cell`: every whole cell (a table cell, a line, what follows a `label:`), with and without the
  punctuation around it: names, addresses, line items.

A `null` the field allowed stays allowed (the honest "not stated"). Candidates the field's own bounds refuse
(`maxLength`, `minimum`, ...) are left out. A field whose document holds no candidate keeps its schema as
written (or only `null`, when it is nullable). Like `schema_policy.max_string_length`, this shapes the
grammar only: the user's schema, the validators and the output columns stay as written.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import jsonschema

from schemas.limits import iter_subschemas, pointer

KEY = "x-grounded"
KINDS = ("number", "date", "word", "text", "cell")
MAX_WORDS = 12  # the longest `text` candidate, in words
MAX_CANDIDATES = 2000  # per field and document: beyond this the field keeps its schema (a grammar stays small)

NUMBER = re.compile(r"(?<![\w.])-?\d{1,3}(?:,\d{3})+(?:\.\d+)?(?![\d])|(?<![\w.,])-?\d+(?:\.\d+)?(?![\d])")
MONTH = r"[A-Z][a-z]{2,8}\.?"
DATE_SHAPES: tuple[tuple[re.Pattern[str], tuple[str, ...]], ...] = (
    (re.compile(r"\b\d{4}-\d{1,2}-\d{1,2}\b"), ("%Y-%m-%d",)),
    (re.compile(rf"\b{MONTH} \d{{1,2}},? \d{{4}}\b"), ("%B %d, %Y", "%b %d, %Y", "%B %d %Y", "%b %d %Y")),
    (re.compile(rf"\b\d{{1,2}} {MONTH},? \d{{4}}\b"), ("%d %B %Y", "%d %b %Y", "%d %B, %Y", "%d %b, %Y")),
    (re.compile(r"\b\d{1,2}[./-]\d{1,2}[./-]\d{4}\b"), ("%d.%m.%Y", "%d/%m/%Y", "%m/%d/%Y", "%d-%m-%Y", "%m-%d-%Y")),
)
CELL_BREAK = re.compile(r"\s*(?:\||\t| {2,})\s*|(?<=:)\s+")
EDGE_PUNCTUATION = ".,;:!?()[]{}|\"'"


def numbers(text: str) -> list[float | int]:
    """Every number the text writes, thousands separators removed, in order of first appearance."""
    found: dict[str, float | int] = {}
    for match in NUMBER.finditer(text):
        written = match.group().replace(",", "")
        value: float | int = float(written) if "." in written else int(written)
        found.setdefault(json.dumps(value), value)
    return list(found.values())


def dates(text: str) -> list[str]:
    """Every date the text writes in a usual form, as YYYY-MM-DD (an ambiguous 01/02/2026 gives both)."""
    found: dict[str, None] = {}
    for shape, formats in DATE_SHAPES:
        for match in shape.finditer(text):
            written = match.group().replace(".,", ",").replace(". ", " ")
            for fmt in formats:
                try:
                    found[datetime.strptime(written, fmt).date().isoformat()] = None
                except ValueError:
                    continue
    return list(found)


def words(text: str) -> list[str]:
    """Every whitespace-delimited word, without the punctuation around it."""
    found: dict[str, None] = {}
    for word in text.split():
        stripped = word.strip(EDGE_PUNCTUATION)
        if stripped:
            found[stripped] = None
    return list(found)


def _cells_of(text: str) -> Iterator[str]:
    """Each cell of each line: a line cut at `|`, tabs, runs of spaces and after a `label:`."""
    for line in text.splitlines():
        yield from CELL_BREAK.split(line)


def spans(text: str, max_words: int = MAX_WORDS) -> list[str]:
    """Every run of up to `max_words` consecutive words inside one cell of a line, as the text writes it."""
    found: dict[str, None] = {}
    for cell in _cells_of(text):
        bounds = [m.span() for m in re.finditer(r"\S+", cell)]
        for i, (start, _) in enumerate(bounds):
            for _, end in bounds[i:i + max_words]:
                span = cell[start:end]
                for candidate in (span, span.rstrip(EDGE_PUNCTUATION), span.strip(EDGE_PUNCTUATION)):
                    if candidate:
                        found[candidate] = None
    return list(found)


def cells(text: str) -> list[str]:
    """Every whole cell of every line, as written and without the punctuation around it."""
    found: dict[str, None] = {}
    for cell in _cells_of(text):
        for candidate in (cell.strip(), cell.strip().rstrip(".,;:")):
            if candidate:
                found[candidate] = None
    return list(found)


FINDERS = {"number": numbers, "date": dates, "word": words, "text": spans, "cell": cells}


def _nullable(node: dict[str, Any]) -> bool:
    kind = node.get("type")
    if kind == "null" or (isinstance(kind, list) and "null" in kind):
        return True
    return any(isinstance(b, dict) and b.get("type") == "null" for b in node.get("anyOf") or node.get("oneOf") or [])


def _value_branch(node: dict[str, Any]) -> dict[str, Any]:
    """The field's schema for a value (its non-null alternative), to filter candidates with."""
    branches = [b for b in node.get("anyOf") or node.get("oneOf") or [] if isinstance(b, dict)
                and b.get("type") != "null"]
    branch = branches[0] if len(branches) == 1 else {k: v for k, v in node.items() if k not in ("anyOf", "oneOf")}
    if isinstance(branch.get("type"), list):
        branch = {**branch, "type": [t for t in branch["type"] if t != "null"]}
    return {k: v for k, v in branch.items() if k not in (KEY, "format")}


def _grounded(node: dict[str, Any], kind: str, document: str, cache: dict[str, Any]) -> dict[str, Any]:
    if kind not in cache:
        cache[kind] = FINDERS[kind](document)
    # The field's bounds, with the schema's definitions beside them (a marked enum may be a $ref to one).
    check = jsonschema.Draft202012Validator({**_value_branch(node), **cache["definitions"]})
    candidates = [c for c in cache[kind] if check.is_valid(c)]
    if not candidates or len(candidates) > MAX_CANDIDATES:
        return {"type": "null"} if _nullable(node) and not candidates else _without_key(node)
    choice: dict[str, Any] = {"enum": candidates}
    return {"anyOf": [choice, {"type": "null"}]} if _nullable(node) else choice


def _without_key(node: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in node.items() if k != KEY}


def has_grounded(json_schema: Any) -> bool:
    """Whether any field of the schema is marked `x-grounded`."""
    return any(node.get(KEY) in KINDS for _, node in iter_subschemas(json_schema))


def bad_marks(json_schema: Any) -> list[str]:
    """Every `x-grounded` whose kind is not one of `KINDS`, by its place in the schema."""
    return [f"#{pointer(path)}: x-grounded {node[KEY]!r} is not one of {', '.join(KINDS)}"
            for path, node in iter_subschemas(json_schema) if KEY in node and node[KEY] not in KINDS]


def refusal(json_schema: dict[str, Any], document: str, value: Any) -> str | None:
    """Why grounding would keep the model from writing `value` for this document (None: it would not): a value
    of an `x-grounded` field that is not among the candidates its finder takes from the document."""
    grounded = ground(json_schema, document)
    if grounded is json_schema:
        return None
    for error in jsonschema.Draft202012Validator(grounded).iter_errors(value):
        where = ".".join(str(p) for p in error.absolute_path) or "(record)"
        return f"{where} {error.instance!r} is not a value the document writes, as its x-grounded finder reads it"
    return None


def _numeric(node: dict[str, Any]) -> bool:
    """A plain number field (number or integer, maybe nullable; no enum or const): one `numbers` can ground."""
    if {"enum", "const", KEY} & set(node):
        return False
    kind = node.get("type")
    if kind is not None:
        kinds = {kind} if isinstance(kind, str) else set(kind) if isinstance(kind, list) else set()
        return bool(kinds & {"number", "integer"}) and kinds <= {"number", "integer", "null"} and "anyOf" not in node
    branches = node.get("anyOf")
    return isinstance(branches, list) and len(branches) == 2 and any(
        isinstance(b, dict) and b.get("type") == "null" for b in branches) and all(
        isinstance(b, dict) and (b.get("type") == "null" or _numeric(b)) for b in branches)


def ground(json_schema: dict[str, Any], document: str | None, all_numbers: bool = False) -> dict[str, Any]:
    """The schema for this document's grammar: every `x-grounded` field narrowed to the document's candidates,
    and with `all_numbers` (schema_policy.ground_numbers) every plain number field as if marked `number`
    (the schema itself when nothing is grounded, or without a document)."""
    if document is None or not (all_numbers or has_grounded(json_schema)):
        return json_schema
    work = copy.deepcopy(json_schema)
    definitions = {key: json_schema[key] for key in ("$defs", "definitions") if isinstance(json_schema.get(key), dict)}
    cache: dict[str, Any] = {"definitions": definitions}
    # Each field is grounded in place before the walk reaches its children, so the enum that replaced it is
    # never walked into (and a nullable number's own branches are not grounded a second time).
    for _, node in iter_subschemas(work):
        kind = node.get(KEY) if node.get(KEY) in KINDS else "number" if all_numbers and _numeric(node) else None
        if kind is not None:
            grounded = _grounded(node, kind, document, cache)
            node.clear()
            node.update(grounded)
    return work
