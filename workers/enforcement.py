"""What each grammar backend enforces, measured: `PROBES` (small schemas with instances that satisfy and violate
one keyword), `derive_enforcement` (feeds them to a backend's own grammar matcher, through a
`workers.compiler.SchemaCompiler`), and `ENFORCEMENT`, the measured result, kept as data in
`workers/enforcement_table.py` (`python -m workers.compiler --derive` prints it again; tests re-derive part of it
from the engines so it cannot rot). Whatever the chosen backend leaves out is enforced by the post-check
(`schemas.validation.full_validator`) on every emitted record; `unenforced_keywords`, `refused_keywords` and
`enforced_by` read a schema against the table.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Protocol

from schemas.pointer import pointer
from schemas.validation import checked_formats, draft_name
from schemas.walk import iter_subschemas, schema_types
from workers.enforcement_table import ENFORCEMENT as TABLE


class Prober(Protocol):
    def probe(self, json_schema: dict[str, Any], backend: str, instances: list[str]) -> tuple[str | None, list[bool]]:
        ...


# --- the probes ----------------------------------------------------------------------------------------

D7 = "http://json-schema.org/draft-07/schema#"
D4 = "http://json-schema.org/draft-04/schema#"


@dataclass(frozen=True)
class Probe:
    """One keyword in one context: a schema, instances that satisfy it and instances that violate it."""

    id: str
    keyword: str
    schema: dict[str, Any]
    good: tuple[Any, ...]
    bad: tuple[Any, ...]


def _field(sub: dict[str, Any], draft: str | None = None) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "properties": {"v": sub}, "required": ["v"]}
    if draft:
        schema = {"$schema": draft, **schema}
    return schema


def _p(probe_id: str, keyword: str, sub: dict[str, Any], good: Iterable[Any], bad: Iterable[Any],
       draft: str | None = None) -> Probe:
    """A probe on a single field `v`: instances are the field's values."""
    return Probe(probe_id, keyword, _field(sub, draft), tuple({"v": g} for g in good), tuple({"v": b} for b in bad))


def _o(probe_id: str, keyword: str, schema: dict[str, Any], good: Iterable[Any], bad: Iterable[Any]) -> Probe:
    """A probe on a whole object schema."""
    return Probe(probe_id, keyword, schema, tuple(good), tuple(bad))


_INT = {"type": "integer"}
_FORMAT_CASES: dict[str, tuple[list[str], list[str]]] = {
    "date": (["2024-01-31"], ["hello", "2024-13-45"]),
    "date-time": (["2024-01-31T10:20:30Z"], ["hello", "2024-01-31"]),
    "time": (["10:20:30Z"], ["hello", "25:99:00Z"]),
    "duration": (["P3D"], ["hello", "P"]),
    "email": (["ann@example.com"], ["hello", "a b@c"]),
    "idn-email": (["ann@example.com"], ["hello"]),
    "hostname": (["example.com"], ["-bad-", "a b"]),
    "idn-hostname": (["example.com"], ["-bad-"]),
    "ipv4": (["10.1.2.3"], ["hello", "999.1.1.1"]),
    "ipv6": (["::1"], ["hello", "::g"]),
    "uri": (["https://example.com/a"], ["hello world", "no-scheme"]),
    "uri-reference": (["/a/b"], ["a b"]),
    "iri": (["https://example.com/ä"], ["hello world"]),
    "uri-template": (["/a/{b}"], ["/a/{b"]),
    "uuid": (["123e4567-e89b-12d3-a456-426614174000"], ["hello", "123e4567"]),
    "json-pointer": (["/a/b"], ["a/b"]),
    "relative-json-pointer": (["0/a"], ["/a"]),
    "regex": (["^a+$"], ["("]),
}

