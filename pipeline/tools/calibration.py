"""How well a row's `_confidence` tells right values from wrong ones, scored against gold by `extract eval`.

Each predicted leaf with a confidence is one point: its confidence, and whether the value equals gold. A leaf the
gold record lacks (spurious) counts as wrong. From these points:
- AUROC: the chance that a correct leaf is more confident than a wrong one (0.5 is a coin, 1.0 separates them);
- precision when keeping the most confident 50%, 70% and 90% of leaves (and the confidence each cut is at);
- a reliability table: per confidence decile, the mean confidence against the share correct.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from workers.calibrator import Calibrator, Leaf, fold

KEEP = (0.5, 0.7, 0.9)


@dataclass(frozen=True)
class Calibration:
    leaves: int
    correct: int
    auroc: float | None
    precision_at: dict[str, dict[str, float | None]]  # "70%" → {"precision", "threshold"}
    reliability: list[dict[str, float | int]]  # per bin: lo, hi, leaves, mean_confidence, accuracy

    def as_dict(self) -> dict[str, object]:
        return {"leaves": self.leaves, "correct": self.correct, "auroc": self.auroc,
                "precision_at": self.precision_at, "reliability": self.reliability}


def auroc(points: Sequence[tuple[float, bool]]) -> float | None:
    """Mann-Whitney AUROC of correct (True) over wrong leaves, ties counted half; None without both kinds."""
    ordered = sorted(points, key=lambda p: p[0])
    positives = sum(1 for _, ok in ordered if ok)
    negatives = len(ordered) - positives
    if not positives or not negatives:
        return None
    rank_sum, i = 0.0, 0
    while i < len(ordered):  # average ranks over ties
        j = i
        while j < len(ordered) and ordered[j][0] == ordered[i][0]:
            j += 1
        mean_rank = (i + 1 + j) / 2
        rank_sum += mean_rank * sum(1 for _, ok in ordered[i:j] if ok)
        i = j
    return round((rank_sum - positives * (positives + 1) / 2) / (positives * negatives), 4)


def precision_at(points: Sequence[tuple[float, bool]], keep: float) -> dict[str, float | None]:
    """Precision of the most confident `keep` share of leaves, and the confidence of the last one kept."""
    if not points:
        return {"precision": None, "threshold": None}
    ordered = sorted(points, key=lambda p: -p[0])
    n = max(1, round(len(ordered) * keep))
    kept = ordered[:n]
    return {"precision": round(sum(ok for _, ok in kept) / n, 4), "threshold": round(kept[-1][0], 6)}


def reliability(points: Sequence[tuple[float, bool]], bins: int = 10) -> list[dict[str, float | int]]:
    table = []
    for b in range(bins):
        lo, hi = b / bins, (b + 1) / bins
        inside = [(c, ok) for c, ok in points if lo <= c < hi or (b == bins - 1 and c == 1.0)]
        if inside:
            table.append({"lo": lo, "hi": hi, "leaves": len(inside),
                          "mean_confidence": round(sum(c for c, _ in inside) / len(inside), 4),
                          "accuracy": round(sum(ok for _, ok in inside) / len(inside), 4)})
    return table


def calibration(points: Sequence[tuple[float, bool]]) -> Calibration:
    return Calibration(leaves=len(points), correct=sum(ok for _, ok in points), auroc=auroc(points),
                       precision_at={f"{round(k * 100)}%": precision_at(points, k) for k in KEEP},
                       reliability=reliability(points))


def markdown(cal: Calibration, title: str = "Confidence") -> list[str]:
    """The eval.md section."""
    if not cal.leaves:
        return [f"## {title}", "", "No scored leaf carries a confidence (output.confidence off, or rows from "
                "before it).", ""]
    auc = "n/a (every leaf right, or every leaf wrong)" if cal.auroc is None else f"{cal.auroc:.3f}"
    lines = [f"## {title}", "",
             f"{cal.leaves} predicted leaves with a confidence, {cal.correct} of them correct. AUROC of confidence, "
             f"correct against wrong: **{auc}**.", "",
             "| keep the most confident | precision | at confidence ≥ |", "|---|---|---|"]
    for share, row in cal.precision_at.items():
        lines.append(f"| {share} | {_f(row['precision'])} | {_f(row['threshold'])} |")
    lines += ["", "| confidence | leaves | mean confidence | share correct |", "|---|---|---|---|"]
    for row in cal.reliability:
        lines.append(f"| {row['lo']:.1f}-{row['hi']:.1f} | {row['leaves']} | {row['mean_confidence']:.3f} | "
                     f"{row['accuracy']:.3f} |")
    return [*lines, ""]


def _f(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"


# --------------------------------------------------------------------------------------------------
# Honest figures for a calibration fitted on the same gold


def cross_fitted_leaves(points: Sequence[tuple[str, str, Leaf, bool]], folds: int = 2) -> list[tuple[float, bool]]:
    """Honest points of the leaf model (format 2, what `--fit-calibration` writes): each document's leaves scored by
    a model fitted on the other folds' documents only. `points` are (document id, field, `Leaf`, correct); a fold
    with nothing to learn from keeps the raw confidence."""
    out = []
    for k in range(folds):
        train = [p for p in points if fold(p[0], folds) != k]
        mine = [(name, leaf, ok) for doc_id, name, leaf, ok in points if fold(doc_id, folds) == k]
        if not train:
            out += [(leaf.confidence, ok) for _, leaf, ok in mine]
            continue
        model = Calibrator.fit_leaves(train).model
        out += [(model.predict(name, leaf), ok) for name, leaf, ok in mine]  # type: ignore[union-attr]
    return out


def committed_spans(loaded: Any, partitions: Sequence[Any]) -> dict[str, dict[str, Any]]:
    """The scored rows' `_spans` (document id → leaf path → places), read from the partitions' row files: what the
    leaf model's `order` feature needs in `extract eval`, as the actor has it at run time."""
    from pipeline.output.committed import CommittedOutput
    from pipeline.output.tables import read_columns
    from workers.outcome import ROWS, RowCol

    output = CommittedOutput.of(loaded)
    id_column = loaded.config.input.id_column
    out: dict[str, dict[str, Any]] = {}
    for manifest in partitions:
        table = read_columns(output.storage, manifest.uri(ROWS, output.root), [id_column, RowCol.SPANS])
        if RowCol.SPANS not in table.column_names:
            continue
        for doc_id, spans in zip(table.column(id_column).to_pylist(), table.column(RowCol.SPANS).to_pylist(),
                                 strict=True):
            if spans:
                out[str(doc_id)] = dict(spans)
    return out


def committed_documents(loaded: Any, partitions: Sequence[Any], ids: set[str]) -> dict[str, str]:
    """The texts of the scored rows' documents (id → text), read from the partitions' input files: what the leaf
    model's `label` features need in `extract eval`, as the actor has them at run time. An input that moved or
    cannot be read gives no texts (the leaves then read as unlabelled)."""
    import pyarrow as pa

    from pipeline.storage import StorageError
    from pipeline.tools.least_sure import read_texts

    files = [str(f) for manifest in partitions for f in (manifest.input_files or ())]
    if not files or not ids:
        return {}
    try:
        return read_texts(files, loaded.input_uri, loaded.config.input.id_column, loaded.config.input.text_column,
                          ids, loaded.s3_settings)
    except (OSError, StorageError, pa.ArrowException, ValueError):
        return {}
