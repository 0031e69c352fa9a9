"""A value the model wrote for a field its document gave it nothing to copy for, and was not sure of: null.

Grounding never forbids (`schemas.grounding.core`): a nullable field whose finder finds nothing in the document
keeps `null` and its plain type, so a value the finder misreads stays writable. The price is that a small model,
left free on a field the document does not fill, writes something: on the tickets job (English e-mails and forms,
2026-12-06) the bundled model wrote `order_number` "1234567890", `amount` 123456789012345, `order_date`
2022-01-01 in 32 of the 40 tickets' free fields, where every gold value is null. Such values are the model's
guesses, and it says so: their confidence (the joint probability of the tokens that wrote them,
`workers.confidence`) was 0.00-0.12 in 29 of those 32 (0.50 and 0.54 for `N/A` twice, 0.97 for `S3`, a word of
the document), while the values it copied from a grounded field's candidates were mostly above 0.4.

So after decoding, such a leaf whose confidence is under `UNSURE_BELOW` is set to null before the record is
checked; the grammar offered it (nothing is forbidden) and a value the model is sure of is kept. The threshold is
no fit: 0.5 is "less likely than not", the point where a guess is likelier wrong than right.

What it is worth (bundled model, `extract eval`, 2026-12-06): on the tickets, where the guesses were seen, F1
0.689 -> 0.728 (31 of 53 invented values gone, recall unchanged). Where it was not chosen: the unmarked sample
(`--set schema=sample.unmarked_invoice:UnmarkedInvoice`), whose only free nullable fields are in its two
documents without gold, 0.777 -> 0.782 (the master agreement, refused before for an invented invoice number, is
now a row with it null; the rest is run-to-run noise); the marked sample, the multilingual job and DeepJSONEval
en/zh (first 32) have no free nullable field in any document, so nothing changes there.

Grounding marks such a node `FREE_KEY` (only a nullable one, and only when asked: `ground(..., mark_free=True)`);
`free_fields` takes the marks off the grammar's schema and gives the leaf paths they stand for.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from typing import Any

from schemas.grounding.elsewhere import UNFOUND_KEY
from schemas.walk import iter_subschemas

FREE_KEY = "x-free"  # a nullable field its finder found nothing for, left its plain type (schemas.grounding.core)
UNSURE_BELOW = 0.5  # a free leaf's confidence under which it is null: less likely than not (module docstring)


def free_fields(grammar: dict[str, Any]) -> tuple[dict[str, Any], tuple[re.Pattern[str], ...]]:
    """The grammar's schema without `FREE_KEY` (or `UNFOUND_KEY`) marks (taken off in place: grounding's schema is
    its own copy), and a pattern of the concrete leaf paths (`order_number`, `items[0].amount`) each marked field
    stands for. A field reached only through `$defs`, or through anything but properties, list items and
    `anyOf`/`oneOf`, is left out (its leaf paths are not known here)."""
    marked = []
    for path, node in iter_subschemas(grammar):
        node.pop(UNFOUND_KEY, None)  # read before this, if at all (schemas.grounding.elsewhere)
        if node.get(FREE_KEY) is True:
            marked.append((path, node))
    patterns = []
    for path, node in marked:
        del node[FREE_KEY]
        pattern = _leaf_pattern(path)
        if pattern is not None:
            patterns.append(re.compile(pattern))
    return grammar, tuple(patterns)


def _leaf_pattern(path: tuple[Any, ...]) -> str | None:
    parts, i = [], 0
    while i < len(path):
        key = path[i]
        if key == "properties" and i + 1 < len(path):
            parts.append((r"\." if parts else "") + re.escape(str(path[i + 1])))
            i += 2
        elif key == "items":
            parts.append(r"\[\d+\]")
            i += 2 if i + 1 < len(path) and isinstance(path[i + 1], int) else 1
        elif key in ("anyOf", "oneOf") and i + 1 < len(path):
            i += 2
        else:
            return None
    return "".join(parts) if parts else None


def unsure_free(text: str, confidence: dict[str, float] | None, free: Sequence[re.Pattern[str]],
                below: float = UNSURE_BELOW) -> tuple[str, list[str]]:
    """The output text with every leaf of a free field whose confidence is under `below` set to null, and those
    leaves' paths (the text itself, and none, where nothing is)."""
    if not free or not confidence:
        return text, []
    unsure = [path for path, value in confidence.items()
              if value < below and any(p.fullmatch(path) for p in free)]
    if not unsure:
        return text, []
    try:
        record = json.loads(text)
    except ValueError:
        return text, []
    done = [path for path in unsure if _set_null(record, path)]
    return (json.dumps(record, ensure_ascii=False), done) if done else (text, [])


STEP = re.compile(r"\[(\d+)\]|\.?([^.\[]+)")


def _set_null(record: Any, path: str) -> bool:
    """Set the leaf at a concrete path (`items[0].amount`) to null; whether it was there (a scalar)."""
    steps = [int(index) if index else key for index, key in STEP.findall(path)]
    node = record
    for step in steps[:-1]:
        try:
            node = node[step]
        except (KeyError, IndexError, TypeError):
            return False
    last = steps[-1] if steps else None
    if isinstance(node, dict) and isinstance(last, str) and last in node and _scalar(node[last]) \
            or isinstance(node, list) and isinstance(last, int) and last < len(node) and _scalar(node[last]):
        node[last] = None
        return True
    return False


def _scalar(value: Any) -> bool:
    return value is not None and not isinstance(value, dict | list) and not (
        isinstance(value, float) and math.isnan(value))
