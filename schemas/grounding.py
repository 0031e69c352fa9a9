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
written (or only `null`, when it is nullable). Like `schema_policy.max_string_length`, this shapes the
grammar only: the user's schema, the validators and the output columns stay as written.
"""

from __future__ import annotations

import copy
import json
import re
from datetime import datetime
from typing import Any

import jsonschema

from schemas.cells import EDGE_PUNCTUATION, MAX_WORDS, cells_of, sentences_of
from schemas.labels import field_words
from schemas.pointer import pointer
from schemas.screening import screened
from schemas.substring import LITERALS_KEY, fit_max_words, substring_node
from schemas.verdicts import valid
from schemas.walk import iter_subschemas

KEY = "x-grounded"
KINDS = ("number", "date", "word", "text", "cell")
MAX_CANDIDATES = 2000  # per field and document: beyond this the field keeps its schema (a grammar stays small)

NUMBER = re.compile(r"(?<![\w.])-?\d{1,3}(?:,\d{3})+(?:\.\d+)?(?![\d])|(?<![\w.,])-?\d+(?:\.\d+)?(?![\d])")
MONTH = r"[A-Z][a-z]{2,8}\.?"
DATE_SHAPES: tuple[tuple[re.Pattern[str], tuple[str, ...]], ...] = (
    (re.compile(r"\b\d{4}-\d{1,2}-\d{1,2}\b"), ("%Y-%m-%d",)),
    (re.compile(rf"\b{MONTH} \d{{1,2}},? \d{{4}}\b"), ("%B %d, %Y", "%b %d, %Y", "%B %d %Y", "%b %d %Y")),
    (re.compile(rf"\b\d{{1,2}} {MONTH},? \d{{4}}\b"), ("%d %B %Y", "%d %b %Y", "%d %B, %Y", "%d %b, %Y")),
    (re.compile(r"\b\d{1,2}[./-]\d{1,2}[./-]\d{4}\b"), ("%d.%m.%Y", "%d/%m/%Y", "%m/%d/%Y", "%d-%m-%Y", "%m-%d-%Y")),
)



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
        for candidate in (stripped, _unnumbered(stripped)):
            if candidate:
                found[candidate] = None
    return list(found)


def _unnumbered(value: str) -> str:
    """`#W365213573` without its number sign (`order #60589`), as a record writes the number; else the value."""
    return value[1:].strip(EDGE_PUNCTUATION) if value[:1] == "#" and value[1:2].isalnum() else value


def spans(text: str, max_words: int = MAX_WORDS) -> list[str]:
    """Every run of up to `max_words` consecutive words inside one sentence of a cell, as the text writes it."""
    found: dict[str, None] = {}
    for cell in sentences_of(text):
        bounds = [m.span() for m in re.finditer(r"\S+", cell)]
        for i, (start, _) in enumerate(bounds):
            for _, end in bounds[i:i + max_words]:
                span = cell[start:end]
                stripped = span.strip(EDGE_PUNCTUATION)
                for candidate in (span, span.rstrip(EDGE_PUNCTUATION), stripped, _unnumbered(stripped)):
                    if candidate:
                        found[candidate] = None
    return list(found)


def cells(text: str) -> list[str]:
    """Every whole cell of every line, as written and without the punctuation around it."""
    found: dict[str, None] = {}
    for cell in cells_of(text):
        for candidate in (cell.strip(), cell.strip().rstrip(".,;:")):
            if candidate:
                found[candidate] = None
    return list(found)


TABLE_CELL_WORDS = 24  # a document none of whose cells is longer is tabular (an invoice); else it is prose


def items(text: str) -> list[str]:
    """A list's strings: whole cells in a tabular document (line items, rows), spans in prose, whose cells are
    whole paragraphs no list item is."""
    return cells(text) if all(len(c.split()) <= TABLE_CELL_WORDS for c in cells_of(text)) else spans(text)


EMAIL = re.compile(r"(?<![\w.%+-])[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+(?![\w@-])")
PHONE = re.compile(r"(?<![\w+])\+?(?:\(\d{1,5}\)[ .-]?)?\d[\d .()/-]{5,}\d(?!\w)")
NOT_A_PHONE = re.compile(r"\d{4}-\d{1,2}-\d{1,2}|\d{1,2}[./-]\d{1,2}[./-]\d{2,4}|\d+\.\d{1,2}")
URL = re.compile(r"(?<![\w@/.-])(?:[A-Za-z][A-Za-z0-9+.-]*://|www\.)[^\s<>\"']+"
                 r"|(?<![\w@/.-])[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}(?:/[^\s<>\"']*)?(?![\w@])")


def emails(text: str) -> list[str]:
    """Every email address the text writes, without the brackets or stop around it."""
    return list(dict.fromkeys(m.group() for m in EMAIL.finditer(text)))


def phones(text: str) -> list[str]:
    """Every phone number the text writes: a run of 7 to 15 digits with the spaces, dots, dashes, slashes and
    parentheses numbers are written with, maybe after a `+`; a date or a decimal amount is not one."""
    found: dict[str, None] = {}
    for match in PHONE.finditer(text):
        written = match.group().strip(" .-/")
        if 7 <= sum(c.isdigit() for c in written) <= 15 and not NOT_A_PHONE.fullmatch(written):
            found[written] = None
    return list(found)


def urls(text: str) -> list[str]:
    """Every web address the text writes (`https://...`, `www....`, `brightlane.com/help`), without the
    punctuation after it; an email's domain is not one."""
    return list(dict.fromkeys(m.group().rstrip(EDGE_PUNCTUATION) for m in URL.finditer(text)))