PROBES: tuple[Probe, ...] = (
    _p("type", "type", {"type": "string"}, ["a"], [1]),
    _p("type:integer", "type", {"type": "integer"}, [3], [1.5]),
    _p("type:multi", "type", {"type": ["string", "null"]}, [None, "a"], [1]),
    _p("enum", "enum", {"enum": ["a", "b"]}, ["a"], ["c"]),
    _p("enum:object", "enum", {"enum": [{"a": 1}, [1]]}, [{"a": 1}], [{"a": 2}, [2]]),
    _p("const:scalar", "const", {"const": "x"}, ["x"], ["y"]),
    _p("const:object", "const", {"const": {"a": 1}}, [{"a": 1}], [{"a": 2}]),
    _p("minLength", "minLength", {"type": "string", "minLength": 3}, ["abcd"], ["ab"]),
    _p("maxLength", "maxLength", {"type": "string", "maxLength": 3}, ["ab"], ["abcdef"]),
    _p("pattern", "pattern", {"type": "string", "pattern": "^[a-z]+$"}, ["abc"], ["ABC"]),
    _p("pattern:unanchored", "pattern", {"type": "string", "pattern": "b"}, ["abc"], ["xyz"]),
    _p("minLength+pattern", "minLength", {"type": "string", "pattern": "^[a-z]+$", "minLength": 3}, ["abcd"], ["ab"]),
    _p("maxLength+pattern", "maxLength", {"type": "string", "pattern": "^[a-z]+$", "maxLength": 3}, ["ab"],
       ["abcdef"]),
    _p("minLength+format", "minLength", {"type": "string", "format": "email", "minLength": 12}, ["abcdef@example.com"],
       ["a@b.co"]),
    _p("maxLength+format", "maxLength", {"type": "string", "format": "email", "maxLength": 8}, ["a@b.co"],
       ["abcdef@example.com"]),
    *(_p(f"format:{name}", "format", {"type": "string", "format": name}, good, bad)
      for name, (good, bad) in _FORMAT_CASES.items()),
    _p("minimum:integer", "minimum", {"type": "integer", "minimum": 5}, [6], [4]),
    _p("maximum:integer", "maximum", {"type": "integer", "maximum": 5}, [4], [6]),
    _p("minimum:number", "minimum", {"type": "number", "minimum": 5}, [6.5], [4.5]),
    _p("maximum:number", "maximum", {"type": "number", "maximum": 5}, [4.5], [6.5]),
    _p("exclusiveMinimum:integer", "exclusiveMinimum", {"type": "integer", "exclusiveMinimum": 5}, [6], [5]),
    _p("exclusiveMaximum:integer", "exclusiveMaximum", {"type": "integer", "exclusiveMaximum": 5}, [4], [5]),
    _p("exclusiveMinimum:number", "exclusiveMinimum", {"type": "number", "exclusiveMinimum": 5}, [5.5], [5, 4.5]),
    _p("exclusiveMaximum:number", "exclusiveMaximum", {"type": "number", "exclusiveMaximum": 5}, [4.5], [5, 5.5]),
    _p("exclusiveMinimum:draft4", "exclusiveMinimum", {"type": "number", "minimum": 5, "exclusiveMinimum": True},
       [6], [5], draft=D4),
    _p("exclusiveMaximum:draft4", "exclusiveMaximum", {"type": "number", "maximum": 5, "exclusiveMaximum": True},
       [4], [5], draft=D4),
    _p("multipleOf:integer", "multipleOf", {"type": "integer", "multipleOf": 3}, [6], [7]),
    _p("multipleOf:number", "multipleOf", {"type": "number", "multipleOf": 0.5}, [1.5], [1.25]),
    _p("minItems", "minItems", {"type": "array", "items": _INT, "minItems": 2}, [[1, 2]], [[1]]),
    _p("maxItems", "maxItems", {"type": "array", "items": _INT, "maxItems": 2}, [[1]], [[1, 2, 3]]),
    _p("uniqueItems", "uniqueItems", {"type": "array", "items": _INT, "uniqueItems": True}, [[1, 2]], [[1, 1]]),
    _p("contains", "contains", {"type": "array", "items": _INT, "contains": {"const": 5}}, [[1, 5]], [[1, 2]]),
    _p("minContains", "minContains", {"type": "array", "items": _INT, "contains": {"const": 5}, "minContains": 2},
       [[5, 5]], [[5, 1]]),
    _p("maxContains", "maxContains", {"type": "array", "items": _INT, "contains": {"const": 5}, "maxContains": 1},
       [[5, 1]], [[5, 5]]),
    _p("prefixItems", "prefixItems", {"type": "array", "prefixItems": [_INT, {"type": "string"}]}, [[1, "a"]],
       [["a", 1]]),
    _p("items:false", "items", {"type": "array", "prefixItems": [_INT], "items": False}, [[1]], [[1, 2]]),
    _p("items:array", "items", {"type": "array", "items": [_INT, {"type": "string"}]}, [[1, "a"]], [["a", 1]],
       draft=D7),
    _p("additionalItems", "additionalItems", {"type": "array", "items": [_INT], "additionalItems": False}, [[1]],
       [[1, 2]], draft=D7),
    _p("unevaluatedItems", "unevaluatedItems", {"type": "array", "prefixItems": [_INT], "unevaluatedItems": False},
       [[1]], [[1, 2]]),
    _o("required", "required", {"type": "object", "properties": {"a": _INT}, "required": ["a"]}, [{"a": 1}], [{}]),
    _o("additionalProperties:false", "additionalProperties",
       {"type": "object", "properties": {"a": _INT}, "additionalProperties": False}, [{"a": 1}], [{"a": 1, "b": 2}]),
    _o("additionalProperties:schema", "additionalProperties",
       {"type": "object", "properties": {"a": _INT}, "additionalProperties": _INT}, [{"a": 1, "b": 2}],
       [{"a": 1, "b": "x"}]),
    _o("additionalProperties:absent", "properties", {"type": "object", "properties": {"a": _INT}}, [{"a": 1, "b": 2}],
       []),
    _o("patternProperties", "patternProperties", {"type": "object", "patternProperties": {"^x_[a-z]+$": _INT}},
       [{"x_a": 1}], [{"x_a": "s"}]),
    _o("propertyNames", "propertyNames", {"type": "object", "propertyNames": {"pattern": "^[a-z]+$"}}, [{"ab": 1}],
       [{"AB": 1}]),
    _o("minProperties", "minProperties", {"type": "object", "additionalProperties": _INT, "minProperties": 2},
       [{"a": 1, "b": 2}], [{"a": 1}]),
    _o("maxProperties", "maxProperties", {"type": "object", "additionalProperties": _INT, "maxProperties": 1},
       [{"a": 1}], [{"a": 1, "b": 2}]),
    _o("dependentRequired", "dependentRequired",
       {"type": "object", "properties": {"a": _INT, "b": _INT}, "dependentRequired": {"a": ["b"]}},
       [{"a": 1, "b": 2}], [{"a": 1}]),
    _o("dependentSchemas", "dependentSchemas",
       {"type": "object", "properties": {"a": _INT, "b": _INT}, "dependentSchemas": {"a": {"required": ["b"]}}},
       [{"a": 1, "b": 2}], [{"a": 1}]),
    _o("dependencies", "dependencies",
       {"$schema": D7, "type": "object", "properties": {"a": _INT, "b": _INT}, "dependencies": {"a": ["b"]}},
       [{"a": 1, "b": 2}], [{"a": 1}]),
    _o("unevaluatedProperties", "unevaluatedProperties",
       {"type": "object", "properties": {"a": _INT}, "unevaluatedProperties": False}, [{"a": 1}], [{"a": 1, "b": 2}]),
    _p("not", "not", {"type": "integer", "not": {"const": 3}}, [4], [3]),
    _o("if", "if",
       {"type": "object", "properties": {"kind": {"enum": ["a", "b"]}, "x": _INT}, "required": ["kind"],
        "if": {"properties": {"kind": {"const": "a"}}}, "then": {"required": ["x"]}},
       [{"kind": "a", "x": 1}, {"kind": "b"}], [{"kind": "a"}]),
    _p("allOf:single", "allOf", {"allOf": [{"type": "integer", "minimum": 5}]}, [6], [4]),
    _p("allOf:multi", "allOf", {"allOf": [{"type": "string"}, {"enum": ["yes", "no"]}]}, ["yes"], ["maybe", 1]),
    _p("anyOf", "anyOf", {"anyOf": [_INT, {"type": "string", "maxLength": 2}]}, [1, "ab"], ["abcd"]),
    _p("oneOf", "oneOf", {"oneOf": [{"type": "integer", "minimum": 0}, {"type": "integer", "maximum": 10}]}, [20],
       [5]),
    _p("oneOf:disjoint", "oneOf", {"oneOf": [_INT, {"type": "string"}]}, [1, "a"], [1.5]),
)


