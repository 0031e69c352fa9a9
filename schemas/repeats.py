"""Lists that loop: `schema_policy.repeated_items`.

A small model under greedy decoding that writes a list item it has already written is, far more often than not,
in a loop: it writes that item again until the grammar's item bound or the token limit stops it
(`"Actors": [{"Name": "Lena"}, {"Name": "Lena"}, … ten times]`). Every repeat is a wrong value. Under `cut`
(the default) a list ends before its first item that equals an earlier item of the same list (as canonical
JSON: the same keys and values), at every depth. Under `keep` the output is taken as decoded.

The cut never makes a dead letter: an output that passes its checks only uncut (a `minItems` the cut list falls
short of, a validator that counts) is checked as decoded (`workers.classify`). The raw output kept with a dead
letter is always the model's own text.

Measured on outputs of the bundled model (docs/quality.md): DeepJSONEval dev first 32, F1 0.224 → 0.346; the
sample job 0.709 → 0.726; the support tickets, whose lists do not loop, unchanged.
"""

from __future__ import annotations

import json
from typing import Any

MODES = ("cut", "keep")


def _key(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def cut_repeats(value: Any) -> tuple[Any, int]:
    """`value` with every list cut before its first repeated item (inner lists first), and how many items went."""
    if isinstance(value, dict):
        out, dropped = {}, 0
        for key, item in value.items():
            out[key], n = cut_repeats(item)
            dropped += n
        return out, dropped
    if isinstance(value, list):
        kept: list[Any] = []
        seen: set[str] = set()
        dropped = 0
        for index, item in enumerate(value):
            item, n = cut_repeats(item)
            key = _key(item)
            if key in seen:
                return kept, dropped + len(value) - index
            dropped += n
            seen.add(key)
            kept.append(item)
        return kept, dropped
    return value, 0


def cut_output(text: str) -> tuple[str, int] | None:
    """The decoded JSON text with its repeats cut, and how many items went; None when nothing is cut or the
    text does not parse (the checks then see the text as decoded and say why)."""
    try:
        parsed = json.loads(text)
    except (json.JSONDecodeError, RecursionError):
        return None
    cut, dropped = cut_repeats(parsed)
    if not dropped:
        return None
    return json.dumps(cut, ensure_ascii=False, separators=(",", ":")), dropped


def has_lists(schema: Any) -> bool:
    """Whether a JSON Schema can produce a list anywhere (so `cut` can act on its outputs)."""
    if isinstance(schema, dict):
        kind = schema.get("type")
        if kind == "array" or (isinstance(kind, list) and "array" in kind) or "items" in schema \
                or "prefixItems" in schema:
            return True
        return any(has_lists(v) for k, v in schema.items() if k not in ("enum", "const", "examples", "default"))
    if isinstance(schema, list):
        return any(has_lists(v) for v in schema)
    return False
