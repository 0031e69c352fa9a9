"""Bounded regex work for the post-check: `pattern` and `patternProperties` never run unbounded.

A JSON Schema `pattern` is untrusted, and so is the model output it runs against. Python's `re`
backtracks, so `^(a|aa)+$` took 120 s on a 41-character value. Here a pattern runs under RE2
(`google-re2`, linear time in the value) whenever RE2 can express it. Patterns RE2 cannot express
(backreferences, lookarounds, huge counted repeats) run under the `regex` package with a per-value
time budget; a value over it raises `PatternBudgetExceeded`, which the classifier turns into a
`validator_timeout` dead letter.

JSON Schema patterns are ECMA-262: `\\d`, `\\w` and `\\b` are ASCII and `$` matches only at the end, as
in RE2 (Python's `re` differs on all three). ECMA's `\\s` is Unicode whitespace and `\\uXXXX` is a code
point: both are rewritten for RE2.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from typing import Any

PATTERN_BUDGET_S = 1.0  # per value, only for patterns RE2 cannot run

# ECMA-262 WhiteSpace and LineTerminator, as RE2 class members.
_ECMA_SPACE = r"\t\n\x{0B}\f\r \x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000}\x{FEFF}"


class PatternBudgetExceeded(Exception):
    """A backtracking pattern ran past its per-value time budget."""

    def __init__(self, pattern: str, length: int, budget_s: float) -> None:
        shown = pattern if len(pattern) <= 80 else pattern[:77] + "..."
        super().__init__(f"pattern {shown!r} ran past its {budget_s:g} s budget on a {length}-character value")
        self.pattern = pattern


def to_re2(pattern: str) -> str | None:
    """`pattern` in RE2 syntax with ECMA meaning, or None when it has no RE2 form here."""
    for whole, same in (("[\\s\\S]", "(?s:.)"), ("[\\S\\s]", "(?s:.)"), ("[\\S]", "\\S")):
        pattern = pattern.replace(whole, same)  # the common sets RE2 cannot say with a class inside a class
    out: list[str] = []
    in_class = False
    i = 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\" and i + 1 < len(pattern):
            nxt = pattern[i + 1]
            if nxt == "s":
                out.append(_ECMA_SPACE if in_class else f"[{_ECMA_SPACE}]")
            elif nxt == "S":
                if in_class:
                    return None  # a negated set inside a set: RE2 has no way to say it
                out.append(f"[^{_ECMA_SPACE}]")
            elif nxt == "u" and re.fullmatch(r"[0-9A-Fa-f]{4}", pattern[i + 2:i + 6]):
                out.append(f"\\x{{{pattern[i + 2:i + 6]}}}")
                i += 4
            else:
                out.append(pattern[i:i + 2])
            i += 2
            continue
        if ch == "[" and not in_class:
            in_class = True
            out.append(ch)
            # a leading `^` or `]` is part of the set's syntax, not its end
            if pattern[i + 1:i + 2] == "^":
                out.append("^")
                i += 1
            if pattern[i + 1:i + 2] == "]":
                out.append("\\]")
                i += 1
        elif ch == "]" and in_class:
            in_class = False
            out.append(ch)
        else:
            out.append(ch)
        i += 1
    return "".join(out)


@functools.lru_cache(maxsize=4096)
def _re2(pattern: str) -> Callable[[str], bool] | None:
    try:
        import re2
    except ImportError:  # pragma: no cover - google-re2 is a dependency
        return None
    translated = to_re2(pattern)
    if translated is None:
        return None
    options = re2.Options()
    options.log_errors = False
    try:
        compiled = re2.compile(translated, options)
    except re2.error:
        return None
    return lambda value: compiled.search(value) is not None


def runs_linear(pattern: str) -> bool:
    """Whether `pattern` runs under RE2 (linear time in the value) in the post-check."""
    return _re2(pattern) is not None


@functools.lru_cache(maxsize=1024)
def _backtracking(pattern: str) -> Callable[[str], bool]:
    import regex

    try:
        compiled = regex.compile(pattern)
    except regex.error as exc:
        raise re.error(str(exc), pattern) from None

    def search(value: str) -> bool:
        try:
            return compiled.search(value, timeout=PATTERN_BUDGET_S) is not None
        except TimeoutError:
            raise PatternBudgetExceeded(pattern, len(value), PATTERN_BUDGET_S) from None

    return search


def bounded_search(pattern: str, value: str) -> bool:
    """Whether `pattern` matches anywhere in `value`: under RE2 if it can, else within the time budget."""
    linear = _re2(pattern)
    return linear(value) if linear is not None else _backtracking(pattern)(value)


# XGrammar (0.2.8) reads a raw non-ASCII character inside a negated class wrongly: `^[^一-鿿]+$` then admits `"`,
# `\` and tabs in the string's JSON text, so the model can close the string inside the value (invalid JSON; 23 of
# 32 DeepJSONEval zh documents under such a pattern, lab/journal/quality.md). The same class written with `\uXXXX`
# escapes, which mean the same in ECMA-262, is read right. Astral characters (past U+FFFF) are left as written.
_RAW_BMP = re.compile("[\u0080-\uffff]")
DATA_KEYWORDS = frozenset({"enum", "const", "default", "examples"})
NAME_MAPS = frozenset({"properties", "patternProperties", "$defs", "definitions", "dependentSchemas"})


def ascii_pattern(pattern: str) -> str:
    """`pattern` with each non-ASCII character of the Basic Multilingual Plane as a `\\uXXXX` escape."""
    return _RAW_BMP.sub(lambda m: f"\\u{ord(m.group()):04x}", pattern)


def with_ascii_patterns(schema: Any, names: bool = False) -> Any:
    """`schema` with every `pattern` keyword's value through `ascii_pattern`: the schema itself where none changes
    (so its text, and the grammar cache keyed by it, stay as they were), else a copy of the changed branches.
    `names`: `schema` maps names to schemas (`properties`, `$defs`), so its keys are not keywords."""
    if isinstance(schema, list):
        items = [with_ascii_patterns(item) for item in schema]
        return schema if all(a is b for a, b in zip(items, schema, strict=True)) else items
    if not isinstance(schema, dict):
        return schema
    changed: dict[str, Any] = {}
    for key, value in schema.items():
        if names:
            new = with_ascii_patterns(value)
        elif key in DATA_KEYWORDS:
            continue  # values, not schemas: an enum's `{"pattern": "é"}` is data
        elif key == "pattern" and isinstance(value, str):
            new = ascii_pattern(value)
        else:
            new = with_ascii_patterns(value, names=key in NAME_MAPS)
        if new is not value and new != value:
            changed[key] = new
    return {**schema, **changed} if changed else schema
