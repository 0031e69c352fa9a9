"""A run's report: every section's numbers, built from the loaded run (`build_report`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

import pyarrow as pa

from pipeline.storage import StorageError
from pipeline.tools.least_sure import Unsure, least_sure, read_texts, with_text
from pipeline.tools.report.context import RunContext, run_context
from pipeline.tools.report.errors import DeadSample, ErrorGroup, FieldError, dead_samples, field_errors, group_errors
from pipeline.tools.report.measures import Startup, TokenBudget, as_utc, parse_time, startup_times, token_budget
from pipeline.tools.report.outcomes import ROW, counts_by_outcome, reason_rank
from pipeline.tools.report.profiles import FieldProfile, field_profiles, sample_rows
from pipeline.tools.report.runs import RunData, all_rows
from pipeline.tools.report.timebins import TimeBins, bin_times


@dataclass
class Report:
    data: RunData
    counts: list[tuple[str, int]]
    errors: dict[str, list[ErrorGroup]]
    bins: TimeBins
    started: datetime
    budget: TokenBudget
    startups: list[Startup]
    tokens: dict[str, dict[str, list[int]]]  # "prompt"/"output" → outcome → values
    first_stamp_s: float | None  # the earliest outcome's stamp, seconds after the run started
    field_errors: list[FieldError] = field(default_factory=list)
    dead_samples: dict[str, list[DeadSample]] = field(default_factory=dict)
    profiles: list[FieldProfile] = field(default_factory=list)
    sample: tuple[list[str], list[list[str]]] = ([], [])
    context: RunContext | None = None
    scores: dict[str, Any] | None = None
    unsure: list[Unsure] = field(default_factory=list)  # the least confident values, beside their documents


def build_report(data: RunData, top: int = 5, scores: dict[str, Any] | None = None) -> Report:
    record = data.record
    rows = all_rows(data)
    context = run_context(record)
    started = parse_time(record.get("started_at"))
    stamps = [as_utc(o.at) for o in data.outcomes if o.at is not None]
    if started is None:
        started = min(stamps) if stamps else datetime.now(timezone.utc)
    offsets: dict[str, list[float]] = {ROW: [], "dead letters": []}
    for o in data.outcomes:
        if o.at is not None:
            offsets[ROW if o.outcome == ROW else "dead letters"].append((as_utc(o.at) - started).total_seconds())
    tokens: dict[str, dict[str, list[int]]] = {"prompt": {}, "output": {}}
    for o in data.outcomes:
        for kind, value in (("prompt", o.prompt_tokens), ("output", o.output_tokens)):
            if value is not None:
                tokens[kind].setdefault(o.outcome, []).append(int(value))
    for kind in tokens:
        tokens[kind] = dict(sorted(tokens[kind].items(), key=lambda kv: (kv[0] != ROW, reason_rank(kv[0]))))
    dead = [(o.doc_id, o.outcome, o.error) for o in data.outcomes if o.outcome != ROW]
    return Report(
        data=data, counts=counts_by_outcome(data.outcomes), errors=group_errors(dead, top=top),
        bins=bin_times(offsets), started=started, budget=token_budget(record, data.outcomes),
        startups=startup_times(record, started), tokens=tokens,
        first_stamp_s=min((t for values in offsets.values() for t in values), default=None),
        field_errors=field_errors(dead), dead_samples=dead_samples(data.outcomes),
        profiles=field_profiles(rows), sample=sample_rows(rows), context=context, scores=scores,
        unsure=_unsure(data, rows, context.text_column),
    )


def _unsure(data: RunData, rows: pa.Table | None, text_column: str) -> list[Unsure]:
    """The run's least confident values with their documents' text (read from the input, when it is reachable)."""
    items = least_sure(rows)
    if not items or not data.input_files or rows is None:
        return items
    try:
        texts = read_texts(data.input_files, str(data.record.get("input_uri", "")), rows.column_names[0],
                           text_column, {i.doc_id for i in items})
    except (OSError, StorageError, pa.ArrowException, ValueError):
        return items  # the input moved: the values without their text
    return with_text(items, texts)


def near_limit(report: Report, share: float = 0.9) -> tuple[int, int]:
    """(documents whose output used at least `share` of max_tokens, documents with an output count)."""
    outputs = [x for values in report.tokens["output"].values() for x in values]
    if not report.budget.max_tokens:
        return 0, len(outputs)
    return sum(1 for x in outputs if x >= share * report.budget.max_tokens), len(outputs)
