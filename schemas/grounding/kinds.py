"""Which grounding kind each field of a schema gets (`field_kinds`): its `x-grounded` mark, or under
`schema_policy.grounding: auto` the kind its type, format and name give it."""

from __future__ import annotations

import re
from typing import Any

from schemas.pointer import pointer
from schemas.refs import SchemaGraph
from schemas.walk import iter_subschemas

KEY = "x-grounded"
KINDS = ("number", "date", "word", "text", "cell")

def has_grounded(json_schema: Any) -> bool:
    """Whether any field of the schema is marked `x-grounded` with a kind."""
    return any(node.get(KEY) in KINDS for _, node in iter_subschemas(json_schema))


def bad_marks(json_schema: Any) -> list[str]:
    """Every `x-grounded` that is neither one of `KINDS` nor `false`, by its place in the schema."""
    return [f"#{pointer(path)}: x-grounded {node[KEY]!r} is not one of {', '.join(KINDS)}, or false"
            for path, node in iter_subschemas(json_schema)
            if KEY in node and node[KEY] is not False and node[KEY] not in KINDS]



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
    if {"enum", "const", "allOf", "not", "if", "properties", "items"} & set(node) or SchemaGraph.refers(node):
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

    Numbers and integers → `number`; `format: date`, or a description asking for YYYY-MM-DD → `date`;
    `format: email|uri|hostname` → `word`; other plain strings → `text`, or `item` inside an array (whole
    cells in a tabular document, where a list of strings is most often its rows; spans in prose); an enum of
    codes (`_codes`: USD, EUR, AB+, ...) → `code`, the codes the document writes (all of them where it writes
    none). Other formats (date-time, uuid, ...), booleans, other enums (categories), consts, objects and arrays
    stay as they are. (`_kind_of` then gives a plain string whose name says what it holds `email`, `phone` or
    `url`: `named_kind`.)"""
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
        if asks_iso_date(node):
            return "date"
        return "item" if in_array else "text"
    return {"date": "date", "email": "word", "uri": "word", "hostname": "word"}.get(fmt)


# A description that asks for a date as YYYY-MM-DD (not a date and time: `YYYY-MM-DDTHH:MM`, `YYYY-MM-DD hh:mm`).
# Grounded as text, such a field offers the document's words and the normal forms of its dates, and the model
# picks a word (DeepJSONEval zh dev, all 130: "date of birth in YYYY-MM-DD format" right 0 of 18 times, its values
# a blood type, a postcode, a house number); as a date it offers the dates the document writes, as YYYY-MM-DD.
ISO_DATE_ASKED = re.compile(r"\byyyy-mm-dd\b(?![ t]*hh)", re.IGNORECASE)


def asks_iso_date(node: dict[str, Any]) -> bool:
    """Whether a plain string field's description (or its branches') asks for a date written YYYY-MM-DD."""
    texts = [node.get("description")]
    texts += [b.get("description") for b in node.get("anyOf") or node.get("oneOf") or [] if isinstance(b, dict)]
    return any(isinstance(t, str) and ISO_DATE_ASKED.search(t) for t in texts)


CODE = re.compile(r"[A-Z0-9][A-Z0-9_.+-]*")  # `+` too: blood types (`AB+`), ratings (`AA+`)


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
CURRENCY_WORDS = frozenset({"currency", "currencies", "ccy"})
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
    """`email`, `phone`, `url`, `currency` or `id` for a plain string field whose name says it holds one
    (`customer_email`, `EmailAddress`, `PhoneNumber`, `fax`, `websiteURL`, `currency_code`; `order_number`,
    `StudentID`, `CourseCode`), else None. By
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
    if words_[-1] in CURRENCY_WORDS or "".join(words_[-2:]) in ("currencycode", "isocurrency"):
        return "currency"  # issue 54: an ISO 4217 code, evidenced by the document's symbols (`€` → EUR)
    return "id" if words_[-1] in ID_WORDS or (words_[-1] in NUMBER_WORDS and len(words_) > 1) else None


def _could_ground(node: dict[str, Any], path: tuple[Any, ...]) -> bool:
    return inferred_kind(node, _in_array(path)) is not None

