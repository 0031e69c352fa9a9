"""Catastrophic backtracking in a regular expression (ReDoS), found on Python's own parse of it (`re._parser`).

`redos_risk(pattern)` says why a pattern can backtrack exponentially (or polynomially, for a counted repeat) in a
backtracking engine (Python's `re`, `regex`), or None: an unbounded repeat over a body that one iteration can
split several ways (nested quantifiers, overlapping alternatives, adjacent overlapping repeats). Characters are
reasoned about over a fixed sample (Latin-1 and a few others). `schemas.limits` refuses such a pattern when RE2
cannot run it."""

from __future__ import annotations

import re
from typing import Any

try:  # Python 3.11+
    import re._constants as sre_constants
    import re._parser as sre_parse
except ImportError:  # pragma: no cover - Python 3.10
    import sre_constants  # type: ignore[no-redef]
    import sre_parse  # type: ignore[no-redef]


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
