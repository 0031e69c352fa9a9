"""Schema design help: warnings about schemas that make a model guess, answer before it reasons, or run long.

Under a grammar the model *must* produce something for every required field, in the schema's
property order, until the output is complete. Three consequences are worth a warning:

- `no_escape_hatch`: a required field with no honest way to say "I don't know" (null, or an enum
  value such as "unknown"/"other"/"none") forces the model to invent a value when the document
  does not say. The invented value is well-formed, so nothing downstream catches it.
- `answer_before_reasoning`: fields are generated in order, so a free-text reasoning field placed
  after the answer it supports is written after the answer is already fixed; it cannot help.
- `unbounded_array` / `unbounded_string`: without maxItems / maxLength the grammar lets the model
  run until `max_tokens`, and a truncated output is a dead letter.
- `undeclared_required`: `required` names a property that `properties` does not declare. The grammar closes
  objects, so the contract declares it with the schema JSON Schema gives it there (`schemas.declared`): any value
  unless `additionalProperties` or `patternProperties` say more, and never under `additionalProperties: false`,
  where no output can pass.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from schemas.declared import undeclared_required
from schemas.refs import graph_for
from schemas.walk import schema_types

ESCAPE_VALUE = re.compile(
    r"^(unknown|other|others|none|null|n/?a|na|not[ _-]?(applicable|available|specified|stated|found|given|sure)"
    r"|unspecified|undetermined|undefined|no[ _-]?(answer|data|value)|missing|tbd|unsure|don'?t[ _-]?know)$",
    re.IGNORECASE,
)
REASONING_NAME = re.compile(
    r"(reason|rationale|explanation|explain|thought|thinking|notes?$|justification|justify|analysis|"
    r"chain[_ -]?of[_ -]?thought|\bcot\b|scratchpad|deliberation|step[_ -]?by[_ -]?step)",
    re.IGNORECASE,
)
# Formats whose values have a short maximum length of their own.
BOUNDED_FORMATS = {"date", "time", "date-time", "uuid", "ipv4", "ipv6", "duration"}


@dataclass(frozen=True)
class LintWarning:
    code: str
    path: str  # the field, as a dotted path from the record: vendor.name, items[], (root)
    message: str

    def __str__(self) -> str:
        return f"{self.code} at {self.path}: {self.message}"


class _Linter:
    def __init__(self, schema: dict[str, Any]) -> None:
        self.graph = graph_for(schema)
        self.warnings: list[LintWarning] = []
        self.expanding: set[int] = set()
        self.seen: set[tuple[int, str]] = set()

    def resolve(self, node: Any) -> Any:
        """`node` with its references followed (`schemas.refs.SchemaGraph.expand`; None for a cycle or a reference
        that does not resolve)."""
        return self.graph.expand(node).node

    def branches(self, node: dict[str, Any]) -> list[dict[str, Any]]:
        """The resolved alternatives of an anyOf/oneOf (Optional[X] in Pydantic is anyOf [X, null])."""
        alts = node.get("anyOf") or node.get("oneOf") or []
        return [r for r in (self.resolve(a) for a in alts) if isinstance(r, dict)]

    def nullable(self, node: dict[str, Any]) -> bool:
        if "null" in schema_types(node) or node.get("const", 0) is None:
            return True
        if isinstance(node.get("enum"), list) and None in node["enum"]:
            return True
        return any(self.nullable(b) for b in self.branches(node))

    def escape_values(self, node: dict[str, Any]) -> bool:
        values = list(node.get("enum") or []) if isinstance(node.get("enum"), list) else []
        if "const" in node:
            values.append(node["const"])
        values += [v for b in self.branches(node) for v in (b.get("enum") or []) if isinstance(b.get("enum"), list)]
        return any(isinstance(v, str) and ESCAPE_VALUE.match(v.strip()) for v in values)

    def needs_invention(self, node: dict[str, Any]) -> str | None:
        """Why a value of this schema can only be invented when the document is silent, or None."""
        if self.nullable(node) or self.escape_values(node):
            return None
        if "const" in node:
            return None  # a fixed value: nothing to invent
        types = schema_types(node) or {t for b in self.branches(node) for t in schema_types(b)}
        if isinstance(node.get("enum"), list):
            return "its enum has no null and no value such as 'unknown' or 'other'"
        if types & {"object"} or "properties" in node:
            return None  # its own fields are checked one by one
        if "array" in types:
            return f"it needs at least {node['minItems']} item(s)" if int(node.get("minItems", 0) or 0) > 0 else None
        if "string" in types and types <= {"string"}:
            if node.get("format"):
                return f"it cannot be null and must be a valid {node['format']}"
            if node.get("pattern"):
                return f"it cannot be null and must match {node['pattern']!r}"
            if int(node.get("minLength", 0) or 0) > 0:
                return f"it cannot be null and must be at least {node['minLength']} character(s)"
            return None  # an empty string is a (weak) way to say nothing is known
        if types & {"number", "integer", "boolean"}:
            kinds = "/".join(sorted(types & {"number", "integer", "boolean"}))
            return f"it cannot be null and must be of type {kinds}"
        return None

    def bounded_string(self, node: dict[str, Any]) -> bool:
        if "maxLength" in node or "enum" in node or "const" in node or node.get("format") in BOUNDED_FORMATS:
            return True
        pattern = node.get("pattern")
        return isinstance(pattern, str) and pattern.endswith("$") and not re.search(r"[*+]|\{\d+,\}", pattern)

    def add(self, code: str, path: str, message: str) -> None:
        self.warnings.append(LintWarning(code, path or "(root)", message))

    def visit(self, raw: Any, path: str) -> None:
        view = self.graph.expand(raw)
        if not isinstance(view.node, dict):
            return
        key = (id(view.origin), path)
        if key in self.seen or id(view.origin) in self.expanding:
            return  # a recursive reference: its fields were linted where it was first expanded
        self.seen.add(key)
        self.expanding.add(id(view.origin))
        try:
            self.visit_node(view.node, path)
        finally:
            self.expanding.discard(id(view.origin))

    def visit_node(self, node: dict[str, Any], path: str) -> None:
        types = schema_types(node)
        for branch in (node.get("anyOf") or []) + (node.get("oneOf") or []) + (node.get("allOf") or []):
            self.visit(branch, path)
        if "array" in types or "items" in node or "prefixItems" in node:
            closed_tuple = isinstance(node.get("prefixItems"), list) and node.get("items") is False
            if "maxItems" not in node and not closed_tuple:
                self.add("unbounded_array", path, "the list has no maxItems: set one so a long list cannot run "
                         "into max_tokens and be truncated")
            items = node.get("items")
            if isinstance(items, dict):
                self.visit(items, f"{path}[]")
            for i, sub in enumerate(node.get("prefixItems") or []):
                self.visit(sub, f"{path}[{i}]")
        if "string" in types and not self.bounded_string(node):
            self.add("unbounded_string", path, "the string has no maxLength: set one so a run-on value cannot "
                     "reach max_tokens and be truncated")
        properties = node.get("properties")
        if isinstance(properties, dict):
            self.object_fields(node, properties, path)
        for name in undeclared_required(node):
            where = f"{path}.{name}" if path else name
            if node.get("additionalProperties") is False:
                self.add("undeclared_required", where, "required, but `properties` does not declare it and "
                         "additionalProperties is false: no output can pass this schema; declare it")
            else:
                self.add("undeclared_required", where, "required, but `properties` does not declare it: the model "
                         "may write any value there; declare it with a type (or drop it from `required`)")
        if isinstance(node.get("additionalProperties"), dict):
            self.visit(node["additionalProperties"], f"{path}.*" if path else "*")

    def object_fields(self, node: dict[str, Any], properties: dict[str, Any], path: str) -> None:
        required = set(node.get("required") or [])
        names = list(properties)
        for name in names:
            sub = self.resolve(properties[name])
            where = f"{path}.{name}" if path else name
            if name in required and isinstance(sub, dict):
                why = self.needs_invention(sub)
                if why:
                    self.add("no_escape_hatch", where, f"required, and {why}: if the document does not say, "
                             "the model must invent a value; allow null or an 'unknown' value")
            self.visit(properties[name], where)
        self.reasoning_order(properties, names, path)

    def reasoning_order(self, properties: dict[str, Any], names: list[str], path: str) -> None:
        for position, name in enumerate(names):
            sub = self.resolve(properties[name])
            free_text = isinstance(sub, dict) and ("string" in schema_types(sub) or not schema_types(sub)) \
                and "enum" not in sub
            if not (REASONING_NAME.search(name) and free_text):
                continue
            answers = [n for n in names[:position] if not REASONING_NAME.search(n)]
            if answers:
                where = f"{path}.{name}" if path else name
                shown = ", ".join(repr(a) for a in answers[:5]) + (", ..." if len(answers) > 5 else "")
                self.add("answer_before_reasoning", where,
                         f"{shown} come(s) before this reasoning field; fields are generated in order, so the "
                         f"answer is fixed before the reasoning is written: move {name!r} first")


def lint(json_schema: dict[str, Any]) -> list[LintWarning]:
    """Design warnings for a JSON Schema used as an extraction target, in document order."""
    linter = _Linter(json_schema)
    linter.visit(json_schema, "")
    return linter.warnings