CURRENCY = (r"[$£€¥₹]|\b(?:USD|EUR|GBP|JPY|CHF|CAD|AUD|NZD|CNY|INR|SEK|NOK|DKK|PLN|CZK|HUF|BRL|MXN|ZAR|KRW|SGD|"
            r"HKD|RUB|TRY|AED|SAR|ILS|THB|IDR|MYR|PHP|VND|EGP|NGN|KES|ARS|CLP|COP|PEN)\b")
AMOUNT = r"-?\d{1,3}(?:,\d{3})+(?:\.\d+)?|-?\d+(?:\.\d+)?"
CURRENCY_WORDS = (r"(?i:dollars?|euros?|pounds?|yen|yuan|renminbi|rupees?|francs?|pesos?|rubles?|roubles?|won|"
                  r"kron[aeor]r?|zloty|real|reais|rand|dirhams?|riyals?|shekels?|baht|ringgit|cents?|pence|"
                  r"(?:local )?currency units?)\b")
MONEY_WORDS = (r"(?i:price|paid|pay|total|subtotal|amount|cost|fee|charge|balance|salary|payment|refund|due|sum|"
               r"worth|budget|spen[dt]|earn|income|revenue|fare)")
MONEY = re.compile(rf"(?:{CURRENCY})\s?(?P<a>{AMOUNT})(?![\d.,]\d)"
                   rf"|(?<![\w.,])(?P<b>{AMOUNT})\s?(?:{CURRENCY}|{CURRENCY_WORDS})"
                   rf"|(?<![\w.,])(?P<c>-?\d{{1,3}}(?:,\d{{3}})*\.\d{{2}}|-?\d+\.\d{{2}})(?![\d.,]?\d)"
                   rf"|\b{MONEY_WORDS}\w*\b[^\n\d.!?;]{{0,32}}?(?<![\w.,])(?P<d>{AMOUNT})(?![\d.,]?\d)")


def money(text: str) -> list[float | int]:
    """Every amount the text writes as money: beside a currency sign or code (`USD 34.50`, `129.00 EUR`, `£59`),
    with two decimals (`389.00`), or after a word of money (`Amount paid: 389`); in order of first appearance."""
    found: dict[str, float | int] = {}
    for match in MONEY.finditer(text):
        written = next(g for g in match.group("a", "b", "c", "d") if g is not None).replace(",", "")
        value: float | int = float(written) if "." in written else int(written)
        found.setdefault(json.dumps(value), value)
    return list(found.values())


NOT_AN_ID = re.compile(r"\d{1,4}[-/.]\d{1,2}[-/.]\d{1,4}|\d{1,2}:\d{2}(?::\d{2})?|-?[\d,]*\.\d+|(?:1[89]|20)\d{2}"
                       r"|\d{1,3}(?:,\d{3})+|\d+(?:st|nd|rd|th|s)|\d{1,4}"
                       r"|(?i:\d+(?:[.,]\d+)?-?(?:inch(?:es)?|in|cm|mm|km|m|kg|g|mg|lbs?|oz|ml|l|kw|w|v|mah|[kmgt]b|"
                       r"[kmg]?hz|mp|px|ft|pcs?|pack|piece|pieces|min|hrs?|h|x|k))")  # a quantity: `16-inch`, `65W`


