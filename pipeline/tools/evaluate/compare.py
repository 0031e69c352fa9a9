"""Record comparison: one predicted record against its gold record, as a list of leaf events."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from pipeline.tools.evaluate.leaves import leaf_equal
from pipeline.tools.evaluate.options import EvalOptions
from pipeline.tools.evaluate.schema_view import SchemaView
from schemas.spans import join_path

KINDS = ("correct", "wrong", "missed", "spurious", "null_agree")


@dataclass(frozen=True)
class Event:
    path: str
    kind: str  # one of KINDS
    absent: bool = False  # a missed value whose key the prediction lacked outright (not null)
    at: str | None = None  # the predicted leaf's concrete path (`items[2].sku`), as `_confidence` names it


def maybe_json(value: Any) -> Any:
    """Free-form schema values are stored as JSON text in typed rows; read them back for comparison."""
    if isinstance(value, str):
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            return value
    return value


class Comparer:
    """Compares one predicted record with its gold record under one schema."""

    def __init__(self, schema: dict[str, Any] | None, options: EvalOptions) -> None:
        self.view = SchemaView(schema)
        self.options = options
        self.not_in_schema: Counter[str] = Counter()  # gold paths the schema does not declare
        self.pred_not_in_schema: Counter[str] = Counter()  # predicted paths it does not declare (not scored)

    def record(self, pred: dict[str, Any] | None, gold: dict[str, Any]) -> list[Event]:
        return self.compare(pred, gold, self.view.root, "", absent=pred is None)

    def compare(self, pred: Any, gold: Any, node: Any, path: str, absent: bool = False,
                at: str = "") -> list[Event]:
        if isinstance(gold, (dict, list)) and isinstance(pred, str):
            pred = maybe_json(pred)
        if isinstance(pred, dict) or isinstance(gold, dict):
            if _fits(pred, dict) and _fits(gold, dict):
                return self._objects(pred, gold, node, path, absent, at)
            return self._mismatch(pred, gold, node, path, at)
        if isinstance(pred, list) or isinstance(gold, list):
            if _fits(pred, list) and _fits(gold, list):
                return self._lists(pred, gold, node, path, absent, at)
            return self._mismatch(pred, gold, node, path, at)
        if gold is None:
            return [Event(path, "null_agree" if pred is None else "spurious", at=at)]
        if pred is None:
            return [Event(path, "missed", absent)]
        equal = leaf_equal(pred, gold, self.options.tolerance, self.view.format(node))
        return [Event(path, "correct" if equal else "wrong", at=at)]

    def _mismatch(self, pred: Any, gold: Any, node: Any, path: str, at: str = "") -> list[Event]:
        """Different shapes (an object against a scalar, say): every gold leaf missed, every predicted one spurious."""
        events = [e for e in self.compare(None, gold, node, path) if e.kind != "null_agree"]
        return events + [e for e in self.compare(pred, None, node, path, at=at) if e.kind != "null_agree"]

    def _objects(self, pred: dict | None, gold: dict | None, node: Any, path: str, absent: bool,
                 at: str = "") -> list[Event]:
        declared = self.view.declared(node)
        keys = list(dict.fromkeys([*(gold or {}), *(pred or {})]))
        events: list[Event] = []
        for key in keys:
            child_path = join_path(path, key)
            if declared is not None and key not in declared:
                if gold is not None and key in gold:
                    self.not_in_schema[child_path] += 1
                if pred is not None and key in pred:
                    self.pred_not_in_schema[child_path] += 1
                continue
            key_absent = absent if pred is None else key not in pred
            events += self.compare((pred or {}).get(key), (gold or {}).get(key), self.view.child(node, key),
                                   child_path, key_absent, join_path(at, key))
        return events

    def _lists(self, pred: list | None, gold: list | None, node: Any, path: str, absent: bool,
               at: str = "") -> list[Event]:
        item_node, item_path = self.view.items(node), path + "[]"
        if pred is None or gold is None:
            return [e for i, (p, g) in enumerate(_pad(pred or [], gold or [], pred is None, gold is None))
                    for e in self.compare(p, g, item_node, item_path, absent, f"{at}[{i}]")]
        if self.view.is_set(node) or self.options.is_unordered(path):
            pairs = self._match_set(pred, gold, item_node, item_path, at)
        else:
            pairs = [(pred[i] if i < len(pred) else None, gold[i] if i < len(gold) else None, None, i)
                     for i in range(max(len(pred), len(gold)))]
        events: list[Event] = []
        for p, g, known, i in pairs:
            events += known if known is not None else self.compare(p, g, item_node, item_path, at=f"{at}[{i}]")
        return events

    def _match_set(self, pred: list, gold: list, node: Any, path: str,
                   at: str = "") -> list[tuple[Any, Any, list[Event] | None, int]]:
        """Greedy matching: the pair sharing the most correct leaves first; pairs sharing none stay apart."""
        trials: list[tuple[int, int, int, int, list[Event]]] = []
        for i, p in enumerate(pred):
            for j, g in enumerate(gold):
                events = self.compare(p, g, node, path, at=f"{at}[{i}]")
                score = sum(e.kind == "correct" for e in events)
                if score:
                    trials.append((-score, abs(i - j), i, j, events))
        trials.sort(key=lambda t: t[:4])
        used_p: set[int] = set()
        used_g: set[int] = set()
        pairs: list[tuple[Any, Any, list[Event] | None, int]] = []
        for _, _, i, j, events in trials:
            if i not in used_p and j not in used_g:
                used_p.add(i)
                used_g.add(j)
                pairs.append((pred[i], gold[j], events, i))
        pairs += [(None, g, None, -1) for j, g in enumerate(gold) if j not in used_g]
        pairs += [(p, None, None, i) for i, p in enumerate(pred) if i not in used_p]
        return pairs


def _fits(value: Any, kind: type) -> bool:
    return value is None or isinstance(value, kind)


def _pad(pred: list, gold: list, pred_none: bool, gold_none: bool) -> Iterable[tuple[Any, Any]]:
    if pred_none:
        return [(None, g) for g in gold]
    return [(p, None) for p in pred]
