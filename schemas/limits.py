"""Bounds on user-supplied JSON Schemas, checked before anything compiles or validates them.

A schema is untrusted input. Three things in the pipeline chew on it: the grammar compiler (whose
time and memory grow with nesting, enum width and regex size), the post-check validator (which runs
every `pattern` against model output: under RE2 in linear time where RE2 can express the pattern, else
under a backtracking engine, where a catastrophic pattern is a denial of service; `schemas.patterns`),
and the `$ref` resolver (which must never reach the network). `check_limits`
rejects a schema over any bound with one line that names the bound; compile time is bounded
separately, by the hard timeout in `workers.compiler`.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import urldefrag, urljoin

try:  # Python 3.11+
    import re._constants as sre_constants
    import re._parser as sre_parse
except ImportError:  # pragma: no cover - Python 3.10
    import sre_constants  # type: ignore[no-redef]
    import sre_parse  # type: ignore[no-redef]

from schemas.canonical import canonical_json
from schemas.patterns import runs_linear


@dataclass(frozen=True)
class SchemaLimits:
    max_bytes: int = 512_000
    max_depth: int = 48
    max_enum: int = 2_000
    max_pattern_length: int = 1_000
    compile_timeout_s: float = 30.0


class SchemaLimitError(ValueError):
    """A schema over one of the `SchemaLimits` bounds; the message is one line naming the bound."""


# --- walking a schema's subschemas -----------------------------------------------------------------

SINGLE_SCHEMA_KEYWORDS = (
    "additionalProperties", "unevaluatedProperties", "propertyNames", "contains", "additionalItems",
    "unevaluatedItems", "not", "if", "then", "else", "contentSchema", "items",
)
LIST_SCHEMA_KEYWORDS = ("allOf", "anyOf", "oneOf", "prefixItems", "items")
MAP_SCHEMA_KEYWORDS = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas", "dependencies")


def escape_pointer(part: Any) -> str:
    return str(part).replace("~", "~0").replace("/", "~1")


def pointer(parts: list[Any] | tuple[Any, ...]) -> str:
    return "".join("/" + escape_pointer(p) for p in parts)


def iter_subschemas(schema: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[tuple[Any, ...], dict[str, Any]]]:
    """Every (path, subschema) of a schema document, the root first.

    Only schema positions are visited: the values of `enum`, `const`, `default` or `examples` are
    data, and a property *named* `pattern` is not the keyword. Boolean schemas are skipped.
    """
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


# --- $ref resolution inside one document -------------------------------------------------------------


def join_ref(base: str, ref: str) -> str:
    """`ref` resolved against `base`; also for URNs, which `urljoin` leaves alone."""
    if ref.startswith("#"):
        return urldefrag(base)[0] + ref
    if re.match(r"[A-Za-z][A-Za-z0-9+.\-]*:", ref):
        return ref
    return urljoin(base, ref)


class RefIndex:
    """Where each local `$ref` of one schema document points, without ever fetching anything.

    Resources are the root and every subschema with an `$id` (or a draft-4 `id`); `#/pointer`,
    `#anchor` and `$id`-relative references resolve against them. Anything else is remote.
    """

    def __init__(self, root: dict[str, Any]) -> None:
        self.root = root
        self.draft4 = "draft-04" in str(root.get("$schema", "")) or "draft-03" in str(root.get("$schema", ""))
        self.resources: dict[str, dict[str, Any]] = {}
        self.anchors: dict[tuple[str, str], dict[str, Any]] = {}
        self.base_of: dict[int, str] = {}
        self._index(root, "")

    def _own_id(self, node: dict[str, Any]) -> str | None:
        value = node.get("$id", node.get("id") if self.draft4 else None)
        return value if isinstance(value, str) else None

    def _index(self, root: dict[str, Any], root_base: str) -> None:
        pending: list[tuple[Any, str]] = [(root, root_base)]
        seen: set[int] = set()
        while pending:
            node, base = pending.pop()
            if not isinstance(node, dict) or id(node) in seen:
                continue
            seen.add(id(node))
            own = self._own_id(node)
            if own is not None:
                url, fragment = urldefrag(join_ref(base, own))
                base = url
                self.resources.setdefault(url, node)
                if fragment and not fragment.startswith("/"):
                    self.anchors[(url, fragment)] = node  # draft-4/7 style "$id": "#name"
            if node is root:
                self.resources.setdefault(base, node)
            if isinstance(node.get("$anchor"), str):
                self.anchors[(base, node["$anchor"])] = node
            self.base_of[id(node)] = base
            for _, sub in iter_subschemas(node):
                if sub is not node:
                    pending.append((sub, base))

    def base(self, node: dict[str, Any]) -> str:
        return self.base_of.get(id(node), "")

    def is_local(self, ref: str, base: str) -> bool:
        url, _ = urldefrag(join_ref(base, ref))
        return url in self.resources

    def resolve(self, ref: str, base: str) -> Any:
        """The schema `ref` points to, or None when it is remote or does not resolve."""
        url, fragment = urldefrag(join_ref(base, ref))
        node: Any = self.resources.get(url)
        if node is None:
            return None
        if not fragment:
            return node
        if not fragment.startswith("/"):
            return self.anchors.get((url, fragment))
        for raw in fragment.split("/")[1:]:
            part = raw.replace("~1", "/").replace("~0", "~")
            if isinstance(node, dict):
                node = node.get(part)
            elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
                node = node[int(part)]
            else:
                return None
        return node


# --- catastrophic regular expressions ----------------------------------------------------------------

_SAMPLES = [chr(c) for c in range(256)] + ["é", "Ж", "中", "٣", "\u2028", "\u00a0", "\U0001f600"]
_CATEGORY = {
    "CATEGORY_DIGIT": re.compile(r"\d"), "CATEGORY_NOT_DIGIT": re.compile(r"\D"),
    "CATEGORY_SPACE": re.compile(r"\s"), "CATEGORY_NOT_SPACE": re.compile(r"\S"),
    "CATEGORY_WORD": re.compile(r"\w"), "CATEGORY_NOT_WORD": re.compile(r"\W"),
}
_BIG_REPEAT = 64  # a repeat allowing this many more iterations than its minimum counts as unbounded
_REPEATS = (sre_constants.MAX_REPEAT, sre_constants.MIN_REPEAT)


def _in_set(items: list[Any], ch: str) -> bool:
    negate, hit = False, False
    for op, arg in items:
        name = str(op)
        if name == "NEGATE":
            negate = True
        elif name == "LITERAL":
            hit = hit or ch == chr(arg)
        elif name == "RANGE":
            hit = hit or arg[0] <= ord(ch) <= arg[1]
        elif name == "CATEGORY":
            pattern = _CATEGORY.get(str(arg))
            hit = hit or (pattern is not None and pattern.fullmatch(ch) is not None)
    return hit != negate


def _atom_chars(op: Any, arg: Any) -> frozenset[str]:
    name = str(op)
    if name == "LITERAL":
        return frozenset({chr(arg)})
    if name == "NOT_LITERAL":
        return frozenset(c for c in _SAMPLES if c != chr(arg))
    if name == "ANY":
        return frozenset(c for c in _SAMPLES if c != "\n")
    if name == "IN":
        return frozenset(c for c in _SAMPLES if _in_set(arg, c))
    return frozenset()


def _repeat_parts(op: Any, arg: Any) -> tuple[int, int, Any] | None:
    if op in _REPEATS:  # a possessive repeat never backtracks, so it is not one of these
        lo, hi, body = arg
        return lo, hi, body
    return None


def _unbounded(lo: int, hi: int) -> bool:
    return hi == sre_constants.MAXREPEAT or hi - lo >= _BIG_REPEAT


def _nullable(items: Any, anchors: bool = True) -> bool:
    """Whether `items` can match the empty string. With `anchors=False`, zero-width assertions
    (^, $, \\b, lookarounds) count as not empty: they pin where an iteration may end, so they
    separate iterations as well as a literal separator would."""
    return all(_item_nullable(op, arg, anchors) for op, arg in items)


def _item_nullable(op: Any, arg: Any, anchors: bool = True) -> bool:
    rep = _repeat_parts(op, arg)
    if rep is not None:
        return rep[0] == 0 or _nullable(rep[2], anchors)
    name = str(op)
    if name == "SUBPATTERN":
        return _nullable(arg[-1], anchors)
    if name == "BRANCH":
        return any(_nullable(alt, anchors) for alt in arg[1])
    return anchors and name in ("AT", "ASSERT", "ASSERT_NOT", "GROUPREF_EXISTS")


def _first(items: Any) -> frozenset[str]:
    """Sample characters a match of `items` can start with."""
    found: frozenset[str] = frozenset()
    for op, arg in items:
        found |= _item_first(op, arg)
        if not _item_nullable(op, arg):
            break
    return found


def _item_first(op: Any, arg: Any) -> frozenset[str]:
    rep = _repeat_parts(op, arg)
    if rep is not None:
        return _first(rep[2])
    name = str(op)
    if name == "SUBPATTERN":
        return _first(arg[-1])
    if name == "BRANCH":
        return frozenset().union(*(_first(alt) for alt in arg[1]))
    return _atom_chars(op, arg)


def _single(items: Any) -> frozenset[str]:
    """Sample characters `c` such that `items` can match exactly the one-character string `c`."""
    found: frozenset[str] = frozenset()
    items = list(items)
    for index, (op, arg) in enumerate(items):
        if not _nullable(items[:index] + items[index + 1:]):
            continue
        rep = _repeat_parts(op, arg)
        if rep is not None:
            found |= _single(rep[2]) if rep[0] <= 1 <= rep[1] else frozenset()
        elif str(op) == "SUBPATTERN":
            found |= _single(arg[-1])
        elif str(op) == "BRANCH":
            found = found.union(*(_single(alt) for alt in arg[1]))
        else:
            found |= _atom_chars(op, arg)
    return found


def _all_chars(items: Any) -> frozenset[str]:
    """Sample characters that can occur anywhere in a match of `items`."""
    found: frozenset[str] = frozenset()
    for op, arg in items:
        rep = _repeat_parts(op, arg)
        name = str(op)
        if rep is not None:
            found |= _all_chars(rep[2])
        elif name == "SUBPATTERN":
            found |= _all_chars(arg[-1])
        elif name == "BRANCH":
            for alt in arg[1]:
                found |= _all_chars(alt)
        else:
            found |= _atom_chars(op, arg)
    return found


_MAX_SHAPES = 64
_POLY_REPEAT = 3  # a counted repeat of an ambiguous body this many times backtracks as n**count


def _shapes(items: Any) -> list[tuple[frozenset[str], ...]] | None:
    """Every fixed-length shape (a sequence of sample-character sets) `items` can match, or None when it
    can match strings of unbounded length or has too many shapes to list."""
    shapes: list[tuple[frozenset[str], ...]] = [()]
    for op, arg in items:
        mine = _item_shapes(op, arg)
        if mine is None:
            return None
        shapes = list(dict.fromkeys(a + b for a in shapes for b in mine))
        if len(shapes) > _MAX_SHAPES:
            return None
    return shapes


def _item_shapes(op: Any, arg: Any) -> list[tuple[frozenset[str], ...]] | None:
    rep = _repeat_parts(op, arg)
    name = str(op)
    if rep is not None:
        lo, hi, body = rep
        inner = _shapes(body)
        if inner is None or hi > 4:
            return None
        out: list[tuple[frozenset[str], ...]] = []
        for count in range(lo, hi + 1):
            out.extend(_shapes([(sre_constants.SUBPATTERN, (None, 0, 0, body))] * count) or [])
        return out or None
    if name == "SUBPATTERN":
        return _shapes(arg[-1])
    if name == "BRANCH":
        found: list[tuple[frozenset[str], ...]] = []
        for alt in arg[1]:
            alt_shapes = _shapes(alt)
            if alt_shapes is None:
                return None
            found.extend(alt_shapes)
        return found
    if name in ("AT", "ASSERT", "ASSERT_NOT"):
        return [()]
    chars = _atom_chars(op, arg)
    return [(chars,)] if chars else None


def _splits(shapes: list[tuple[frozenset[str], ...]]) -> bool:
    """Whether one shape also matches as two or more shapes in a row, as `aa` does in (a|aa)+."""
    pieces = [t for t in shapes if t]
    for whole in pieces:
        most: dict[int, int] = {0: 0}  # position → the most pieces that reach it (capped at 2)
        for pos in range(len(whole)):
            if pos not in most:
                continue
            for piece in pieces:
                end = pos + len(piece)
                if end <= len(whole) and all(whole[pos + k] & piece[k] for k in range(len(piece))):
                    most[end] = max(most.get(end, 0), min(most[pos] + 1, 2))
        if most.get(len(whole), 0) >= 2:
            return True
    return False


def _ambiguous_body(items: Any) -> str | None:
    """Why one iteration of an unbounded repeat over `items` can be split several ways, or None.

    Three shapes cause exponential backtracking: the body is an unbounded repeat plus only optional
    parts or characters that repeat could also match, as in (a+)+, (\\w+\\s?)* or (([a-z])+.)+;
    two adjacent repeats in it overlap, as in (a+a+)+; or two alternatives overlap, as in (a|a)* or
    (.|\\s)* (both match the same character, or both match nothing). A separator the repeat
    cannot match, as in ([a-z]+-)*, makes the split unique: that is allowed.
    """
    items = list(items)
    shapes = _shapes(items)
    if shapes is not None and _splits(shapes):
        return "overlapping alternatives"
    for index, (op, arg) in enumerate(items):
        rest = items[:index] + items[index + 1:]
        rep = _repeat_parts(op, arg)
        following = items[index + 1] if index + 1 < len(items) else None
        why = _nested_repeat(rep, rest) or _ambiguous_group(op, arg, rest) or _adjacent_overlap(rep, following)
        if why:
            return why
    return None


def _nested_repeat(rep: Any, rest: list[Any]) -> str | None:
    """An unbounded repeat whose siblings are all optional or characters the repeat could also match."""
    if rep is not None and _unbounded(rep[0], rep[1]):
        chars = _all_chars(rep[2])
        if all(_item_nullable(o, a, anchors=False) or _all_chars([(o, a)]) & chars for o, a in rest):
            return "nested quantifiers"
    return None


def _ambiguous_group(op: Any, arg: Any, rest: list[Any]) -> str | None:
    """A group or alternation that is ambiguous itself (two alternatives overlap), or whose inside is, when the
    rest of the body can match nothing."""
    if str(op) == "SUBPATTERN" and _nullable(rest, anchors=False):
        return _ambiguous_body(arg[-1])
    if str(op) != "BRANCH":
        return None
    alts = arg[1]
    for i in range(len(alts)):
        for j in range(i + 1, len(alts)):
            both_empty = _nullable(alts[i]) and _nullable(alts[j])
            if both_empty or _single(alts[i]) & _single(alts[j]):
                return "overlapping alternatives"
    return next((w for w in map(_ambiguous_body, alts) if w), None) if _nullable(rest, anchors=False) else None


def _adjacent_overlap(rep: Any, following: Any) -> str | None:
    """Two adjacent repeats, one unbounded, both allowing more than one, where the first can run into the next."""
    if rep is None or following is None:
        return None
    nxt = _repeat_parts(*following)
    if nxt is not None and (_unbounded(*rep[:2]) or _unbounded(*nxt[:2])):
        if rep[1] > 1 and nxt[1] > 1 and _all_chars(rep[2]) & _first(nxt[2]):
            return "adjacent overlapping quantifiers"
    return None


def _catastrophic(items: Any) -> str | None:
    for op, arg in items:
        rep = _repeat_parts(op, arg)
        if rep is not None:
            lo, hi, body = rep
            if _unbounded(lo, hi) or hi >= _POLY_REPEAT:
                why = _ambiguous_body(body)
                if why:
                    return why if _unbounded(lo, hi) else f"{why}, repeated {hi} times"
            found = _catastrophic(body)
        elif str(op) == "SUBPATTERN":
            found = _catastrophic(arg[-1])
        elif str(op) == "BRANCH":
            found = next((w for w in (_catastrophic(alt) for alt in arg[1]) if w), None)
        elif str(op) in ("ASSERT", "ASSERT_NOT"):
            found = _catastrophic(arg[1])
        else:
            found = None
        if found:
            return found
    return None


def redos_risk(pattern: str) -> str | None:
    """Why `pattern` can backtrack catastrophically in a backtracking engine (Python's `re`, `regex`), or
    None. `check_limits` refuses such a pattern only when RE2 cannot run it (`schemas.patterns.runs_linear`).
    Patterns Python cannot parse return None: the validator rejects those on its own."""
    try:
        parsed = sre_parse.parse(re.sub(r"\(\?<(?=[A-Za-z_])", "(?P<", pattern))
    except (re.error, RecursionError, OverflowError, ValueError):
        return None
    return _catastrophic(parsed)


# --- the checks -----------------------------------------------------------------------------------------


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
    index = RefIndex(json_schema)
    _check_keywords(json_schema, index, limits)
    _ref_depth(json_schema, index, limits)