def identifiers(text: str) -> list[str]:
    """Every word with a digit in it that is not a date, a time, a year, a decimal, a grouped number or a number
    of up to 4 digits (a count, a day): `ORD-2026-18198`, `W365213573`, `64225`, `CS305`; with its number sign
    taken off (`#60589`)."""
    return [w for w in words(text) if len(w) > 1 and any(c.isdigit() for c in w) and ID_SHAPE.fullmatch(w)
            and not NOT_AN_ID.fullmatch(w)]


FALLBACK = {"money": "number", "id": "text"}


# `code`, `item` and the named kinds are only inferred (auto): an enum of codes, the strings of a list, and a
# plain string whose name says it holds an email, phone number or web address; none is a mark.
FINDERS = {"number": numbers, "date": dates, "word": words, "text": spans, "cell": cells, "code": words,
           "item": items, "email": emails, "phone": phones, "url": urls, "money": money, "id": identifiers}


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


def _grounded(node: dict[str, Any], kind: str, document: str, cache: dict[str, Any],
              words_: set[str] | None = None, rivals: tuple[set[str], ...] = ()) -> dict[str, Any]:
    if kind not in cache:  # kept in the cache: `_allowed` keys its own cache by the candidate list's id
        cache[kind] = FINDERS[kind](document)
    if kind in FALLBACK and not _nullable(node) and not _allowed(cache[kind], _value_branch(node), cache):
        kind = FALLBACK[kind]  # a required amount or id the document writes in no such shape: as before
        if kind not in cache:
            cache[kind] = FINDERS[kind](document)
    # The field's bounds, with the schema's definitions beside them (a marked enum may be a $ref to one).
    candidates = _allowed(cache[kind], _value_branch(node), cache)
    candidates = screened(candidates, kind, FINDERS, _nullable(node), document, cache, words_, rivals)
    shape = FORMAT_SHAPES.get(_format(node) or "")
    if shape is not None:  # a word is an email (or uri, hostname) only if it looks like one
        candidates = [c for c in candidates if isinstance(c, str) and shape.fullmatch(c)]
    if kind == "code" and not candidates:  # an enum of codes the document does not write: the model chooses
        return _without_key(node)
    if len(candidates) > MAX_CANDIDATES and kind in SUBSTRING_KINDS:
        substring = _substring(node, kind, document, cache)
        if substring is not None:
            return substring
    if not candidates or len(candidates) > MAX_CANDIDATES:
        return {"type": "null"} if _nullable(node) and not candidates else _without_key(node)
    choice: dict[str, Any] = {"enum": candidates}
    if any(isinstance(c, float) and not c.is_integer() for c in candidates):  # 8.7, not 8.6999999999999993
        choice[LITERALS_KEY] = [json.dumps(c) for c in candidates]
    return {"anyOf": [choice, {"type": "null"}]} if _nullable(node) else choice


# Kinds whose candidates are runs of a document's words: past MAX_CANDIDATES (a long document) they are decoded
# under a grammar of any such run instead of an enum (schemas.substring): `text` runs of up to MAX_WORDS words,
# `word` runs of one. Only for a plain string field (a maxLength at most): other bounds keep the schema.
SUBSTRING_KINDS = {"text": MAX_WORDS, "item": MAX_WORDS, "word": 1}
PLAIN_STRING_KEYS = frozenset({"type", "maxLength", "minLength"})


