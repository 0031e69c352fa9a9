"""JSON Pointer (RFC 6901): writing one from a path, reading one back, and following it into a document.

The one implementation of `~0`/`~1` escaping in the house: the limit checks, the validator's error locations,
the grammar bounds and reference resolution (`schemas.refs`) all use it."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any


def escape_pointer(part: Any) -> str:
    """One path segment as a pointer token: `~` → `~0`, `/` → `~1`."""
    return str(part).replace("~", "~0").replace("/", "~1")


def unescape_pointer(token: str) -> str:
    """A pointer token back to its segment: `~1` → `/`, `~0` → `~` (in that order, as RFC 6901 says)."""
    return token.replace("~1", "/").replace("~0", "~")


def pointer(parts: Iterable[Any]) -> str:
    """The JSON pointer of a path: `["properties", "a/b", 0]` → `/properties/a~1b/0` (the root is "")."""
    return "".join("/" + escape_pointer(p) for p in parts)


def pointer_parts(text: str) -> list[str]:
    """The segments of a pointer: `/properties/a~1b` → `["properties", "a/b"]`; "" (the root) → []."""
    return [unescape_pointer(token) for token in text.split("/")[1:]] if text else []


def follow_pointer(document: Any, text: str) -> Any:
    """The value `text` points to in `document` (object members by name, array items by index), or None
    when it points nowhere."""
    node = document
    for part in pointer_parts(text):
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return None
    return node
