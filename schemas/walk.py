"""Walking a JSON Schema document: every subschema with its path, and the types a node declares.

Only schema positions are visited: the values of `enum`, `const`, `default` or `examples` are data, and a
property *named* `pattern` is not the keyword. The limit checks, the linter, grounding, substring marks and
the schema graph's index (`schemas.refs`) walk schemas through here."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

SINGLE_SCHEMA_KEYWORDS = (
    "additionalProperties", "unevaluatedProperties", "propertyNames", "contains", "additionalItems",
    "unevaluatedItems", "not", "if", "then", "else", "contentSchema", "items",
)
LIST_SCHEMA_KEYWORDS = ("allOf", "anyOf", "oneOf", "prefixItems", "items")
MAP_SCHEMA_KEYWORDS = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas", "dependencies")


def iter_subschemas(schema: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[tuple[Any, ...], dict[str, Any]]]:
    """Every (path, subschema) of a schema document, the root first (depth first, in document order).

    Boolean schemas are skipped."""
    stack: list[tuple[tuple[Any, ...], Any]] = [(path, schema)]
    while stack:
        here, node = stack.pop()
        if not isinstance(node, dict):
            continue
        yield here, node
        children: list[tuple[tuple[Any, ...], Any]] = []
        for key in SINGLE_SCHEMA_KEYWORDS:
            if isinstance(node.get(key), dict):
                children.append(((*here, key), node[key]))
        for key in LIST_SCHEMA_KEYWORDS:
            if isinstance(node.get(key), list):
                children.extend(((*here, key, i), sub) for i, sub in enumerate(node[key]))
        for key in MAP_SCHEMA_KEYWORDS:
            if isinstance(node.get(key), dict):
                children.extend(((*here, key, name), sub) for name, sub in node[key].items())
        stack.extend(reversed(children))


def schema_types(node: dict[str, Any]) -> set[str]:
    """The types a schema node declares with `type` (a name or a list of names); none: the empty set."""
    kind = node.get("type")
    if isinstance(kind, str):
        return {kind}
    return {k for k in kind if isinstance(k, str)} if isinstance(kind, list) else set()
