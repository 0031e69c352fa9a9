"""Bounds on user-supplied JSON Schemas, checked before anything compiles or validates them.

A schema is untrusted input. Three things in the pipeline chew on it: the grammar compiler (whose
time and memory grow with nesting, enum width and regex size), the post-check validator (which runs
every `pattern` against model output: under RE2 in linear time where RE2 can express the pattern, else
under a backtracking engine, where a catastrophic pattern is a denial of service; `schemas.patterns`),
and the `$ref` resolver (which must never reach the network). `check_limits`
rejects a schema over any bound with one line that names the bound; compile time is bounded
separately, by the hard timeout in `workers.compiler`.

This module holds the bounds and their checks; what they stand on has modules of its own: the walker
(`schemas.walk`), JSON pointers (`schemas.pointer`), `$ref` resolution (`schemas.refs`) and the ReDoS
analyser (`schemas.redos`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from schemas.canonical import canonical_json
from schemas.patterns import runs_linear
from schemas.pointer import escape_pointer, pointer
from schemas.redos import redos_risk
from schemas.refs import RefIndex, index_for, join_ref
from schemas.walk import (
    LIST_SCHEMA_KEYWORDS,
    MAP_SCHEMA_KEYWORDS,
    SINGLE_SCHEMA_KEYWORDS,
    iter_subschemas,
)

# Re-exported: the walker, pointer, resolver and ReDoS analyser lived here before they had modules of their own.
__all__ = ["LIST_SCHEMA_KEYWORDS", "MAP_SCHEMA_KEYWORDS", "SINGLE_SCHEMA_KEYWORDS", "RefIndex", "SchemaLimitError",
           "SchemaLimits", "check_limits", "escape_pointer", "iter_subschemas", "join_ref", "pointer", "redos_risk"]


@dataclass(frozen=True)
class SchemaLimits:
    max_bytes: int = 512_000
    max_depth: int = 48
    max_enum: int = 2_000
    max_pattern_length: int = 1_000
    compile_timeout_s: float = 30.0


class SchemaLimitError(ValueError):
    """A schema over one of the `SchemaLimits` bounds; the message is one line naming the bound."""


def _where(parts: tuple[Any, ...] | list[Any]) -> str:
    text = pointer(list(parts)) or "/"
    return text if len(text) <= 160 else text[:150] + "/..."


def _raw_depth(schema: Any, limits: SchemaLimits) -> None:
    """Nesting of the document as written, iteratively, so a 100k-deep document cannot blow the stack."""
    deepest, deepest_path = 0, ()
    stack: list[tuple[Any, int, tuple[Any, ...]]] = [(schema, 1, ())]
    while stack:
        node, depth, here = stack.pop()
        if depth > deepest:
            deepest, deepest_path = depth, here
        if depth > limits.max_depth * 4:  # far enough over to report; do not walk a hostile document further
            break
        children = node.items() if isinstance(node, dict) else enumerate(node)
        for key, child in children:
            if isinstance(child, (dict, list)):
                stack.append((child, depth + 1, (*here, key)))
    if deepest > limits.max_depth:
        more = "+" if deepest > limits.max_depth * 4 else ""
        raise SchemaLimitError(
            f"schema nesting depth {deepest}{more} exceeds limits.max_depth={limits.max_depth} "
            f"(at {_where(deepest_path)})"
        )


def _ref_depth(schema: dict[str, Any], index: RefIndex, limits: SchemaLimits) -> None:
    """Nesting with every local `$ref` inlined, as the grammar compiler sees it (the path shows each
    hop as a `$ref` segment, as a JSON Schema keyword location does). A recursive `$ref`
    is cut where it re-enters a schema already being expanded, so the walk always terminates; each
    target's depth is computed once, so shared `$defs` cannot make it exponential."""
    memo: dict[int, int] = {}
    expanding: set[int] = set()

    def fail(here: list[Any]) -> SchemaLimitError:
        return SchemaLimitError(
            f"schema nesting depth over {limits.max_depth} with $ref inlined exceeds "
            f"limits.max_depth={limits.max_depth} (at {_where(here)})"
        )

    def depth(node: Any, base_depth: int, here: list[Any]) -> int:
        if not isinstance(node, (dict, list)):
            return 0
        if base_depth + 1 > limits.max_depth:
            raise fail(here)
        children = node.items() if isinstance(node, dict) else enumerate(node)
        own = 1 + max((depth(child, base_depth + 1, [*here, key]) for key, child in children), default=0)
        ref = node.get("$ref") if isinstance(node, dict) else None
        if isinstance(ref, str):
            target = index.resolve(ref, index.base(node))
            if isinstance(target, dict) and id(target) not in expanding:
                if id(target) not in memo:
                    expanding.add(id(target))
                    memo[id(target)] = depth(target, base_depth, [*here, "$ref"])
                    expanding.discard(id(target))
                if base_depth + memo[id(target)] > limits.max_depth:
                    raise fail([*here, "$ref"])
                own = max(own, memo[id(target)])
        return own

    depth(schema, 0, [])