def compact(instance: Any) -> str:
    """An instance as the engine emits it with `disable_any_whitespace`: no whitespace at all."""
    return json.dumps(instance, separators=(",", ":"), ensure_ascii=False)


def probe_status(rejected: str | None, good: list[bool], bad: list[bool]) -> str:
    """'rejected' (vLLM refuses such schemas), 'error' (no verdict), 'ignored' (every violation
    passes), 'partial' (some pass), 'enforced'; '+narrowed' when valid instances are refused too."""
    if rejected:
        return "rejected"
    if len(good) == 0 and len(bad) == 0:
        return "error"
    status = "ignored" if bad and all(bad) else "partial" if any(bad) else "enforced"
    if not all(good):
        status += "+narrowed"
    return status


def derive_enforcement(compiler: Prober, backend: str, probes: Iterable[Probe] = PROBES) -> dict[str, str]:
    """Each probe's status on `backend`, measured with that backend's grammar matcher."""
    table: dict[str, str] = {}
    for probe in probes:
        texts = [compact(x) for x in (*probe.good, *probe.bad)]
        rejected, accepted = compiler.probe(probe.schema, backend, texts)
        if not accepted:
            table[probe.id] = "rejected" if rejected and rejected.startswith("vLLM") else "error"
            continue
        table[probe.id] = probe_status(rejected, accepted[: len(probe.good)], accepted[len(probe.good):])
    return table


