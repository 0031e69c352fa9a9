"""`schema_policy.max_string_length` / `max_array_items`: bounds for the grammar only.

A small model under a grammar can write a string ("1234567890…") or a list until `max_tokens` runs out;
the output is then a `truncated` dead letter. Bounding every unbounded string and array in the schema
the *grammar* is compiled from makes the model close them. The user's schema, the post-check and the
output columns keep the schema as written: a bound is a decoding limit, not a new rule for the data.

`auto` fits the bounds to the budget: `longest_output_chars` is the longest compact JSON text a schema
allows (as the grammar emits it: no whitespace), `budget_bounds` picks the largest string bound (and an
array bound) under which that text, times `TOKENS_PER_CHAR`, fits `max_tokens`, and says where a schema
cannot be bounded (a reference cycle, an open object, a value of any type, a pattern with an open quantifier;
or too many leaves for the budget). Strings bounded by `enum`, `const`, `pattern`, a self-bounded `format`
or a substring node (`x-substring`) keep their own bound; existing `maxLength` / `maxItems` are kept.
"""

from __future__ import annotations

import heapq
import json
import math
import re
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from schemas.pointer import escape_pointer, pointer
from schemas.refs import graph_for
from schemas.walk import schema_types

# Tokens per character of compact JSON outputs under the bundled model's tokenizer (SmolLM2-135M), measured by
# `lab/experiments/tokens_per_char.py` on 1,413 outputs (sample gold 50, DeepJSONEval dev gold 136, JSONSchemaBench
# dev valid instances 1,227): pooled 0.355, mean 0.370, p90 0.468, p99 0.702, max 1.0. 0.75 is the p99 rounded
# up: the longest output already assumes every free value at its bound, and a runaway value is often digits or
# `_M_M_M` (about 1 token per character), far denser than prose (about 0.25). Check on the model's own outputs (the
# conformance generation sample, first 30 schemas per subset, auto bounds): finished outputs mean 0.52, p90 0.80;
# outputs cut at max_tokens mean 0.56, p90 0.93. A figure of 1.0 would cover nearly every runaway, at tighter bounds.
TOKENS_PER_CHAR = 0.75
# A grounded schema's root may carry its document's tokens per character under the model's own tokenizer
# (`workers.extractor`: set where it is over TOKENS_PER_CHAR, e.g. Chinese, which the bundled model's tokenizer
# spends one to three tokens a character on): `grammar_schema` fits the bounds with it, and takes the key out.
DENSITY_KEY = "x-tokens-per-char"
BUDGET_SHARE = 0.95  # of max_tokens: the margin for what the estimate misses (escapes, long numbers)
STRING_FLOOR = 16  # below this a string bound cuts real values: the schema "cannot be bounded for this budget"
STRING_CAP = 256  # the largest automatic string bound (larger bounds compile slower and help no extraction)
STRING_STEPS = (64, 32, STRING_FLOOR)  # prefer more list items while strings keep at least this many chars
ITEM_STEPS = (10, 8, 6, 5, 4, 3, 2, 1)  # automatic array bounds tried, largest first
ITEM_FLOOR = 2  # the array bound when nothing fits
NUMBER_CHARS = 24  # a number without both minimum and maximum (the grammar does not bound its digits)
INTEGER_CHARS = 20  # -9223372036854775808
WORD_CHARS = 12  # a word and its separator, for a substring node without max_length
UNIT_CHARS = {"word": WORD_CHARS, "char": 4}  # a `char` unit is one character, or a short Latin run among them
FORMAT_CHARS = {"date": 10, "time": 21, "date-time": 32, "uuid": 36, "ipv4": 15, "ipv6": 45, "duration": 32}
SELF_BOUNDED_FORMATS = set(FORMAT_CHARS)
SUBSTRING_KEY = "x-substring"  # schemas.substring.SUBSTRING_KEY (not imported: that module imports grounding)
SUBSCHEMA_LISTS = ("anyOf", "oneOf", "allOf", "prefixItems")
SUBSCHEMA_MAPS = ("properties", "$defs", "definitions", "patternProperties")
SUBSCHEMA_ONE = ("items", "additionalProperties", "not", "if", "then", "else", "contains")
AUTO = "auto"
OPEN_QUANTIFIER = re.compile(r"(?<!\\)(?:[*+]|\{\d*,\})")
COUNTED_QUANTIFIER = re.compile(r"(?<!\\)\{(\d+)(?:,(\d+))?\}")


