"""`schema_policy.max_string_length` / `max_array_items`: bounds for the grammar only.

A small model under a grammar can write a string ("1234567890…") or a list until `max_tokens` runs out;
the output is then a `truncated` dead letter. Bounding every unbounded string and array in the schema
the *grammar* is compiled from makes the model close them. The user's schema, the post-check and the
output columns keep the schema as written: a bound is a decoding limit, not a new rule for the data.
"""

from __future__ import annotations

import copy
from typing import Any

SELF_BOUNDED_FORMATS = {"date", "time", "date-time", "uuid", "ipv4", "ipv6", "duration"}
SUBSCHEMA_LISTS = ("anyOf", "oneOf", "allOf", "prefixItems")
SUBSCHEMA_MAPS = ("properties", "$defs", "definitions", "patternProperties")
SUBSCHEMA_ONE = ("items", "additionalProperties", "not", "if", "then", "else", "contains")


def _types(node: dict[str, Any]) -> set[str]:
    kind = node.get("type")
    return {kind} if isinstance(kind, str) else {k for k in kind if isinstance(k, str)} if isinstance(kind, list) \
        else set()


def _bound(node: Any, max_string: int | None, max_items: int | None) -> None:
    if not isinstance(node, dict):
        return
    types = _types(node)
    if max_string is not None and "string" in types and not ({"maxLength", "enum", "const", "pattern"} & set(node)) \
            and node.get("format") not in SELF_BOUNDED_FORMATS:
        node["maxLength"] = max_string
    if max_items is not None and "array" in types and "maxItems" not in node:
        node["maxItems"] = max_items
    for key in SUBSCHEMA_LISTS:
        for sub in node.get(key) or []:
            _bound(sub, max_string, max_items)
    for key in SUBSCHEMA_MAPS:
        if isinstance(node.get(key), dict):
            for sub in node[key].values():
                _bound(sub, max_string, max_items)
    for key in SUBSCHEMA_ONE:
        _bound(node.get(key), max_string, max_items)


def grammar_schema(json_schema: dict[str, Any], max_string: int | None, max_items: int | None) -> dict[str, Any]:
    """A copy of `json_schema` with `maxLength` on every unbounded string and `maxItems` on every unbounded
    array (the schema itself when both are None)."""
    if max_string is None and max_items is None:
        return json_schema
    bounded = copy.deepcopy(json_schema)
    _bound(bounded, max_string, max_items)
    return bounded