# The measured table, as data (workers/enforcement_table.py); tests/integration/test_coverage.py re-derives a sample.
ENFORCEMENT = TABLE

# --- a schema against the table ------------------------------------------------------------------------

_NOT_ENFORCED = ("ignored", "partial")


def _numeric_suffix(node: dict[str, Any]) -> str:
    types = schema_types(node)
    return ":integer" if types and types <= {"integer"} else ":number"


def _probe_ids(keyword: str, value: Any, node: dict[str, Any]) -> list[str]:
    """The probes that describe `keyword` as it appears in `node` (its context decides which)."""
    rules: dict[str, Callable[[], list[str]]] = {
        "type": lambda: ["type:multi"] if isinstance(value, list) and len(value) > 1
        else ["type:integer"] if "integer" in schema_types(node) else ["type"],
        "enum": lambda: ["enum:object"] if isinstance(value, list) and any(isinstance(v, (dict, list)) for v in value)
        else ["enum"],
        "const": lambda: ["const:object"] if isinstance(value, (dict, list)) else ["const:scalar"],
        "minLength": lambda: [f"minLength+{'format' if 'format' in node else 'pattern'}"]
        if "pattern" in node or "format" in node else ["minLength"],
        "maxLength": lambda: [f"maxLength+{'format' if 'format' in node else 'pattern'}"]
        if "pattern" in node or "format" in node else ["maxLength"],
        "pattern": lambda: ["pattern", "pattern:unanchored"],
        "format": lambda: [f"format:{value}"],
        "exclusiveMinimum": lambda: ["exclusiveMinimum:draft4"] if isinstance(value, bool)
        else [f"exclusiveMinimum{_numeric_suffix(node)}"],
        "exclusiveMaximum": lambda: ["exclusiveMaximum:draft4"] if isinstance(value, bool)
        else [f"exclusiveMaximum{_numeric_suffix(node)}"],
        "minimum": lambda: [f"minimum{_numeric_suffix(node)}"],
        "maximum": lambda: [f"maximum{_numeric_suffix(node)}"],
        "multipleOf": lambda: [f"multipleOf{_numeric_suffix(node)}"],
        "uniqueItems": lambda: ["uniqueItems"] if value is True else [],
        "items": lambda: ["items:false"] if value is False else ["items:array"] if isinstance(value, list) else [],
        "additionalItems": lambda: ["additionalItems"] if value is not True else [],
        "additionalProperties": lambda: ["additionalProperties:false"] if value is False
        else ["additionalProperties:schema"] if isinstance(value, dict) and value else [],
        "allOf": lambda: ["allOf:multi"] if isinstance(value, list) and len(value) > 1 else ["allOf:single"],
    }
    if keyword in rules:
        return rules[keyword]()
    plain = {"minItems", "maxItems", "contains", "minContains", "maxContains", "prefixItems", "unevaluatedItems",
             "required", "patternProperties", "propertyNames", "minProperties", "maxProperties",
             "dependentRequired", "dependentSchemas", "dependencies", "unevaluatedProperties", "not", "if", "anyOf",
             "oneOf"}
    return [keyword] if keyword in plain else []