def _substring(node: dict[str, Any], kind: str, document: str, cache: dict[str, Any]) -> dict[str, Any] | None:
    """The field as a substring node (any run of the document's words, as few per run as the grammar's size
    needs), or None where the field has bounds a run cannot honour or no word bound fits."""
    branch = {k: v for k, v in _value_branch(node).items() if k not in ANNOTATIONS}
    if branch.get("type") != "string" or not set(branch) <= PLAIN_STRING_KEYS:
        return None
    max_length = branch.get("maxLength")
    key = ("substring", kind, max_length)
    if key not in cache:
        words_per_run = fit_max_words(document, SUBSTRING_KINDS[kind], max_length)
        cache[key] = None if words_per_run is None else substring_node(document, words_per_run, max_length)
    found = cache[key]
    if found is None:
        return None
    found = dict(found)  # a node of its own for each field (they share the read-only payload)
    return {"anyOf": [found, {"type": "null"}]} if _nullable(node) else found


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
    if set(bounds) <= {"type"} and isinstance(kinds, list) and all(k in TYPE_CHECKS for k in kinds):
        checks = [TYPE_CHECKS[k] for k in kinds]
        allowed = [c for c in found if any(check(c) for check in checks)]
    else:  # the field's bounds, with the schema's definitions beside them (a marked enum may be a $ref to one)
        if "definitions_key" not in cache:  # verdicts are kept across documents (schemas.verdicts)
            cache["definitions_key"] = json.dumps(cache["definitions"], sort_keys=True, default=str)
        schema_key = key[: -len(str(id(found)))] + cache["definitions_key"]
        allowed = [c for c in found if valid(schema_key, branch, cache["definitions"], c)]
    cache[key] = allowed
    return allowed


def _without_key(node: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in node.items() if k != KEY}


def has_grounded(json_schema: Any) -> bool:
    """Whether any field of the schema is marked `x-grounded` with a kind."""
    return any(node.get(KEY) in KINDS for _, node in iter_subschemas(json_schema))


def bad_marks(json_schema: Any) -> list[str]:
    """Every `x-grounded` that is neither one of `KINDS` nor `false`, by its place in the schema."""
    return [f"#{pointer(path)}: x-grounded {node[KEY]!r} is not one of {', '.join(KINDS)}, or false"
            for path, node in iter_subschemas(json_schema)
            if KEY in node and node[KEY] is not False and node[KEY] not in KINDS]


def refusal(json_schema: dict[str, Any], document: str, value: Any, mode: str = "marked",
            all_numbers: bool = False) -> str | None:
    """Why grounding would keep the model from writing `value` for this document (None: it would not): a value
    of a grounded field that is not among the candidates its finder takes from the document."""
    grounded = _ground(json_schema, document, all_numbers, mode)
    if grounded is json_schema:
        return None
    for error in jsonschema.Draft202012Validator(grounded).iter_errors(value):
        where = ".".join(str(p) for p in error.absolute_path) or "(record)"
        return f"{where} {error.instance!r} is not a value the document writes, as its grounding finder reads it"
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


def _leaf_types(node: dict[str, Any]) -> set[str] | None:
    """The value types of a plain leaf field (`type`, or an anyOf/oneOf of plain leaves, null included), or None
    for anything else: an object, an array, an enum or const, a mixed or composite schema."""
    if {"enum", "const", "$ref", "allOf", "not", "if", "properties", "items"} & set(node):
        return None
    branches = node.get("anyOf") or node.get("oneOf")
    if branches is not None:
        if "type" in node or not isinstance(branches, list) or not all(isinstance(b, dict) for b in branches):
            return None
        found: set[str] = set()
        for branch in branches:
            types = _leaf_types(branch)
            if types is None:
                return None
            found |= types
        return found or None
    kind = node.get("type")
    kinds = {kind} if isinstance(kind, str) else set(kind) if isinstance(kind, list) else set()
    return kinds if kinds and kinds <= {"string", "number", "integer", "boolean", "null"} else None


def _format(node: dict[str, Any]) -> str | None:
    if isinstance(node.get("format"), str):
        return node["format"]
    for branch in node.get("anyOf") or node.get("oneOf") or []:
        if isinstance(branch, dict) and isinstance(branch.get("format"), str):
            return branch["format"]
    return None


def inferred_kind(node: dict[str, Any], in_array: bool = False) -> str | None:
    """The kind `schema_policy.grounding: auto` gives an unmarked field (None: decoded as written).

    Numbers and integers → `number`; `format: date` → `date`; `format: email|uri|hostname` → `word`; other
    plain strings → `text`, or `item` inside an array (whole cells in a tabular document, where a list of
    strings is most often its rows; spans in prose); an enum of codes (`_codes`: USD, EUR, ...) → `code`, the
    codes the document writes (all of them where it writes none). Other formats (date-time, uuid, ...),
    booleans, other enums (categories), consts, objects and arrays stay as they are. (`_kind_of` then gives a
    plain string whose name says what it holds `email`, `phone` or `url`: `named_kind`.)"""
    if _codes(node):
        return "code"
    types = _leaf_types(node)
    if types is None:
        return None
    values = types - {"null"}
    if values and values <= {"number", "integer"}:
        return "number"
    if values != {"string"}:
        return None
    fmt = _format(node)
    if fmt is None:
        return "item" if in_array else "text"
    return {"date": "date", "email": "word", "uri": "word", "hostname": "word"}.get(fmt)


