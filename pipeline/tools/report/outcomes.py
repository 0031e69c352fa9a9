"""The outcomes a report counts: a row, or a dead letter's reason; their order, colours and labels."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

ROW = "row"
REASON_ORDER = ("truncated", "semantic_invalid", "schema_violation", "invalid_json", "validator_error",
                "engine_error", "schema_invalid", "schema_unsupported", "input_too_long", "empty_input",
                "type_overflow", "actor_crash", "low_confidence")
COLORS = {ROW: "#2e7d32", "truncated": "#ef6c00", "semantic_invalid": "#c62828", "schema_violation": "#ad1457",
          "invalid_json": "#6a1b9a", "validator_error": "#4527a0", "engine_error": "#37474f",
          "schema_invalid": "#00838f", "schema_unsupported": "#0277bd", "input_too_long": "#f9a825",
          "empty_input": "#90a4ae", "type_overflow": "#5d4037", "actor_crash": "#b71c1c",
          "low_confidence": "#ffb300"}
OTHER_COLOR = "#795548"


@dataclass
class RecordOutcome:
    """One document's outcome, reduced to what the report needs."""

    doc_id: str
    outcome: str  # ROW or a dead-letter reason
    at: datetime | None
    prompt_tokens: int | None
    output_tokens: int | None
    error: str | None = None  # the dead letter's error JSON
    attempts: int | None = None
    raw_output: str | None = None  # a dead letter's model output, as generated


def reason_rank(reason: str) -> tuple[int, str]:
    return (REASON_ORDER.index(reason) if reason in REASON_ORDER else len(REASON_ORDER), reason)


def outcome_label(outcome: str) -> str:
    return "rows" if outcome == ROW else outcome


def counts_by_outcome(outcomes: Sequence[RecordOutcome]) -> list[tuple[str, int]]:
    counts = Counter(o.outcome for o in outcomes)
    ordered = sorted((k for k in counts if k != ROW), key=reason_rank)
    return [(ROW, counts.get(ROW, 0)), *((k, counts[k]) for k in ordered)]