def _keywords_with_status(json_schema: dict[str, Any], backend: str, wanted: tuple[str, ...]) -> list[tuple[str, str]]:
    table = ENFORCEMENT.get(backend)
    if table is None:
        raise ValueError(f"unknown backend {backend!r}: expected one of {list(ENFORCEMENT)}")
    found: list[tuple[str, str]] = []
    for path, node in iter_subschemas(json_schema):
        for keyword, value in node.items():
            statuses = [table.get(pid, "") for pid in _probe_ids(keyword, value, node)]
            if any(s.split("+")[0] in wanted for s in statuses):
                found.append((keyword, pointer([*path, keyword])))
    return sorted(found, key=lambda item: item[1])


def unenforced_keywords(json_schema: dict[str, Any], backend: str) -> list[tuple[str, str]]:
    """(keyword, JSON pointer to it) for every keyword occurrence `backend`'s grammar will not
    enforce, per the measured `ENFORCEMENT` table. Keywords vLLM refuses outright on that backend
    are not listed: such a schema does not compile there at all."""
    return _keywords_with_status(json_schema, backend, _NOT_ENFORCED)


def refused_keywords(json_schema: dict[str, Any], backend: str) -> list[tuple[str, str]]:
    """(keyword, JSON pointer) for the occurrences that make vLLM refuse the schema on `backend`
    (per `ENFORCEMENT`): vLLM's own message for XGrammar does not say which feature it objects to."""
    return _keywords_with_status(json_schema, backend, ("rejected",))


def enforced_by(json_schema: dict[str, Any], unenforced: list[tuple[str, str]], backend: str | None = None) -> str:
    """Which check enforces what the engine leaves out; names any format that neither the post-check
    nor `backend`'s grammar checks (such a format is an annotation only)."""
    text = f"post-check: JSON Schema {draft_name(json_schema)} validator (jsonschema)"
    checked = set(checked_formats(json_schema))
    engine = ENFORCEMENT.get(backend or "", {})
    unchecked = sorted(
        {f"{node['format']} at {pointer(list(path))}/format" for path, node in iter_subschemas(json_schema)
         if isinstance(node.get("format"), str) and node["format"] not in checked
         and engine.get(f"format:{node['format']}") != "enforced"}
    )
    if unchecked:
        text += "; format not checked by anything (annotation only): " + ", ".join(unchecked)
    return text
