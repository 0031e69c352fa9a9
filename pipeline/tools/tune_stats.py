"""What `extract tune` adds to a setting's F1: fields to free where grounding forbids their gold values, per-field
F1, and whether two settings differ by more than the gold set's size can tell apart.

- A field whose reach on the gold (pipeline.tools.evaluate.reach: the share of its gold values the documents'
  grammars allow) is under `FREE_BELOW` is a field grounding makes wrong whatever the model does: tune tries it
  marked `x-grounded: false` (`mark_free`), as a lever of its own.
- Two settings are compared on the same documents by a paired bootstrap (`bootstrap_f1_diff`): the documents are
  resampled with replacement (seeded), and F1 (2·correct / (predicted + gold), summed over the resampled
  documents) is recomputed for both. Where the 95% interval of the difference holds 0, the gold set is too small
  to tell the two apart; below MIN_DOCUMENTS documents nothing is told apart.
"""

from __future__ import annotations

import copy
import random
from dataclasses import dataclass
from typing import Any

from schemas.refs import graph_for

FREE_BELOW = 0.9  # a field whose reach is under this is tried as x-grounded: false
RESAMPLES = 1000
SEED = 0
MIN_DOCUMENTS = 5  # below this a bootstrap has next to nothing to resample: no difference is told apart

Counts = tuple[int, int, int]  # a document's (gold, predicted, correct) non-null leaves


def low_reach_fields(fields: dict[str, dict[str, Any]], below: float = FREE_BELOW) -> list[str]:
    """The fields (Reach.fields()) whose reach is under `below`."""
    return [path for path, s in fields.items() if s["reach"] is not None and s["reach"] < below]


def _value(node: Any, root: dict[str, Any]) -> Any:
    """The node a field's value is described by: its references followed (`schemas.refs.SchemaGraph`), a
    nullable anyOf's value branch."""
    graph = graph_for(root)
    for _ in range(32):  # nested nullable wrappers, not a cycle
        if not isinstance(node, dict):
            return node
        if graph.refers(node):
            node = graph.expand(node).node
            continue
        branches = [b for b in node.get("anyOf") or node.get("oneOf") or [] if isinstance(b, dict)
                    and b.get("type") != "null"]
        if len(branches) == 1 and "properties" not in node and "items" not in node:
            node = branches[0]
            continue
        return node
    return node


def field_node(root: dict[str, Any], field: str) -> dict[str, Any] | None:
    """The schema node of a field named as eval names it (`vendor.name`, `items[].sku`, `items[]`)."""
    node: Any = root
    for segment in field.split("."):
        name = segment.rstrip("[]")
        lists = (len(segment) - len(name)) // 2
        holder = _value(node, root)
        node = holder.get("properties", {}).get(name) if isinstance(holder, dict) else None
        for _ in range(lists):
            holder = _value(node, root)
            node = holder.get("items") if isinstance(holder, dict) else None
        if not isinstance(node, dict):
            return None
    return node


def mark_free(json_schema: dict[str, Any], fields: list[str]) -> tuple[dict[str, Any], list[str]]:
    """A copy of the schema with each field marked `x-grounded: false`, and the fields it could not find."""
    work = copy.deepcopy(json_schema)
    missing = []
    for field in fields:
        node = field_node(work, field)
        if node is None:
            missing.append(field)
        else:
            node["x-grounded"] = False
    return work, missing


def f1_of(gold: int, predicted: int, correct: int) -> float | None:
    """Micro F1 over leaves: 2·correct / (predicted + gold); None where there is nothing to score."""
    return round(2 * correct / (predicted + gold), 4) if predicted + gold else None


@dataclass(frozen=True)
class Difference:
    """F1 of `a` less F1 of `b` on the same documents, with its bootstrap interval."""

    diff: float
    low: float
    high: float
    documents: int

    @property
    def within_noise(self) -> bool:
        return self.documents < MIN_DOCUMENTS or self.low <= 0.0 <= self.high

    def line(self) -> str:
        verdict = (f"too few documents ({self.documents}) to tell settings apart" if self.documents < MIN_DOCUMENTS
                   else f"within what {self.documents} documents can tell apart" if self.within_noise
                   else f"beyond what {self.documents} documents leave to chance")
        return f"ΔF1 {self.diff:+.3f} (95% bootstrap interval {self.low:+.3f} to {self.high:+.3f}): {verdict}"


def _f1(counts: list[Counts]) -> float:
    gold = sum(c[0] for c in counts)
    predicted = sum(c[1] for c in counts)
    return 2 * sum(c[2] for c in counts) / (gold + predicted) if gold + predicted else 0.0


def bootstrap_f1_diff(a: dict[str, Counts], b: dict[str, Counts], resamples: int = RESAMPLES,
                      seed: int = SEED) -> Difference | None:
    """The paired bootstrap of F1(a) − F1(b) over the documents both scored (None: no such document)."""
    ids = sorted(set(a) & set(b))
    if not ids:
        return None
    rng = random.Random(seed)
    diffs = []
    for _ in range(resamples):
        sample = [ids[rng.randrange(len(ids))] for _ in ids]
        diffs.append(_f1([a[i] for i in sample]) - _f1([b[i] for i in sample]))
    diffs.sort()
    low, high = diffs[int(0.025 * resamples)], diffs[min(resamples - 1, int(0.975 * resamples))]
    diff = _f1([a[i] for i in ids]) - _f1([b[i] for i in ids])
    return Difference(round(diff, 4), round(low, 4), round(high, 4), len(ids))
