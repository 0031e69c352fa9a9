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

A value of a shape (a number, date, amount, e-mail, phone, web address or identifier) that the document writes
only under another field's label is left out where it labels another value with the field's own words
(`schemas.labels`: `issue_date` loses `Payment due: 01 Mar 2026` beside `Date of issue: January 30, 2026`).
A `null` the field allowed stays allowed (the honest "not stated"). Candidates the field's own bounds refuse
(`maxLength`, `minimum`, ...) are left out. A field whose document holds no candidate keeps its schema as
written, within bounds no real value passes, and a nullable one keeps `null` (never forbidden; the value the model
writes there is null after decoding when it is unsure of it: `schemas.grounding.unsure`). Like
`schema_policy.max_string_length`, this shapes the grammar only: the user's schema, the validators and the
output columns stay as written.
"""

from __future__ import annotations

import copy
import json
import re
from dataclasses import replace
from typing import Any

import jsonschema

from schemas.cells import MAX_WORDS
from schemas.grounding.concepts import field_concept
from schemas.grounding.durations import duration_kind
from schemas.grounding.elsewhere import UNFOUND_KEY
from schemas.grounding.finders import FALLBACK
from schemas.grounding.index import DocumentIndex, document_index
from schemas.grounding.kinds import KEY, _format, _not_a_value, field_kinds, field_name, field_names, has_grounded
from schemas.grounding.locale import AUTO, Locale
from schemas.grounding.normal import normal_forms
from schemas.grounding.places import place_kind
from schemas.grounding.screens import DEFAULT_SCREENS, FieldContext, screen
from schemas.grounding.unsure import FREE_KEY
from schemas.labels import field_words
from schemas.substring import LITERALS_KEY, UNSPACED_CHARS, fit_max_words, substring_node
from schemas.verdicts import valid
from schemas.walk import iter_subschemas

MAX_CANDIDATES = 2000  # per field and document: beyond this the field keeps its schema (a grammar stays small)



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


def _grounded(node: dict[str, Any], kind: str, index: DocumentIndex, cache: dict[str, Any],
              field: FieldContext, screens: tuple[str, ...], mark_free: bool = False) -> dict[str, Any]:
    """The field's node for this document: an enum of the candidates its finder reads (screened), or its own
    schema where the finder reads none the field allows (grounding narrows, it never forbids; with `mark_free`, a
    nullable one marked `FREE_KEY`: schemas.grounding.unsure)."""
    branch = _value_branch(node)
    if kind == "word" and isinstance(branch.get("enum"), list):
        kind = "code"  # an enum marked `word`: the codes the document writes or its symbols stand for
    if kind in RUN_KINDS and not index.spaced:  # Chinese, Japanese, Thai: a value is no run of spaced words,
        # but a text is a run of the document's characters (one clause at most), where its grammar fits
        substring = _substring(node, kind, index, cache, unit="char") if kind in CHAR_RUN_KINDS else None
        return _or_other_script(substring) if substring is not None else _without_key(node)
    candidates = _allowed(index.values(kind), branch, cache)
    if not candidates and kind in FALLBACK and not _nullable(node):
        kind = FALLBACK[kind]  # a required amount, id or currency the document writes in no such shape
        candidates = _allowed(index.values(kind), branch, cache)
    candidates, doubted = screen(candidates, replace(field, kind=kind), index, screens)
    shape = FORMAT_SHAPES.get(_format(node) or "")
    if shape is not None:  # a word is an email (or uri, hostname) only if it looks like one
        candidates = [c for c in candidates if isinstance(c, str) and shape.fullmatch(c)]
    if len(candidates) > MAX_CANDIDATES and kind in SUBSTRING_KINDS:
        substring = _substring(node, kind, index, cache)
        if substring is not None:
            return _or_any_text(substring, node, kind)  # spaced text: unspaced kinds returned above
    if not candidates or (doubted and _nullable(node)):  # nothing found (or every value found in doubt:
        # `screen`): the field's own type (bounded), null if it allows; an unsure value null
        if not mark_free:
            return _free(node, kind)
        # marked: a nullable field's unsure value is null (schemas.grounding.unsure); a window's list whose items
        # another window of its document finds is [] there (schemas.grounding.elsewhere)
        free = {**_free(node, kind), **({FREE_KEY: True} if _nullable(node) else {})}
        return {**free, UNFOUND_KEY: True} if not candidates else free
    if len(candidates) > MAX_CANDIDATES:
        return _without_key(node)  # too much to list: the field's own type
    choice: dict[str, Any] = {"enum": candidates}
    if any(isinstance(c, float) and not c.is_integer() for c in candidates):  # 8.7, not 8.6999999999999993
        choice[LITERALS_KEY] = [json.dumps(c) for c in candidates]
    return {"anyOf": [choice, {"type": "null"}]} if _nullable(node) else choice


# Kinds whose candidates are a document's space-delimited words or runs of them: none in a script written without
# spaces (DeepJSONEval zh dev, 32 items: 221 of 446 gold leaves refused by these kinds before issue 54).
RUN_KINDS = frozenset({"word", "text", "cell", "item", "id"})
# Kinds whose candidates are runs of a document's words: past MAX_CANDIDATES (a long document) they are decoded
# under a grammar of any such run instead of an enum (schemas.substring): `text` runs of up to MAX_WORDS words,
# `word` runs of one. Only for a plain string field (a maxLength at most): other bounds keep the schema.
SUBSTRING_KINDS = {"text": MAX_WORDS, "item": MAX_WORDS, "word": 1}
# In a script written without spaces: `text` and `item` runs of up to CHAR_RUN characters of one clause
# (schemas.substring.CHAR_WORD), the longest whose grammar fits, as for words. DeepJSONEval zh dev, first 32: its
# gold names and titles are 2-15 characters (亚历杭德罗·冈萨雷斯·伊纳里图).
CHAR_RUN_KINDS = frozenset({"text", "item"})
CHAR_RUN = 24
PLAIN_STRING_KEYS = frozenset({"type", "maxLength", "minLength"})


def _substring(node: dict[str, Any], kind: str, index: DocumentIndex, cache: dict[str, Any],
               unit: str = "word") -> dict[str, Any] | None:
    """The field as a substring node (any run of the document's words, as few per run as the grammar's size
    needs, or one of the normal forms of its dates and time ranges: `schemas.grounding.normal`), or None where
    the field has bounds a run cannot honour or no word bound fits."""
    branch = {k: v for k, v in _value_branch(node).items() if k not in ANNOTATIONS}
    if branch.get("type") != "string" or not set(branch) <= PLAIN_STRING_KEYS:
        return None
    max_length = branch.get("maxLength")
    longest = CHAR_RUN if unit == "char" else SUBSTRING_KINDS[kind]
    key = ("substring", longest, kind != "word", max_length, unit)  # `text` and `item` fields share one node
    if key not in cache:
        extra = normal_forms(index) if kind != "word" else ()
        words_per_run = fit_max_words(index.document, longest, max_length, extra=extra, unit=unit)
        cache[key] = None if words_per_run is None else substring_node(index.document, words_per_run, max_length,
                                                                       extra=extra, unit=unit)
    found = cache[key]
    if found is None:
        return None
    found = dict(found)  # a node of its own for each field (they share the read-only payload)
    return {"anyOf": [found, {"type": "null"}]} if _nullable(node) else found


# A value in another script than the document's (an English name or translation in a Chinese document:
# DeepJSONEval zh dev, 105 of the 125 gold values the character runs refused on all 130) cannot be a run of its
# characters: it is left free, up to OTHER_SCRIPT_MAX characters none of which is of a script written without spaces.
# Chosen on DeepJSONEval zh dev (all 130: reach 0.927 -> 0.987, F1 0.223 -> 0.216; the model writes 371 values in
# another script, 31 right); no other corpus of ours is written without spaces, so it has no out-of-sample figure.
OTHER_SCRIPT_MAX = 64
# XGrammar matches a pattern against the JSON text of the string, so the class leaves out the quote, the backslash
# and control characters: a `[^...]` that admits `"` lets the model close the string inside it (invalid JSON).
OTHER_SCRIPT = {"type": "string",
                "pattern": '^[^"\\\\\\x00-\\x1f' + UNSPACED_CHARS + f']{{1,{OTHER_SCRIPT_MAX}}}$'}


def _or_other_script(substring: dict[str, Any]) -> dict[str, Any]:
    """A run of the document's characters, or a value written in another script (`OTHER_SCRIPT`), or null where
    the field allows it."""
    branches = substring.get("anyOf")
    if branches is None:
        return {"anyOf": [substring, dict(OTHER_SCRIPT)]}
    return {**substring, "anyOf": [branches[0], dict(OTHER_SCRIPT), *branches[1:]]}


# In a long document (prose), a text is a run of the document's words or any text: a value may be a paraphrase or a
# normal form the document does not write (`Senior Citizens (Ages 65+)`, `NeuralCore X1 @ 5.2GHz`). Chosen on
# DeepJSONEval en dev (all 136: reach 0.958 -> 0.999; first 96: F1 0.305 -> 0.288); the tickets 0.740 -> 0.737 and
# the contracts 0.179 -> 0.179, where it changes 4 and 12 grammars. The sample and the multilingual job: unchanged.
def _or_any_text(substring: dict[str, Any], node: dict[str, Any], kind: str) -> dict[str, Any]:
    """A run of the document's words (the substring node), or the field's own type (bounded), or null where the
    field allows it."""
    run = substring["anyOf"][0] if "anyOf" in substring else substring
    return {"anyOf": [run, _free(node, kind)]}


FORMAT_SHAPES = {"email": re.compile(r"[^@\s]+@[^@\s]+\.[^@\s]+"),
                 "uri": re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:\S+"),
                 "hostname": re.compile(r"[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+")}
ANNOTATIONS = frozenset({"title", "description", "default", "examples", "$comment", "readOnly", "writeOnly"})
TYPE_CHECKS = {"string": lambda v: isinstance(v, str), "null": lambda v: v is None,
               "number": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
               "integer": lambda v: isinstance(v, int) and not isinstance(v, bool) or
               (isinstance(v, float) and v.is_integer())}


def _allowed(found: list[Any], branch: dict[str, Any], cache: dict[str, Any]) -> list[Any]:
    """The candidates the field's own value schema allows (cached per schema: a document's fields share most)."""
    key = json.dumps(branch, sort_keys=True, default=str) + str(id(found))
    if key in cache:
        return cache[key]
    bounds = {k: v for k, v in branch.items() if k not in ANNOTATIONS}
    kinds = bounds.get("type")
    kinds = [kinds] if isinstance(kinds, str) else kinds
    if set(bounds) <= FAST_KEYS and isinstance(kinds, list) and all(k in TYPE_CHECKS for k in kinds) \
            and _plain_bounds(bounds):
        checks = [TYPE_CHECKS[k] for k in kinds]
        if len(checks) == 1:  # one type (most fields): its check without a generator per candidate
            check = checks[0]
            allowed = [c for c in found if check(c) and _within(c, bounds)]
        else:
            allowed = [c for c in found if any(check(c) for check in checks) and _within(c, bounds)]
    else:  # the field's bounds, its references resolved in the whole schema (a marked enum may be a reference)
        if "root_key" not in cache:  # verdicts are kept across documents (schemas.verdicts)
            cache["root_key"] = json.dumps(cache["root"], sort_keys=True, default=str)
        schema_key = key[: -len(str(id(found)))] + cache["root_key"]
        allowed = [c for c in found if valid(schema_key, branch, cache["root"], c)]
    cache[key] = allowed
    return allowed


# Bounds `_within` checks as jsonschema does, without building a validator (most of grounding's cost before)
FAST_KEYS = frozenset({"type", "maxLength", "minLength", "minimum", "maximum", "exclusiveMinimum",
                       "exclusiveMaximum", "enum"})


def _plain_bounds(bounds: dict[str, Any]) -> bool:
    numeric = all(isinstance(bounds.get(k, 0), int | float) and not isinstance(bounds.get(k), bool)
                  for k in FAST_KEYS - {"type", "enum"})
    enum = bounds.get("enum")
    return numeric and (enum is None or (isinstance(enum, list) and all(isinstance(v, str) for v in enum)))


def _within(value: Any, bounds: dict[str, Any]) -> bool:
    if isinstance(value, str):
        if "enum" in bounds and value not in bounds["enum"]:
            return False
        length = len(value)
        return length <= bounds.get("maxLength", length) and length >= bounds.get("minLength", 0)
    if "enum" in bounds:
        return False
    if isinstance(value, int | float) and not isinstance(value, bool):
        return not (("minimum" in bounds and value < bounds["minimum"])
                    or ("maximum" in bounds and value > bounds["maximum"])
                    or ("exclusiveMinimum" in bounds and value <= bounds["exclusiveMinimum"])
                    or ("exclusiveMaximum" in bounds and value >= bounds["exclusiveMaximum"]))
    return True


def _without_key(node: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in node.items() if k != KEY}


# A field whose finder finds nothing keeps its type (grounding never forbids), within bounds no real value of its
# kind passes: the bundled model, left free on a field the document does not fill, writes digits or characters until
# max_tokens (the tickets job: 5 of 40 truncated, `order_number` "123456789012…", before these bounds).
FREE_MAX_LENGTH = {"id": 64, "word": 64, "code": 64, "currency": 64, "place": 64,  # characters of a short token
                   "duration": 64}
FREE_MAX_ABS = 1e15  # a number's magnitude: beyond every amount, count and year a document writes


def _free(node: dict[str, Any], kind: str) -> dict[str, Any]:
    """The field's own schema without the grounding mark, each value branch bounded for its kind: a number within
    ±FREE_MAX_ABS, a short token's string within FREE_MAX_LENGTH (a branch with a pattern or format, which some
    backends cannot combine with a length, keeps its own bounds)."""
    free = _without_key(node)
    branches = free.get("anyOf") or free.get("oneOf")
    if isinstance(branches, list):
        key = "anyOf" if "anyOf" in free else "oneOf"
        return {**free, key: [_bounded(b, kind) if isinstance(b, dict) else b for b in branches]}
    return _bounded(free, kind)


def _bounded(branch: dict[str, Any], kind: str) -> dict[str, Any]:
    types = branch.get("type")
    types = {types} if isinstance(types, str) else set(types) if isinstance(types, list) else set()
    bounded = dict(branch)
    if types and types <= {"number", "integer", "null"} and types - {"null"}:
        if "maximum" not in bounded and "exclusiveMaximum" not in bounded:
            bounded["maximum"] = FREE_MAX_ABS
        if "minimum" not in bounded and "exclusiveMinimum" not in bounded:
            bounded["minimum"] = -FREE_MAX_ABS
    elif types and types <= {"string", "null"} and "string" in types and kind in FREE_MAX_LENGTH \
            and not {"pattern", "format", "enum", "const"} & set(bounded):
        bounded["maxLength"] = min(int(bounded.get("maxLength", FREE_MAX_LENGTH[kind])), FREE_MAX_LENGTH[kind])
    return bounded



def refusal(json_schema: dict[str, Any], document: str, value: Any, mode: str = "marked",
            all_numbers: bool = False, locale: str | Locale | None = AUTO,
            screens: tuple[str, ...] = DEFAULT_SCREENS) -> str | None:
    """Why grounding would keep the model from writing `value` for this document (None: it would not): a value
    of a grounded field that is not among the candidates its finder takes from the document."""
    grounded = _ground(json_schema, document, all_numbers, mode, locale, screens)
    if grounded is json_schema:
        return None
    for error in jsonschema.Draft202012Validator(grounded).iter_errors(value):
        where = ".".join(str(p) for p in error.absolute_path) or "(record)"
        return f"{where} {error.instance!r} is not a value the document writes, as its grounding finder reads it"
    return None



def ground(json_schema: dict[str, Any], document: str | None, all_numbers: bool = False,
           mode: str = "marked", locale: str | Locale | None = AUTO,
           screens: tuple[str, ...] = DEFAULT_SCREENS, mark_free: bool = False) -> dict[str, Any]:
    """The schema for this document's grammar: every grounded field narrowed to the document's candidates
    (the schema itself when nothing is grounded, or without a document). `mode` is schema_policy.grounding:
    `marked` grounds the fields marked `x-grounded` (and with `all_numbers`, schema_policy.ground_numbers,
    every plain number field as if marked `number`); `auto` also grounds every unmarked field that
    `inferred_kind` gives a kind, except those marked `x-grounded: false`; `off` grounds nothing.
    In every mode, an enum of decimals the schema writes itself is spliced as written (`literal_decimals`).
    `locale`: how the document's numbers, dates and words are read (`auto`: its detected language, the decimal
    mark its own numbers use; `de_DE`: that locale decides ambiguous forms). `screens`: the screens applied
    (`schemas.grounding.screens`). `mark_free`: a nullable field left free is marked for `free_fields`
    (`schemas.grounding.unsure`), which takes the marks off before the grammar is compiled."""
    return literal_decimals(_ground(json_schema, document, all_numbers, mode, locale, screens, mark_free))


def _has_decimal(values: list[Any]) -> bool:
    """Whether an enum's values are numbers (or null), one of them a non-integer float: what XGrammar would
    write with 17 significant digits."""
    return all(v is None or (isinstance(v, int | float) and not isinstance(v, bool)) for v in values) and any(
        isinstance(v, float) and not v.is_integer() for v in values)  # a list of strings stops at its first


def literal_decimals(json_schema: dict[str, Any]) -> dict[str, Any]:
    """`json_schema` with every enum of decimals (`"Rarity": {"enum": [0.1, 0.5, 1.0]}`) given its values as
    JSON writes them (`x-literals`, schemas.substring), so the grammar writes `0.1`, not `0.10000000000000001`:
    ten tokens fewer per value, which a list of such items spends from `max_tokens` (on DeepJSONEval a list of
    ten achievements ran out of tokens). The values parse the same, so the output's meaning does not change.
    The schema itself (not a copy) when it has no such enum."""
    found = [path for path, node in iter_subschemas(json_schema) if isinstance(node.get("enum"), list)
             and LITERALS_KEY not in node and _has_decimal(node["enum"])
             and not any(_not_a_value(path[:i]) for i in range(1, len(path) + 1))]
    if not found:
        return json_schema
    work = copy.deepcopy(json_schema)
    nodes = dict(iter_subschemas(work))
    for path in found:
        node = nodes[path]
        node[LITERALS_KEY] = [json.dumps(v) for v in node["enum"]]
    return work


def _ground(json_schema: dict[str, Any], document: str | None, all_numbers: bool = False,
            mode: str = "marked", locale: str | Locale | None = AUTO,
            screens: tuple[str, ...] = DEFAULT_SCREENS, mark_free: bool = False) -> dict[str, Any]:
    if document is None or mode == "off" or (mode == "marked" and not (all_numbers or has_grounded(json_schema))):
        return json_schema
    kinds, named = _fields(json_schema, mode, all_numbers)
    if not kinds:
        return json_schema
    work = copy.deepcopy(json_schema)
    cache: dict[str, Any] = {"root": json_schema}  # the schema as given: grounded branches resolve references in it
    index = document_index(document, locale)
    nodes = {path: _at(work, path) for path in kinds}  # each grounded field's node in the copy, before any changes
    concepts = _concepts(kinds)
    for path, kind in kinds.items():
        node = nodes[path]
        field = FieldContext(kind, _nullable(node), named[path],
                             tuple(words_ for other, words_ in named.items() if other != path), concepts.get(path),
                             frozenset(c for other, c in concepts.items() if other != path and c))
        kind = place_kind(duration_kind(kind, node, index), field_name(path))
        grounded = _grounded(node, kind, index, cache, field, tuple(screens), mark_free)
        node.clear()
        node.update(grounded)
    return work


def _at(schema: dict[str, Any], path: tuple[Any, ...]) -> dict[str, Any]:
    """The node at a path `iter_subschemas` gives (keys and list indexes from the root)."""
    node: Any = schema
    for step in path:
        node = node[step]
    return node


def _concepts(kinds: dict[Any, str]) -> dict[Any, str | None]:
    """Each grounded field's concept by its own name (`schemas.grounding.concepts.field_concept`)."""
    return {path: field_concept(field_name(path)) for path in kinds}


_FIELDS: dict[str, tuple[dict[Any, str], dict[Any, frozenset[str]]]] = {}  # by the schema's text, mode, all_numbers
_FIELDS_KEPT = 64


def _fields(json_schema: dict[str, Any], mode: str, all_numbers: bool
            ) -> tuple[dict[Any, str], dict[Any, frozenset[str]]]:
    """The grounded fields of a schema (path → kind) and each one's words (for labels), worked out once per schema:
    they depend on the schema alone, and walking it for them was about a fifth of a short document's grounding."""
    key = json.dumps([json_schema, mode, all_numbers], sort_keys=True, default=str)
    found = _FIELDS.get(key)
    if found is None:
        kinds = {path: kind for path, kind in field_kinds(json_schema, mode, all_numbers).items() if kind is not None}
        found = kinds, {path: frozenset(field_words(field_names(path))) for path in kinds}
        if len(_FIELDS) >= _FIELDS_KEPT:
            _FIELDS.clear()
        _FIELDS[key] = found
    return found
