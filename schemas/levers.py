"""How each field of a schema is decoded, and the settings the measurements say cost quality.

`extract validate` prints it, and a run logs its summary, so a user sees the levers before the first row:
per field, grounded (with its kind), an enum or const, or free (with its grammar-only bound, if any); and a
one-line warning for each setting that measured worse on the sample and DeepJSONEval (docs/quality.md):
no few-shot examples, a free string with no bound (a run-on value reaches max_tokens), a number the
document's own numbers do not ground.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

from schemas.bounds import SELF_BOUNDED_FORMATS, is_free_string
from schemas.grounding import KEY, field_kinds
from schemas.refs import graph_for
from schemas.walk import schema_types


@dataclass(frozen=True)
class FieldDecoding:
    field: str  # the field's place in a record: vendor.name, items[]
    how: str  # grounded, enum, const, free
    detail: str = ""  # the kind, the enum's size, the free field's type and bound

    def line(self) -> str:
        return f"{self.field}: {self.how}" + (f" ({self.detail})" if self.detail else "")


def _all_types(node: dict[str, Any]) -> set[str]:
    """The node's types and those of its anyOf/oneOf branches."""
    found = schema_types(node)
    for branch in node.get("anyOf") or node.get("oneOf") or []:
        if isinstance(branch, dict):
            found |= _all_types(branch)
    return found


def _value_node(node: dict[str, Any]) -> dict[str, Any]:
    """A nullable field's value alternative (the node itself otherwise)."""
    branches = [b for b in node.get("anyOf") or node.get("oneOf") or [] if isinstance(b, dict)
                and b.get("type") != "null"]
    return branches[0] if len(branches) == 1 else node


class _Walker:
    """Walks a schema's fields as a record holds them (properties, items, references), with each node's path in
    the schema document, to match `field_kinds`."""

    def __init__(self, root: dict[str, Any], kinds: dict[tuple[Any, ...], str | None], string_bound: Any) -> None:
        self.root = root
        self.graph = graph_for(root)
        self.kinds = kinds
        self.string_bound = string_bound
        self.found: list[FieldDecoding] = []

    def resolve(self, node: dict[str, Any], path: tuple[Any, ...],
                seen: frozenset[int]) -> tuple[dict[str, Any] | None, tuple[Any, ...], frozenset[int]]:
        """`node` with its references followed, at its target's path (None: a recursive reference)."""
        if not self.graph.refers(node):
            return node, path, seen
        view = self.graph.expand(node, seen)
        if view.problem == "cycle":
            return None, path, seen
        if view.node is None:
            return node, path, seen
        where = self.graph.path_of(view.origin)
        return view.node, where if where is not None else path, view.trail

    def walk(self, node: Any, path: tuple[Any, ...], name: str, seen: frozenset[int]) -> None:
        if not isinstance(node, dict):
            return
        if path in self.kinds:
            self.found.append(self.leaf(node, path, name))
            return
        resolved, path, seen = self.resolve(node, path, seen)
        if resolved is None:
            self.found.append(FieldDecoding(name or "(record)", "free", "recursive"))
            return
        node = resolved
        value = _value_node(node)
        if value is not node:
            index = (node.get("anyOf") or node.get("oneOf")).index(value)
            value_path = (*path, "anyOf" if "anyOf" in node else "oneOf", index)
            return self.walk(value, value_path, name, seen)
        if isinstance(node.get("properties"), dict):
            for key, sub in node["properties"].items():
                self.walk(sub, (*path, "properties", key), f"{name}.{key}" if name else key, seen)
            return
        if isinstance(node.get("items"), dict):
            return self.walk(node["items"], (*path, "items"), f"{name}[]", seen)
        self.found.append(self.leaf(node, path, name))

    def leaf(self, node: dict[str, Any], path: tuple[Any, ...], name: str) -> FieldDecoding:
        name = name or "(record)"
        kind = self.kinds.get(path)
        if kind is not None:
            return FieldDecoding(name, "grounded", kind)
        value = _value_node(node)
        if "enum" in value:
            return FieldDecoding(name, "enum", f"{len(value['enum'])} values")
        if "const" in value:
            return FieldDecoding(name, "const")
        types = _all_types(node) - {"null"}
        detail = "/".join(sorted(types)) or "any"
        if node.get(KEY) is False:
            detail += ", x-grounded: false"
        if "string" in types:
            detail += ", " + self.string_limit(value)
        return FieldDecoding(name, "free", detail)

    def string_limit(self, value: dict[str, Any]) -> str:
        if "maxLength" in value:
            return f"maxLength {value['maxLength']}"
        if value.get("format") in SELF_BOUNDED_FORMATS or "pattern" in value:
            return f"bounded by its {'format' if 'format' in value else 'pattern'}"
        if self.string_bound is None or not is_free_string(value):  # the grammar bounds no other format
            return "no bound"
        return f"bounded to {self.string_bound} characters in the grammar" if isinstance(self.string_bound, int) \
            else "bounded in the grammar to fit max_tokens"  # per-row schemas: each its own bound


def field_decodings(json_schema: dict[str, Any], mode: str = "auto", all_numbers: bool = False,
                    string_bound: Any = None) -> list[FieldDecoding]:
    """Each field of the schema and how it is decoded under schema_policy.grounding `mode`, in schema order.
    `string_bound` is schema_policy.max_string_length (an int, "auto", or None)."""
    walker = _Walker(json_schema, field_kinds(json_schema, mode, all_numbers), string_bound)
    walker.walk(json_schema, (), "", frozenset())
    return walker.found


def summary(decodings: list[FieldDecoding]) -> str:
    """One line: how many fields are decoded which way (grounded by kind, enum, free)."""
    counts = Counter(d.how for d in decodings)
    kinds = Counter(d.detail for d in decodings if d.how == "grounded")
    parts = []
    if counts["grounded"]:
        parts.append(f"{counts['grounded']} grounded ({', '.join(f'{k} {n}' for k, n in sorted(kinds.items()))})")
    parts += [f"{counts[how]} {how}" for how in ("enum", "const", "free") if counts[how]]
    return ", ".join(parts) or "no fields"


def warnings(decodings: list[FieldDecoding], examples: int, constrained: bool = True) -> list[str]:
    """One line per setting that measured worse (docs/quality.md), naming the fields it concerns."""
    found = []
    if examples == 0:
        found.append("no few-shot examples: on the sample they were worth +0.15 F1 to the bundled model "
                     "(examples: FILE, or the model's json_schema_extra examples)")
    if not constrained:
        return found
    unbounded = [d.field for d in decodings if d.how == "free" and "no bound" in d.detail]
    if unbounded:
        found.append(f"free string with no bound: {', '.join(unbounded)}: a run-on value reaches max_tokens "
                     "(truncated); set maxLength, or schema_policy.max_string_length: auto")
    numbers = [d.field for d in decodings if d.how == "free" and d.detail.split(",")[0] in
               ("number", "integer", "integer/number")]
    if numbers:
        found.append(f"number not grounded: {', '.join(numbers)}: the model may write a number the document "
                     "does not (schema_policy.grounding: auto grounds it)")
    return found