CODE = re.compile(r"[A-Z0-9][A-Z0-9_.-]*")


def _codes(node: dict[str, Any]) -> bool:
    """An enum of codes (every value upper-case letters and digits: currency, country, unit codes), maybe
    nullable. A document writes a code as it is, so auto narrows it to the codes the document writes, and
    leaves it whole where the document writes none; an enum of words (a category) stays as it is."""
    branches = [b for b in node.get("anyOf") or node.get("oneOf") or [node] if isinstance(b, dict)
                and b.get("type") != "null"]
    values = branches[0].get("enum") if len(branches) == 1 else None
    return isinstance(values, list) and len(values) > 1 and all(
        isinstance(v, str) and CODE.fullmatch(v) for v in values if v is not None)


# Where a value is not a value the output holds: a field there is never grounded (`not`, conditions, names).
NOT_VALUES = frozenset({"not", "if", "propertyNames", "contains", "dependentSchemas", "dependencies",
                        "unevaluatedProperties", "unevaluatedItems"})
MODES = ("auto", "marked", "off")


def field_kinds(json_schema: Any, mode: str = "auto", all_numbers: bool = False) -> dict[tuple[Any, ...], str | None]:
    """How each field is decoded, by its path in the schema: its grounding kind, or None for a field left
    free (`x-grounded: false`, or no kind under `marked`). Only fields that a mode grounds or could ground are
    listed; a field under a free (`x-grounded: false`) one is not."""
    found: dict[tuple[Any, ...], str | None] = {}
    free: list[tuple[Any, ...]] = []
    skip: list[tuple[Any, ...]] = []
    for path, node in iter_subschemas(json_schema):
        if any(path[:len(p)] == p for p in skip):
            continue
        if node.get(KEY) is False or _not_a_value(path):
            skip.append(path)
            if node.get(KEY) is False:
                free.append(path)
            continue
        kind = _kind_of(node, path, mode, all_numbers)
        if kind is not None or _could_ground(node, path):
            found[path] = kind
            skip.append(path)  # a field's own branches are the field, not fields of their own
    for path in free:
        found[path] = None
    return found


def _not_a_value(path: tuple[Any, ...]) -> bool:
    """Whether `path` ends at a keyword whose subschema does not describe a value of the output (`not`, `if`,
    `propertyNames`, ...), as opposed to a property or definition that happens to have such a name."""
    return bool(path) and path[-1] in NOT_VALUES and (len(path) == 1 or path[-2] not in NAMED)


NAMED = frozenset({"properties", "$defs", "definitions", "patternProperties", "dependentSchemas"})


def _in_array(path: tuple[Any, ...]) -> bool:
    return bool(path) and (path[-1] == "items" or (len(path) > 1 and path[-2] == "prefixItems"))


def _kind_of(node: dict[str, Any], path: tuple[Any, ...], mode: str, all_numbers: bool) -> str | None:
    if mode == "off":
        return None
    if node.get(KEY) in KINDS:
        return node[KEY]
    if mode == "auto":
        kind = inferred_kind(node, _in_array(path))
        if kind == "number":
            return "money" if named_money(path) else kind
        return (named_kind(path) or kind) if kind in ("text", "item") else kind
    return "number" if all_numbers and _numeric(node) else None


NAME_TOKENS = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+")
PHONE_WORDS = frozenset({"phone", "phones", "telephone", "telephones", "mobile", "fax", "tel"})
URL_WORDS = frozenset({"url", "urls", "uri", "website", "websites", "homepage"})
NUMBER_WORDS = frozenset({"number", "numbers", "no", "nr", "num"})
ID_WORDS = frozenset({"id", "ids", "reference", "ref", "sku", "isbn", "serial", "tracking"})
ID_SHAPE = re.compile(r"[A-Za-z0-9][\w/.-]*")


MONEY_NAMES = frozenset({"amount", "amounts", "price", "prices", "cost", "costs", "total", "subtotal", "fee", "fees",
                         "paid", "salary", "balance", "charge", "charges", "payment", "payments", "tax", "refund",
                         "revenue", "budget", "income"})


