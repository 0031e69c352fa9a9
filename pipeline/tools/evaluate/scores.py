"""Aggregation: leaf events per field path and overall, per document, and the confidence's calibration."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from pipeline.tools.calibration import Calibration, Calibrator, calibration, cross_fitted_leaves
from pipeline.tools.evaluate.compare import Comparer, Event
from pipeline.tools.evaluate.options import DEFAULT_OPTIONS, EvalOptions
from workers.calibrator import Leaf, leaf_features


@dataclass
class FieldStats:
    gold: int = 0  # non-null gold leaves
    predicted: int = 0  # non-null predicted leaves
    correct: int = 0
    wrong: int = 0
    missed: int = 0
    spurious: int = 0
    null_agree: int = 0
    absent: int = 0  # of the missed: the prediction lacked the key (rather than holding null)

    def add(self, event: Event) -> None:
        setattr(self, event.kind, getattr(self, event.kind) + 1)
        if event.kind in ("correct", "wrong", "missed"):
            self.gold += 1
        if event.kind in ("correct", "wrong", "spurious"):
            self.predicted += 1
        if event.absent:
            self.absent += 1

    def merge(self, other: FieldStats) -> None:
        for name, value in asdict(other).items():
            setattr(self, name, getattr(self, name) + value)

    @property
    def precision(self) -> float | None:
        return _ratio(self.correct, self.predicted)

    @property
    def recall(self) -> float | None:
        return _ratio(self.correct, self.gold)

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "precision": self.precision, "recall": self.recall}


def _ratio(num: int, den: int) -> float | None:
    return round(num / den, 4) if den else None


@dataclass
class DocResult:
    doc_id: str
    status: str  # row | dead_letter
    reason: str | None
    gold: int
    predicted: int
    correct: int
    exact: bool


@dataclass
class Scores:
    """Everything `extract eval` reports, before it is written."""

    fields: dict[str, FieldStats]
    overall: FieldStats
    documents: list[DocResult]
    gold_total: int
    gold_not_in_run: list[str]
    rows_without_gold: int
    dead_letters_without_gold: int
    not_in_schema: dict[str, int]
    pred_not_in_schema: dict[str, int] = field(default_factory=dict)
    run_dead_letters_by_reason: dict[str, int] = field(default_factory=dict)
    calibration: Calibration | None = None  # leaf confidence against correctness (pipeline.tools.calibration)
    calibrated: Calibration | None = None  # the same after the leaf model's calibration, cross-fitted on the gold
    confidence_points: list[tuple[str, str, float, bool]] = field(default_factory=list)
    leaf_points: list[tuple[str, str, Leaf, bool]] = field(default_factory=list)  # the same leaves' features

    def fit_calibration(self) -> Calibrator:
        """The leaf model (workers.calibrator, format 2) fitted on every scored leaf (`extract eval
        --fit-calibration`)."""
        return Calibrator.fit_leaves(self.leaf_points)

    @property
    def scored(self) -> int:
        return len(self.documents)

    def summary(self) -> dict[str, Any]:
        n = self.scored
        with_row = [d for d in self.documents if d.status == "row"]
        exact = sum(d.exact for d in self.documents)
        reasons = Counter(d.reason for d in self.documents if d.status == "dead_letter")
        o = self.overall
        f1 = (round(2 * o.precision * o.recall / (o.precision + o.recall), 4)
              if o.precision and o.recall else (0.0 if o.precision is not None and o.recall is not None else None))
        return {
            "documents": {
                "gold": self.gold_total, "scored": n, "with_row": len(with_row), "dead_letters": n - len(with_row),
                "gold_not_in_run": len(self.gold_not_in_run), "rows_without_gold": self.rows_without_gold,
                "dead_letters_without_gold": self.dead_letters_without_gold,
            },
            "overall": {
                "precision": o.precision, "recall": o.recall, "f1": f1,
                "exact_match_rate": _ratio(exact, n), "exact_match_rate_on_rows": _ratio(exact, len(with_row)),
                "coverage": _ratio(len(with_row), n), "dead_letter_rate": _ratio(n - len(with_row), n),
                "leaves": o.to_dict(),
            },
            "dead_letters_by_reason": {r: {"count": c, "rate": _ratio(c, n)} for r, c in sorted(reasons.items())},
            "run_dead_letters_by_reason": dict(sorted(self.run_dead_letters_by_reason.items())),
            "fields": {path: s.to_dict() for path, s in sorted(self.fields.items())},
            "confidence": self.calibration.as_dict() if self.calibration is not None else None,
            "confidence_calibrated": self.calibrated.as_dict() if self.calibrated is not None else None,
            "not_in_schema": dict(sorted(self.not_in_schema.items())),
            "predicted_not_in_schema": dict(sorted(self.pred_not_in_schema.items())),
            "per_document": [asdict(d) for d in self.documents],
            "gold_not_in_run": self.gold_not_in_run[:50],
        }


def score(
    golds: dict[str, dict[str, Any]],
    rows: dict[str, dict[str, Any]],
    dead_letters: dict[str, str],
    schema_for: Callable[[str], dict[str, Any] | None],
    options: EvalOptions = DEFAULT_OPTIONS,
    confidences: dict[str, dict[str, float]] | None = None,
    spans: dict[str, dict[str, Any]] | None = None,
    documents: dict[str, str] | None = None,
) -> Scores:
    """Score `rows` (id → record) and `dead_letters` (id → reason) against `golds` (id → record); with
    `confidences` (id → the row's `_confidence`), how well they tell right leaves from wrong ones, raw and
    calibrated by the leaf model (which also reads `spans`, id → the row's `_spans`, and `documents`, id → its
    text, where given)."""
    tally = _Tally()
    missing: list[str] = []
    for doc_id, gold in golds.items():
        if doc_id not in rows and doc_id not in dead_letters:
            missing.append(doc_id)
            continue
        tally.document(doc_id, gold, rows.get(doc_id), dead_letters.get(doc_id),
                       Comparer(schema_for(doc_id), options), (confidences or {}).get(doc_id) or {},
                       (spans or {}).get(doc_id), (documents or {}).get(doc_id))
    points = tally.points
    return Scores(
        fields=tally.fields, overall=tally.overall, documents=tally.documents, gold_total=len(golds),
        gold_not_in_run=missing, rows_without_gold=sum(1 for k in rows if k not in golds),
        dead_letters_without_gold=sum(1 for k in dead_letters if k not in golds and k not in rows),
        not_in_schema=dict(tally.not_in_schema), pred_not_in_schema=dict(tally.pred_not_in_schema),
        run_dead_letters_by_reason=dict(Counter(dead_letters.values())),
        calibration=calibration([(c, ok) for _, _, c, ok in points]) if confidences is not None else None,
        calibrated=calibration(cross_fitted_leaves(tally.leaf_points)) if confidences is not None and points
        else None,
        confidence_points=points, leaf_points=tally.leaf_points,
    )


@dataclass
class _Tally:
    """The scores as documents are added: per field, overall, per document, and the confidence points."""

    points: list[tuple[str, str, float, bool]] = field(default_factory=list)  # (document, field, confidence, ok)
    leaf_points: list[tuple[str, str, Leaf, bool]] = field(default_factory=list)  # (document, field, features, ok)
    fields: dict[str, FieldStats] = field(default_factory=dict)
    overall: FieldStats = field(default_factory=FieldStats)
    documents: list[DocResult] = field(default_factory=list)
    not_in_schema: Counter[str] = field(default_factory=Counter)
    pred_not_in_schema: Counter[str] = field(default_factory=Counter)

    def document(self, doc_id: str, gold: dict[str, Any], pred: dict[str, Any] | None, reason: str | None,
                 comparer: Comparer, leaf_confidence: dict[str, float],
                 spans: dict[str, Any] | None = None, document: str | None = None) -> None:
        events = comparer.record(pred, gold)
        features = leaf_features(leaf_confidence, pred, spans, document) \
            if leaf_confidence and pred is not None else {}
        if pred is None:
            events = [e for e in events if e.kind != "null_agree"]
        doc = FieldStats()
        for event in events:
            self.fields.setdefault(event.path, FieldStats()).add(event)
            doc.add(event)
            if event.kind in ("correct", "wrong", "spurious") and event.at in leaf_confidence:
                self.points.append((doc_id, event.path, leaf_confidence[event.at], event.kind == "correct"))
                self.leaf_points.append((doc_id, event.path, features[event.at], event.kind == "correct"))
        self.overall.merge(doc)
        self.not_in_schema.update(comparer.not_in_schema)
        self.pred_not_in_schema.update(comparer.pred_not_in_schema)
        self.documents.append(DocResult(
            doc_id=doc_id, status="row" if pred is not None else "dead_letter",
            reason=None if pred is not None else reason, gold=doc.gold, predicted=doc.predicted,
            correct=doc.correct, exact=pred is not None and doc.correct == doc.gold == doc.predicted,
        ))