def is_free_string(node: dict[str, Any]) -> bool:
    """A string node that `grammar_schema` bounds: no maxLength, enum, const, pattern, format or substring node
    of its own. (vLLM refuses a schema with `format` or `pattern` next to `maxLength` on its xgrammar backend:
    a bound there would fail the request, so such strings keep the bound their format or pattern gives.)"""
    return "string" in schema_types(node) and not ({"maxLength", "enum", "const", "pattern", "format", SUBSTRING_KEY}
                                             & set(node))


@dataclass
class _Bounder:
    """Adds the bounds. A property's bound is never below what a same-named property elsewhere in the schema
    needs (its longest enum or const string, its minLength or minItems): `allOf` may join a free `command`
    string with `{"enum": ["setExceptionBreakpoints"]}`, and a bound under that would leave no valid value."""

    max_string: int | None
    max_items: int | None
    floors: dict[str, tuple[int, int]] = field(default_factory=dict)

    @classmethod
    def of(cls, schema: Any, max_string: int | None, max_items: int | None) -> _Bounder:
        bounder = cls(max_string, max_items)
        stack = [schema]
        while stack:
            node = stack.pop()
            if not isinstance(node, dict):
                continue
            props = node.get("properties")
            if isinstance(props, dict):
                for name, sub in props.items():
                    if isinstance(sub, dict):
                        bounder.note(name, sub)
            stack.extend(_children(node))
        return bounder

    def note(self, name: str, node: dict[str, Any]) -> None:
        values = node.get("enum") if isinstance(node.get("enum"), list) else [node["const"]] if "const" in node \
            else []
        chars = max((len(v) for v in values if isinstance(v, str)), default=0)
        chars = max(chars, node["minLength"] if isinstance(node.get("minLength"), int) else 0)
        items = node["minItems"] if isinstance(node.get("minItems"), int) else 0
        if chars or items:
            old = self.floors.get(name, (0, 0))
            self.floors[name] = (max(old[0], chars), max(old[1], items))

    def own(self, node: dict[str, Any], floor: tuple[int, int]) -> dict[str, Any]:
        """`node` with its own bounds added (a shallow copy when it changes)."""
        extra: dict[str, Any] = {}
        if self.max_string is not None and is_free_string(node):
            least = node.get("minLength") if isinstance(node.get("minLength"), int) else 0
            extra["maxLength"] = max(self.max_string, least, floor[0])
        is_array = "array" in schema_types(node) or ("type" not in node and ("items" in node or "prefixItems" in node))
        if self.max_items is not None and is_array and "maxItems" not in node:
            least = node.get("minItems") if isinstance(node.get("minItems"), int) else 0
            extra["maxItems"] = max(self.max_items, least, floor[1])
        return {**node, **extra} if extra else node

    def bound(self, node: Any, floor: tuple[int, int] = (0, 0)) -> Any:
        """`node` with every free string and array bounded; subtrees that do not change are shared, not copied."""
        if not isinstance(node, dict):
            return node
        changes: dict[str, Any] = {}
        for key in SUBSCHEMA_LISTS:  # anyOf, oneOf, allOf: the same value, so the same floor
            subs = node.get(key)
            if isinstance(subs, list):
                new = [self.bound(sub, floor if key != "prefixItems" else (0, 0)) for sub in subs]
                if any(a is not b for a, b in zip(new, subs, strict=True)):
                    changes[key] = new
        for key in SUBSCHEMA_MAPS:
            subs = node.get(key)
            if isinstance(subs, dict):
                new_map = {name: self.bound(sub, self.floors.get(name, (0, 0)) if key == "properties" else (0, 0))
                           for name, sub in subs.items()}
                if any(new_map[name] is not sub for name, sub in subs.items()):
                    changes[key] = new_map
        for key in SUBSCHEMA_ONE:
            if isinstance(node.get(key), dict):
                new_one = self.bound(node[key])
                if new_one is not node[key]:
                    changes[key] = new_one
        out = self.own(node, floor)
        return {**out, **changes} if changes else out