def named_money(path: tuple[Any, ...]) -> bool:
    """Whether a number field's name says it holds money (`amount`, `unit_price`, `TotalCost`, `salary`): by
    its last word, so `price_count` or `tax_rate` are not."""
    words_ = [w.lower() for w in NAME_TOKENS.findall(field_name(path) or "")]
    return bool(words_) and words_[-1] in MONEY_NAMES


def field_name(path: tuple[Any, ...]) -> str | None:
    """The name of the property that holds the field at `path` (a list's name for its items)."""
    names = field_names(path, 1)
    return names[0] if names else None


def field_names(path: tuple[Any, ...], last: int = 2) -> list[str]:
    """The names of the properties on the way to the field at `path`, the last `last` of them (`vendor`, `name`)."""
    names = [path[i] for i in range(1, len(path))
             if path[i - 1] in ("properties", "patternProperties") and isinstance(path[i], str)]
    return names[-last:]


def named_kind(path: tuple[Any, ...]) -> str | None:
    """`email`, `phone`, `url` or `id` for a plain string field whose name says it holds one (`customer_email`,
    `EmailAddress`, `PhoneNumber`, `fax`, `websiteURL`; `order_number`, `StudentID`, `CourseCode`), else None. By
    the name's last word (before a trailing `address`), so `email_subject` or a postal `address` are not taken;
    a lone `number` is not an identifier's name, nor a `code` (a country or currency code has no digit)."""
    name = field_name(path)
    words_ = [w.lower() for w in NAME_TOKENS.findall(name or "")]
    if len(words_) > 1 and words_[-1] in ("address", "addresses"):
        words_ = words_[:-1]
    if not words_:
        return None
    if words_[-1] in ("email", "emails") or "".join(words_[-2:]) in ("email", "emails"):
        return "email"
    if words_[-1] in PHONE_WORDS or (len(words_) > 1 and words_[-1] in NUMBER_WORDS and words_[-2] in PHONE_WORDS):
        return "phone"
    if words_[-1] in URL_WORDS:
        return "url"
    return "id" if words_[-1] in ID_WORDS or (words_[-1] in NUMBER_WORDS and len(words_) > 1) else None


def _could_ground(node: dict[str, Any], path: tuple[Any, ...]) -> bool:
    return inferred_kind(node, _in_array(path)) is not None


def ground(json_schema: dict[str, Any], document: str | None, all_numbers: bool = False,
           mode: str = "marked") -> dict[str, Any]:
    """The schema for this document's grammar: every grounded field narrowed to the document's candidates
    (the schema itself when nothing is grounded, or without a document). `mode` is schema_policy.grounding:
    `marked` grounds the fields marked `x-grounded` (and with `all_numbers`, schema_policy.ground_numbers,
    every plain number field as if marked `number`); `auto` also grounds every unmarked field that
    `inferred_kind` gives a kind, except those marked `x-grounded: false`; `off` grounds nothing.
    In every mode, an enum of decimals the schema writes itself is spliced as written (`literal_decimals`)."""
    return literal_decimals(_ground(json_schema, document, all_numbers, mode))


def _has_decimal(values: list[Any]) -> bool:
    """Whether an enum's values are numbers (or null), one of them a non-integer float: what XGrammar would
    write with 17 significant digits."""
    return any(isinstance(v, float) and not v.is_integer() for v in values) and all(
        v is None or (isinstance(v, int | float) and not isinstance(v, bool)) for v in values)


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
            mode: str = "marked") -> dict[str, Any]:
    if document is None or mode == "off" or (mode == "marked" and not (all_numbers or has_grounded(json_schema))):
        return json_schema
    kinds = {path: kind for path, kind in field_kinds(json_schema, mode, all_numbers).items() if kind is not None}
    if not kinds:
        return json_schema
    work = copy.deepcopy(json_schema)
    definitions = {key: json_schema[key] for key in ("$defs", "definitions") if isinstance(json_schema.get(key), dict)}
    cache: dict[str, Any] = {"definitions": definitions}
    nodes = dict(iter_subschemas(work))
    named = {path: field_words(field_names(path)) for path in kinds}  # for labels: each field's words
    for path, kind in kinds.items():
        node = nodes[path]
        grounded = _grounded(node, kind, document, cache, named[path],
                             tuple(words_ for other, words_ in named.items() if other != path))
        node.clear()
        node.update(grounded)
    return work
