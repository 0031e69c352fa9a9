"""Metadata read from an output is parsed with bounds (issue 55): an output folder is a share other people and tools
can write to, so a manifest, run record or lease is checked for size, nesting depth and type before it is used.

`bounded_json(text, what)` returns the JSON object, or raises `MetadataBoundsError` (a `ValueError`) in one line:
over `MAX_BYTES`, nested deeper than `MAX_DEPTH` (a 200,000-deep array is refused before the parser would recurse),
NaN or Infinity, not an object. `typed(cls, raw, what)` checks the known keys of a dataclass's fields against the
types they declare (a run record whose `partitions` is a string is refused, not a crash three calls later)."""

from __future__ import annotations

import json
import re
from dataclasses import fields
from typing import Any

MAX_BYTES = 64 << 20  # a manifest names two files; a run record lists partitions and actors: far under this
MAX_DEPTH = 32  # the deepest metadata extract writes nests 5 levels
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')


class MetadataBoundsError(ValueError):
    """Metadata outside the bounds: too big, too deep, NaN or Infinity, or of the wrong type."""


def nesting(text: str) -> int:
    """The deepest nesting of `[` and `{` in JSON text, strings left out (without parsing it)."""
    depth = top = 0
    for char in _STRING.sub("", text):
        if char in "[{":
            depth += 1
            top = max(top, depth)
        elif char in "]}":
            depth -= 1
    return top


def _constant(name: str) -> Any:
    raise MetadataBoundsError(f"holds {name}, which is not a number")


def bounded_json(text: str, what: str) -> dict[str, Any]:
    """The JSON object `text` holds, within the bounds; `MetadataBoundsError` naming the bound otherwise."""
    if len(text) > MAX_BYTES:
        raise MetadataBoundsError(f"{len(text)} characters, over the {MAX_BYTES} a {what} may hold")
    depth = nesting(text)
    if depth > MAX_DEPTH:
        raise MetadataBoundsError(f"nests {depth} levels deep, over the {MAX_DEPTH} a {what} may")
    try:
        raw = json.loads(text, parse_constant=_constant)
    except RecursionError:
        raise MetadataBoundsError(f"nests too deep for a {what}") from None
    if not isinstance(raw, dict):
        raise MetadataBoundsError(f"a JSON {type(raw).__name__}, not the object a {what} is")
    return raw


_KINDS: dict[str, tuple[type, ...]] = {"str": (str,), "int": (int,), "float": (int, float), "bool": (bool,)}


def _allowed(annotation: str) -> tuple[type, ...] | None:
    """The Python types a field's (string) annotation allows, or None where it is not checked (`Any`)."""
    kinds: list[type] = []
    for part in (p.strip() for p in annotation.split("|")):
        base = part.split("[", 1)[0]
        if base == "None":
            kinds.append(type(None))
        elif base in _KINDS:
            kinds.extend(_KINDS[base])
        elif base in ("dict", "list"):
            kinds.append(dict if base == "dict" else list)
        else:
            return None
    return tuple(kinds)


def typed(cls: type, raw: dict[str, Any], what: str) -> None:
    """Raise `MetadataBoundsError` if a key of `raw` that names a field of the dataclass `cls` holds a value of a
    type the field does not declare (a bool is not an int here)."""
    for f in fields(cls):
        if f.name not in raw:
            continue
        allowed = _allowed(str(f.type))
        value = raw[f.name]
        if allowed is None:
            continue
        if not isinstance(value, allowed) or (isinstance(value, bool) and bool not in allowed):
            raise MetadataBoundsError(f"its {f.name!r} is a JSON {type(value).__name__}, not what a {what} holds "
                                      f"there ({f.type})")