def _children(node: dict[str, Any]) -> list[Any]:
    found: list[Any] = [node.get(key) for key in SUBSCHEMA_ONE]
    for key in SUBSCHEMA_LISTS:
        found += node.get(key) if isinstance(node.get(key), list) else []
    for key in SUBSCHEMA_MAPS:
        found += list(node[key].values()) if isinstance(node.get(key), dict) else []
    return found


def _bound(node: Any, max_string: int | None, max_items: int | None) -> Any:
    return _Bounder.of(node, max_string, max_items).bound(node)


# --- the longest output --------------------------------------------------------------------------------------
# A schema compiles to a plan of tuples, evaluated for a string bound `s` and an array bound `k`:
# ("n", chars) fixed width; ("s", minLength) a free string; ("a", item, maxItems, minItems, prefix) an array;
# ("o", chars, children) an object (keys and punctuation, then its values); ("u", branches) the longest branch;
# ("x",) a value no maxLength/maxItems can bound (reported in the problems).


def _compact(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _values_chars(values: list[Any]) -> int:
    """The longest JSON encoding among `values` (of thousands of strings, only the longest few are encoded)."""
    strings = [v for v in values if isinstance(v, str)]
    others = [v for v in values if not isinstance(v, str)]
    longest = heapq.nlargest(16, strings, key=len) if len(strings) > 16 else strings
    return max((len(_compact(v)) for v in longest + others), default=2)


def _pattern_chars(pattern: str) -> int | None:
    """An estimate of the longest string a pattern allows (None with an open quantifier: `*`, `+`, `{n,}`)."""
    if OPEN_QUANTIFIER.search(pattern):
        return None
    counted = sum(int(hi or lo) - 1 for lo, hi in COUNTED_QUANTIFIER.findall(pattern))
    return len(pattern) + 8 * max(0, counted)  # a repeated atom may be a class or group of a few characters


def _number_chars(node: dict[str, Any], integer: bool) -> int:
    low, high = node.get("minimum"), node.get("maximum")
    if integer and isinstance(low, int | float) and isinstance(high, int | float):
        return max(len(str(int(low))), len(str(int(high))))
    return INTEGER_CHARS if integer else NUMBER_CHARS


@dataclass
class _Compiler:
    root: Any
    problems: dict[str, str] = field(default_factory=dict)
    trail: frozenset[int] = frozenset()  # the references being expanded on the current path
    memo: dict[tuple[int, str], tuple] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.graph = graph_for(self.root)

    def open(self, where: str, why: str) -> tuple:
        self.problems.setdefault(where or "/", why)
        return ("x",)

    def ref(self, node: dict[str, Any], where: str) -> tuple:
        view = self.graph.expand(node, self.trail)
        if view.problem == "cycle":
            return self.open(where, f"recursion: {view.why}, which maxLength/maxItems cannot bound")
        if view.problem is not None:
            return self.open(where, f"{view.why}: its length is unknown")
        key = (id(view.origin), _compact(self.graph.siblings(node)))  # a target's plan, under these siblings
        if key in self.memo:
            return self.memo[key]
        outer, self.trail = self.trail, view.trail
        try:
            plan = self.node(view.node, pointer(self.graph.path_of(view.origin) or ()))
        finally:
            self.trail = outer
        self.memo[key] = plan
        return plan

    def node(self, node: Any, where: str) -> tuple:
        if node is True or node == {}:
            return self.open(where, "a value of any type: its length is unbounded")
        if not isinstance(node, dict):
            return ("n", 0)
        if self.graph.refers(node):
            return self.ref(node, where)
        if "const" in node:
            return ("n", len(_compact(node["const"])))
        if isinstance(node.get("enum"), list):
            return ("n", _values_chars(node["enum"]))
        if isinstance(node.get("allOf"), list):
            return self.node(self.merged(node), where)
        for key in ("anyOf", "oneOf"):
            if isinstance(node.get(key), list):
                return ("u", tuple(self.node(sub, f"{where}/{key}/{i}") for i, sub in enumerate(node[key])))
        types = schema_types(node)
        if not types:  # XGrammar lets an untyped node be any value, even one with properties (measured)
            return self.open(where, "a value of any type (no type): its length is unbounded")
        plans = tuple(self.typed(node, kind, where) for kind in sorted(types))
        return plans[0] if len(plans) == 1 else ("u", plans)

    def merged(self, node: dict[str, Any]) -> dict[str, Any]:
        """allOf as one node: properties and required united, other keywords first come first kept."""
        out = {k: v for k, v in node.items() if k != "allOf"}
        for sub in node["allOf"]:
            if self.graph.refers(sub):
                sub = self.graph.expand(sub, self.trail).node or self.graph.siblings(sub)
            if not isinstance(sub, dict):
                continue
            for key, value in sub.items():
                if key == "properties" and isinstance(value, dict):
                    out["properties"] = {**value, **out.get("properties", {})}
                else:
                    out.setdefault(key, value)
        return out

    def typed(self, node: dict[str, Any], kind: str, where: str) -> tuple:
        if kind == "string":
            return self.string(node, where)
        if kind in ("number", "integer"):
            return ("n", _number_chars(node, kind == "integer"))
        if kind == "array":
            return self.array(node, where)
        if kind == "object":
            return self.object(node, where)
        return ("n", 5 if kind == "boolean" else 4)

    def string(self, node: dict[str, Any], where: str) -> tuple:
        sub = node.get(SUBSTRING_KEY)
        if isinstance(sub, dict):
            cap = sub.get("max_length")
            words = sub.get("max_words") if isinstance(sub.get("max_words"), int) else 8
            per_word = UNIT_CHARS.get(sub.get("unit", "word"), WORD_CHARS)
            return ("n", 2 + (cap if isinstance(cap, int) else words * per_word))
        if isinstance(node.get("maxLength"), int):
            return ("n", 2 + node["maxLength"])
        if node.get("format") in FORMAT_CHARS:
            return ("n", 2 + FORMAT_CHARS[node["format"]])
        if "format" in node:
            return self.open(where, f"a string of format {node['format']!r} and no maxLength (vLLM's xgrammar "
                                    "backend refuses maxLength next to format)")
        if isinstance(node.get("pattern"), str):
            chars = _pattern_chars(node["pattern"])
            return ("n", 2 + chars) if chars is not None else \
                self.open(where, "a pattern with an open quantifier (*, +, {n,}) and no maxLength")
        least = node.get("minLength")
        return ("s", least if isinstance(least, int) else 0)

    def array(self, node: dict[str, Any], where: str) -> tuple:
        items = node.get("items")
        prefix_nodes = node.get("prefixItems") if isinstance(node.get("prefixItems"), list) else \
            items if isinstance(items, list) else []
        rest = node.get("additionalItems") if isinstance(items, list) else items
        prefix = tuple(self.node(sub, f"{where}/prefixItems/{i}") for i, sub in enumerate(prefix_nodes))
        if rest is False or (rest is None and prefix):
            item = None
        else:
            item = self.node(rest if rest is not None else True, f"{where}/items")
        most = node.get("maxItems") if isinstance(node.get("maxItems"), int) else None
        least = node.get("minItems") if isinstance(node.get("minItems"), int) else 0
        return ("a", item, most, least, prefix)

    def object(self, node: dict[str, Any], where: str) -> tuple:
        props = node.get("properties") if isinstance(node.get("properties"), dict) else {}
        extra = node.get("additionalProperties")
        chars = 2 + max(0, len(props) - 1) + sum(len(_compact(str(name))) + 1 for name in props)
        values = tuple(self.node(sub, f"{where}/properties/{escape_pointer(name)}") for name, sub in props.items())
        if node.get("patternProperties") or (extra is not None and extra is not False) or (not props and extra is None):
            values += (self.open(where, "an open object (additionalProperties or patternProperties): its keys are "
                                        "unbounded"),)
        return ("o", chars, values)


def _plan(schema: Any) -> tuple[tuple, list[str]]:
    compiler = _Compiler(schema)
    plan = compiler.node(schema, "")
    return plan, [f"{where}: {why}" for where, why in compiler.problems.items()]


def _length(plan: tuple, s: float, k: float, open_width: float) -> float:
    tag = plan[0]
    if tag == "n":
        return plan[1]
    if tag == "s":
        return max(s, plan[1]) + 2
    if tag == "u":
        return max(_length(sub, s, k, open_width) for sub in plan[1])
    if tag == "o":
        return plan[1] + sum(_length(sub, s, k, open_width) for sub in plan[2])
    if tag == "x":
        return open_width
    _, item, most, least, prefix = plan
    count = len(prefix)
    chars = 2 + sum(_length(sub, s, k, open_width) for sub in prefix)
    if item is not None:
        rest = max(0, most - count) if most is not None else max(k, least - count)
        if rest:
            each = _length(item, s, k, open_width)
            count += rest
            chars += rest * each if each else 0
    return chars + max(0, count - 1)


def longest_output_chars(schema: Any, max_string: int | None = None, max_items: int | None = None) -> int | None:
    """The longest compact JSON text `schema` allows, in characters, with free strings bounded at `max_string`
    and free arrays at `max_items` (None: unbounded); None when that is unbounded (a free string or array, a
    reference cycle, an open object, a value of any type). Optional properties count: the grammar may emit them."""
    plan, _ = _plan(schema)
    s = math.inf if max_string is None else max_string
    k = math.inf if max_items is None else max_items
    chars = _length(plan, s, k, math.inf)
    return None if math.isinf(chars) else int(chars)


# --- bounds that fit the budget ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Budget:
    """The grammar-only bounds for one schema and budget, and what keeps the schema from fitting it."""

    max_string: int | None
    max_items: int | None
    longest_chars: int | None  # the bounded schema's longest output (open values counted at the string bound)
    budget_chars: int
    problems: tuple[str, ...] = ()

    @property
    def fits(self) -> bool:
        return not self.problems


def _largest_string(plan: tuple, k: float, budget: float, cap: int) -> int:
    """The largest string bound in [0, cap] whose longest output fits `budget` (-1: none does)."""
    if _length(plan, 0, k, 0) > budget:
        return -1
    if _length(plan, cap, k, cap) <= budget:
        return cap
    low, high = 0, cap  # fits at low, not at high
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (mid, high) if _length(plan, mid, k, mid) <= budget else (low, mid)
    return low


def _choose(plan: tuple, budget: float, max_string: int | None, max_items: int | None) -> tuple[int, int] | None:
    """(string bound, array bound) that fit, preferring longer lists while strings keep STRING_STEPS chars."""
    items = (max_items,) if max_items is not None else ITEM_STEPS
    for least in STRING_STEPS:
        for k in items:
            if max_string is not None:
                if _length(plan, max_string, k, max_string) <= budget:
                    return max_string, k
                continue
            s = _largest_string(plan, k, budget, STRING_CAP)
            if s >= least:
                return s, k
    return None


def budget_bounds(schema: Any, max_tokens: int, tokens_per_char: float = TOKENS_PER_CHAR,
                  max_string: int | None = None, max_items: int | None = None) -> Budget:
    """The largest string bound (and array bound: 10 items, fewer if needed) under which the schema's longest
    output, times `tokens_per_char`, fits `BUDGET_SHARE` of `max_tokens`. `max_string` / `max_items` fix one
    of them. Below `STRING_FLOOR` chars (or `ITEM_FLOOR` items) it gives up: the floor bounds are returned
    with a problem saying the schema cannot be bounded for this budget; a value no bound can close (a reference
    cycle, an open object, ...) is a problem too, counted at the string bound for the budget."""
    plan, problems = _plan(schema)
    budget = int(max_tokens * BUDGET_SHARE / tokens_per_char)
    chosen = _choose(plan, budget, max_string, max_items)
    if chosen is None:
        s = max_string if max_string is not None else STRING_FLOOR
        k = max_items if max_items is not None else ITEM_FLOOR
        problems.append(_too_long(plan, s, k, max_tokens, tokens_per_char))
    else:
        s, k = chosen
    longest = _length(plan, s, k, s)
    return Budget(s, k, None if math.isinf(longest) else int(longest), budget, tuple(problems))


def _too_long(plan: tuple, s: int, k: int, max_tokens: int, tokens_per_char: float) -> str:
    longest = _length(plan, s, k, s)
    about = f"{longest:.0f} chars, about {longest * tokens_per_char:.0f} tokens at {tokens_per_char} tokens/char"
    leaves = _leaves(plan)
    if not leaves and _length(plan, s, k + 1, s) == longest:
        return (f"cannot be bounded for this budget: the schema's own bounds (maxLength, maxItems, enum, ...) allow "
                f"{about}, over max_tokens {max_tokens}")
    return (f"cannot be bounded for this budget: with strings of {s} chars and arrays of {k} items the longest "
            f"output is {about}, over max_tokens {max_tokens} ({leaves} free strings and open values)")


def _leaves(plan: tuple) -> int:
    """Free strings and open values counted once each (arrays not multiplied)."""
    tag = plan[0]
    if tag in ("s", "x"):
        return 1
    if tag == "u":
        return max((_leaves(sub) for sub in plan[1]), default=0)
    if tag == "o":
        return sum(_leaves(sub) for sub in plan[2])
    if tag == "a":
        return sum(_leaves(sub) for sub in plan[4]) + (_leaves(plan[1]) if plan[1] is not None else 0)
    return 0


_CACHE: OrderedDict[tuple[Any, ...], tuple[Any, Budget]] = OrderedDict()
CACHE_SIZE = 256


def cached_budget(schema: Any, max_tokens: int, tokens_per_char: float = TOKENS_PER_CHAR,
                  max_string: int | None = None, max_items: int | None = None) -> Budget:
    """`budget_bounds`, remembered for the same schema object (a job's one schema, asked for every request)."""
    key = (id(schema), max_tokens, tokens_per_char, max_string, max_items)
    hit = _CACHE.get(key)
    if hit is not None and hit[0] is schema:
        _CACHE.move_to_end(key)
        return hit[1]
    found = budget_bounds(schema, max_tokens, tokens_per_char, max_string, max_items)
    _CACHE[key] = (schema, found)  # holding the schema keeps its id from being reused while cached
    if len(_CACHE) > CACHE_SIZE:
        _CACHE.popitem(last=False)
    return found


def grammar_schema(json_schema: dict[str, Any], max_string: int | str | None, max_items: int | str | None,
                   max_tokens: int | None = None, tokens_per_char: float = TOKENS_PER_CHAR) -> dict[str, Any]:
    """A copy of `json_schema` with `maxLength` on every unbounded string and `maxItems` on every unbounded
    array (the schema itself when both are None, or when nothing changes). "auto" picks the bound with
    `budget_bounds` for `max_tokens` (an int fixes the bound, None leaves it open); unchanged subschemas are
    shared with `json_schema`, not copied."""
    if isinstance(json_schema, dict) and DENSITY_KEY in json_schema:  # the document's script's own figure
        tokens_per_char = max(tokens_per_char, float(json_schema[DENSITY_KEY]))
        json_schema = {k: v for k, v in json_schema.items() if k != DENSITY_KEY}
    if max_string is None and max_items is None:
        return json_schema
    if AUTO in (max_string, max_items):
        if max_tokens is None:
            raise ValueError("grammar bounds 'auto' need max_tokens")
        found = cached_budget(json_schema, max_tokens, tokens_per_char,
                              max_string if isinstance(max_string, int) else None,
                              max_items if isinstance(max_items, int) else None)
        max_string = found.max_string if max_string == AUTO else max_string
        max_items = found.max_items if max_items == AUTO else max_items
    return _bound(json_schema, max_string, max_items)  # type: ignore[arg-type]
