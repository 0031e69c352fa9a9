"""Required names an object does not declare, declared: the grammar closes every object it is given.

JSON Schema lets an object without `additionalProperties: false` hold names its `properties` do not list, and
`required` may name them (`"required": ["appearance"]` beside `"properties": {"morphology": ...}`). Every grammar
backend closes objects to the names they declare (`docs/schemas.md`), so no output of such a schema could pass it:
each document was a `schema_violation` dead letter (DeepJSONEval dev: 4 of 130 zh schemas and 3 of 136 en, every
document of each). `declare_required` gives each such name the schema that JSON Schema applies to it: the
matching `patternProperties` schemas, else the `additionalProperties` schema, else any value (`{}`). Validation's
verdict does not change (the same schema applies to the name as before); the grammar can now write it. Under
`additionalProperties: false` the name cannot be present: the schema is left as written (`schemas lint` says so).
"""

from __future__ import annotations

import re
from typing import Any

from schemas.walk import LIST_SCHEMA_KEYWORDS, MAP_SCHEMA_KEYWORDS, SINGLE_SCHEMA_KEYWORDS


def undeclared_required(node: dict[str, Any]) -> list[str]:
    """The names `node` requires that its `properties` do not declare (an object node, else [])."""
    required = node.get("required")
    if not isinstance(required, list):
        return []
    properties = node.get("properties")
    declared = properties if isinstance(properties, dict) else {}
    return [name for name in required if isinstance(name, str) and name not in declared]


def _schema_for(node: dict[str, Any], name: str) -> Any | None:
    """The schema JSON Schema applies to an undeclared `name` of `node`; None when no value may be there."""
    patterns = node.get("patternProperties")
    matching = []
    if isinstance(patterns, dict):
        for pattern, sub in patterns.items():
            try:
                if re.search(pattern, name):
                    matching.append(sub)
            except re.error:
                continue
    if matching:
        return matching[0] if len(matching) == 1 else {"allOf": matching}
    extra = node.get("additionalProperties", True)
    if extra is False:
        return None
    return {} if extra is True else extra


def _children(schema: dict[str, Any]) -> dict[str, Any]:
    """The subschema keywords of `schema` whose values `declare_required` changes, with their new values."""
    changed: dict[str, Any] = {}
    for key in SINGLE_SCHEMA_KEYWORDS:
        sub = schema.get(key)
        if isinstance(sub, dict) and (new := declare_required(sub)) is not sub:
            changed[key] = new
    for key in LIST_SCHEMA_KEYWORDS:
        subs = schema.get(key)
        if isinstance(subs, list):
            new_list = [declare_required(sub) for sub in subs]
            if any(a is not b for a, b in zip(new_list, subs, strict=True)):
                changed[key] = new_list
    for key in MAP_SCHEMA_KEYWORDS:
        subs = schema.get(key)
        if isinstance(subs, dict):
            new_map = {name: declare_required(sub) for name, sub in subs.items()}
            if any(new_map[name] is not subs[name] for name in subs):
                changed[key] = new_map
    return changed


def declare_required(schema: Any) -> Any:
    """`schema` with every undeclared required name declared (`_schema_for`); the same object when nothing
    changes, and unchanged subschemas shared, not copied."""
    if not isinstance(schema, dict):
        return schema
    changed = _children(schema)
    additions = {name: found for name in undeclared_required(schema)
                 if (found := _schema_for(schema, name)) is not None}
    if additions:
        properties = changed.get("properties", schema.get("properties"))
        changed["properties"] = {**(properties if isinstance(properties, dict) else {}), **additions}
    return {**schema, **changed} if changed else schema
