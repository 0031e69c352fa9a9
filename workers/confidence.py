"""How sure the model was of each value it wrote: per-leaf confidence from the sampled tokens' log-probabilities.

The engine returns, for every token it sampled, that token's log-probability (`SamplingParams.logprobs=0`, vLLM's
default `logprobs_mode: raw_logprobs`). "Raw" is before temperature and penalties but after the grammar's mask:
vLLM applies the structured-output bitmask to the logits before its sampler computes them, so a probability is
the model's among the tokens the grammar allowed at that step. That is the question a reader of a row asks: of
the values this field could take here, how strongly did the model pick this one.

A leaf's confidence is the joint probability of the tokens that wrote it: every token whose text overlaps the
leaf's literal (a string with its quotes, a number, `true`, `false`) or the one character after it, since the token
that ends a value (`",` after a string, `,` or a newline after a number) is the model deciding the value is
complete. exp(sum of their log-probabilities), in [0, 1]. Paths are concrete, with list indexes:
`line_items[0].amount`. A null leaf has no confidence (nothing was extracted).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from typing import Any

import pyarrow as pa

from schemas.spans import join_path, leaves

# The rows' columns (pipeline/output/tables.py), and the outcome table's that carry them from the actors.
CONFIDENCE_TYPE = pa.map_(pa.string(), pa.float64())  # leaf path → confidence
# leaf path → where the document writes the value (schemas.spans): [{start, end}], code-point offsets, end exclusive
SPANS_TYPE = pa.map_(pa.string(), pa.list_(pa.struct([pa.field("start", pa.int32()), pa.field("end", pa.int32())])))

_NUMBER = re.compile(r"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?")
_WS = re.compile(r"[ \t\n\r]*")
_decoder = json.JSONDecoder()


class _Cursor:
    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def skip(self) -> None:
        self.pos = _WS.match(self.text, self.pos).end()

    def peek(self) -> str:
        self.skip()
        return self.text[self.pos] if self.pos < len(self.text) else ""

    def expect(self, char: str) -> None:
        if self.peek() != char:
            raise ValueError(f"expected {char!r} at {self.pos}")
        self.pos += 1


def _string(cur: _Cursor) -> tuple[str, int]:
    """The JSON string opening at `cur.pos` and the position after it. A raw control character in it is read as
    the character, as `schemas.contract.parse_output` reads the output (a `maxLength` string's grammar admits it)."""
    return json.decoder.scanstring(cur.text, cur.pos + 1, False)


def _object(cur: _Cursor, path: str, out: list[tuple[str, int, int, Any]]) -> None:
    cur.pos += 1
    if cur.peek() == "}":
        cur.pos += 1
        return
    while True:
        if cur.peek() != '"':
            raise ValueError(f"expected a key at {cur.pos}")
        key, cur.pos = _string(cur)
        cur.expect(":")
        _value(cur, join_path(path, key), out)
        if cur.peek() != ",":
            cur.expect("}")
            return
        cur.pos += 1


def _array(cur: _Cursor, path: str, out: list[tuple[str, int, int, Any]]) -> None:
    cur.pos += 1
    if cur.peek() == "]":
        cur.pos += 1
        return
    index = 0
    while True:
        _value(cur, f"{path}[{index}]", out)
        index += 1
        if cur.peek() != ",":
            cur.expect("]")
            return
        cur.pos += 1


_LITERALS = (("true", True), ("false", False), ("null", None))


def _value(cur: _Cursor, path: str, out: list[tuple[str, int, int, Any]]) -> None:
    char = cur.peek()
    start = cur.pos
    if char == "{":
        return _object(cur, path, out)
    if char == "[":
        return _array(cur, path, out)
    if char == '"':
        value, cur.pos = _string(cur)
        out.append((path, start, cur.pos, value))
        return None
    for literal, value in _LITERALS:
        if cur.text.startswith(literal, cur.pos):
            cur.pos += len(literal)
            if value is not None:
                out.append((path, start, cur.pos, value))
            return None
    match = _NUMBER.match(cur.text, cur.pos)
    if not match:
        raise ValueError(f"not a JSON value at {cur.pos}")
    cur.pos = match.end()
    out.append((path, start, cur.pos, json.loads(match.group(0))))
    return None


def leaf_spans(text: str) -> list[tuple[str, int, int, Any]]:
    """Each non-null scalar leaf of the JSON `text`: (concrete path, start, end, value), `end` exclusive, a string's
    span with its quotes. Raises ValueError on text that is not one JSON value."""
    cur = _Cursor(text)
    out: list[tuple[str, int, int, Any]] = []
    _value(cur, "", out)
    cur.skip()
    if cur.pos != len(text):
        raise ValueError(f"text after the JSON value at {cur.pos}")
    return out


def token_offsets(pieces: Sequence[str], text: str) -> list[int] | None:
    """Each token's start offset in `text`, from the tokens' decoded pieces; None where they do not spell `text`
    (a token that decodes to part of a character), so no confidence is claimed from misaligned tokens."""
    starts, pos = [], 0
    for piece in pieces:
        starts.append(pos)
        pos += len(piece)
    if "".join(pieces)[:len(text)] != text:
        return None
    return starts


def leaf_confidence(text: str, pieces: Sequence[str], logprobs: Sequence[float]) -> dict[str, float] | None:
    """Concrete leaf path → confidence in [0, 1] (module docstring), or None when the tokens cannot be aligned
    with the text or the text does not parse."""
    if len(pieces) != len(logprobs):
        return None
    starts = token_offsets(pieces, text)
    if starts is None:
        return None
    try:
        leaves = leaf_spans(text)
    except (ValueError, RecursionError):
        return None
    ends = [s + len(p) for s, p in zip(starts, pieces, strict=True)]
    out: dict[str, float] = {}
    first = 0
    for path, start, end, _ in leaves:
        while first < len(ends) and ends[first] <= start:
            first += 1
        total, i = 0.0, first
        while i < len(starts) and starts[i] <= end:  # overlaps [start, end]: the literal and the char after it
            if ends[i] > start:
                total += logprobs[i]
            i += 1
        out[path] = round(math.exp(total), 6)
    return out


def minimum(confidence: dict[str, float] | None) -> float | None:
    """A row's confidence: its least confident leaf (None without leaves)."""
    return min(confidence.values()) if confidence else None


def row_confidence(text: str, pieces: Sequence[str], logprobs: Sequence[float],
                   record: dict[str, Any]) -> dict[str, float] | None:
    """The confidence of each leaf the row keeps (a list cut before a repeat keeps fewer leaves than the text
    wrote; a leaf the row's model renamed or normalised away has none). None where the tokens give none."""
    if not pieces:
        return None
    confidence = leaf_confidence(text, pieces, logprobs)
    if confidence is None:
        return None
    kept = {path for path, _ in leaves(record, booleans=True)}
    return {path: value for path, value in confidence.items() if path in kept}