def _check_keywords(schema: dict[str, Any], index: RefIndex, limits: SchemaLimits) -> None:
    for here, node in iter_subschemas(schema):
        for key in ("$ref", "$dynamicRef", "$recursiveRef"):
            ref = node.get(key)
            if isinstance(ref, str) and not index.is_local(ref, index.base(node)):
                raise SchemaLimitError(
                    f"remote {key} {ref[:200]!r} at {_where((*here, key))} points outside the schema document: "
                    "rejected by limits.remote_ref (schemas must be self-contained; nothing is fetched)"
                )
        enum = node.get("enum")
        if isinstance(enum, list) and len(enum) > limits.max_enum:
            raise SchemaLimitError(
                f"enum width {len(enum)} exceeds limits.max_enum={limits.max_enum} (at {_where((*here, 'enum'))})"
            )
        patterns: list[tuple[tuple[Any, ...], Any]] = [((*here, "pattern"), node.get("pattern"))]
        if isinstance(node.get("patternProperties"), dict):
            patterns += [((*here, "patternProperties", p), p) for p in node["patternProperties"]]
        for where, pattern in patterns:
            if not isinstance(pattern, str):
                continue
            if len(pattern) > limits.max_pattern_length:
                raise SchemaLimitError(
                    f"pattern length {len(pattern)} exceeds limits.max_pattern_length={limits.max_pattern_length} "
                    f"(at {_where(where)})"
                )
            why = redos_risk(pattern)
            if why and not runs_linear(pattern):  # under RE2 the post-check is linear whatever the pattern
                shown = pattern if len(pattern) <= 80 else pattern[:77] + "..."
                raise SchemaLimitError(
                    f"pattern {shown!r} at {_where(where)} can backtrack catastrophically ({why}) and needs a "
                    "backtracking engine (RE2 cannot run it): rejected by limits.pattern_redos"
                )


def check_limits(json_schema: dict[str, Any], limits: SchemaLimits = SchemaLimits()) -> None:
    """Raise `SchemaLimitError` naming the first bound `json_schema` is over; return None if within all.

    Checked in this order, cheapest and most hostile first: nesting depth of the document as
    written (iterative), size in canonical JSON bytes, remote `$ref`, enum width, pattern length,
    catastrophic patterns (`pattern_redos`), and nesting depth with local `$ref` inlined. Recursive
    local `$ref` is legal and allowed.
    """
    if not isinstance(json_schema, dict):
        raise SchemaLimitError(f"a JSON Schema must be an object, not {type(json_schema).__name__}")
    _raw_depth(json_schema, limits)
    size = len(canonical_json(json_schema).encode())
    if size > limits.max_bytes:
        raise SchemaLimitError(f"schema size {size} bytes exceeds limits.max_bytes={limits.max_bytes}")
    index = index_for(json_schema)
    _check_keywords(json_schema, index, limits)
    _ref_depth(json_schema, index, limits)
