"""The schema, as far as scoring needs it: declared keys, item schemas, sets and formats at a record path."""

from __future__ import annotations

from typing import Any

from schemas.refs import graph_for


class SchemaView:
    """Looks up the subschema at a record path: references followed (`schemas.refs.SchemaGraph`),
    `anyOf`/`oneOf`/`allOf` merged.

    Only what scoring needs: the declared keys of an object, the item schema of a list, whether a
    list is a set, and a string's `format`. Anything unresolvable reads as "unknown" (`{}`).
    """

    MAX_DEPTH = 32

    def __init__(self, root: dict[str, Any] | None) -> None:
        self.root = root if isinstance(root, dict) else {}
        self.graph = graph_for(self.root)

    def branches(self, node: Any, depth: int = 0) -> list[dict[str, Any]]:
        """`node` and every schema it is combined with, each with its references followed (one that does not
        resolve: the node's own keywords)."""
        if not isinstance(node, dict) or depth > self.MAX_DEPTH:
            return []
        if self.graph.refers(node):
            node = self.graph.expand(node).node or self.graph.siblings(node)
        out = [node]
        for key in ("anyOf", "oneOf", "allOf"):
            for sub in node.get(key) or []:
                out += self.branches(sub, depth + 1)
        return out

    def declared(self, node: Any) -> set[str] | None:
        """The keys an object schema names, or None when it names none or admits others by schema."""
        keys: set[str] = set()
        named = False
        for branch in self.branches(node):
            if isinstance(branch.get("additionalProperties"), dict) or branch.get("additionalProperties") is True \
                    or branch.get("patternProperties"):
                return None
            if isinstance(branch.get("properties"), dict):
                named = True
                keys.update(branch["properties"])
        return keys if named else None

    def child(self, node: Any, key: str) -> dict[str, Any]:
        for branch in self.branches(node):
            props = branch.get("properties")
            if isinstance(props, dict) and isinstance(props.get(key), dict):
                return props[key]
        for branch in self.branches(node):
            if isinstance(branch.get("additionalProperties"), dict):
                return branch["additionalProperties"]
        return {}

    def items(self, node: Any) -> dict[str, Any]:
        for branch in self.branches(node):
            if isinstance(branch.get("items"), dict):
                return branch["items"]
        return {}

    def is_set(self, node: Any) -> bool:
        return any(branch.get("uniqueItems") is True for branch in self.branches(node))

    def format(self, node: Any) -> str | None:
        for branch in self.branches(node):
            if isinstance(branch.get("format"), str):
                return branch["format"]
        return None
