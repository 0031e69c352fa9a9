"""How every bench arm is scored: its records against the synthetic golds, as `extract eval` scores a run
(`pipeline.tools.evaluate.score`: its normalisation and number tolerance).

- `accuracy`: field accuracy, correct leaves over the golds' non-null leaves;
- `leaf_fields`: the field accuracy, the correct leaves and those per second, the columns each arm reports;
- `leaf_scores`: the overall `FieldStats` both come from.
"""

from __future__ import annotations

from typing import Any

from pipeline.tools.evaluate import score
from pipeline.tools.synthetic import contract_record


def expected_records(golds: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The synthetic golds in the sample contract's shape (`contract_record`), by doc_id."""
    return {g["doc_id"]: {k: v for k, v in contract_record(g).items() if k != "doc_id"} for g in golds}


def leaf_scores(records: list[dict[str, Any] | None], golds: list[dict[str, Any]]) -> Any:
    """`extract eval`'s overall `FieldStats` of `records` against `golds` (None: a document without a record,
    which misses all of its leaves)."""
    pairs = list(zip(golds, records, strict=True))
    rows = {g["doc_id"]: r for g, r in pairs if r is not None}
    dead = {g["doc_id"]: "no_record" for g, r in pairs if r is None}
    return score(expected_records(golds), rows, dead, lambda _: None).overall


def accuracy(records: list[dict[str, Any] | None], golds: list[dict[str, Any]]) -> float:
    """Field accuracy: correct leaves over the gold records' non-null leaves, where a document without a record
    (None) misses all of its own."""
    return leaf_scores(records, golds).recall or 0.0


def leaf_fields(records: list[dict[str, Any] | None], golds: list[dict[str, Any]], seconds: float
                ) -> dict[str, Any]:
    """An arm's field accuracy (correct over gold non-null leaves), its correct leaves, and those per second
    of the same `seconds` its docs/s is measured over."""
    stats = leaf_scores(records, golds)
    return {"field_accuracy": round(stats.recall or 0.0, 4), "correct_leaves": stats.correct,
            "correct_leaves_per_s": round(stats.correct / seconds, 3) if seconds > 0 else None}
