"""The run's numbers: its token budget, start-up times per actor, percentiles and times (pure)."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from pipeline.tools.report.outcomes import RecordOutcome


@dataclass
class TokenBudget:
    max_tokens: int | None
    source: str
    max_model_len: int | None = None


def token_budget(record: dict[str, Any], outcomes: Sequence[RecordOutcome]) -> TokenBudget:
    """The run's `max_tokens`: from the run record when it has it; else from an `input_too_long` dead
    letter (its error names the budget); else the length of a truncated output (truncation means the
    output reached the limit); else only the largest output seen, which is a lower bound."""
    max_model_len = record.get("max_model_len")
    budget: TokenBudget | None = None
    if record.get("max_tokens"):
        budget = TokenBudget(int(record["max_tokens"]), "run record")
    for o in outcomes:
        if o.outcome == "input_too_long" and o.error:
            try:
                error = json.loads(o.error)
            except json.JSONDecodeError:
                continue
            max_model_len = max_model_len or error.get("max_model_len")
            if budget is None and error.get("max_tokens"):
                budget = TokenBudget(int(error["max_tokens"]), "input_too_long dead letters")
    if budget is None:
        truncated = [o.output_tokens for o in outcomes if o.outcome == "truncated" and o.output_tokens]
        observed = [o.output_tokens for o in outcomes if o.output_tokens]
        if truncated:
            budget = TokenBudget(max(truncated), "length of truncated outputs")
        elif observed:
            budget = TokenBudget(max(observed), "largest output seen (limit unknown)")
        else:
            budget = TokenBudget(None, "unknown")
    budget.max_model_len = int(max_model_len) if max_model_len else None
    return budget




def parse_time(text: Any) -> datetime | None:
    if not text:
        return None
    try:
        value = datetime.fromisoformat(str(text))
    except ValueError:
        return None
    return value if value.tzinfo else value.replace(tzinfo=timezone.utc)


def as_utc(value: datetime) -> datetime:
    return value if value.tzinfo else value.replace(tzinfo=timezone.utc)


def interpolated_percentile(values: Sequence[int], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    position = (len(ordered) - 1) * q
    low, high = math.floor(position), math.ceil(position)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


@dataclass
class Startup:
    actor: str
    engine_init_s: float | None
    schema_compile_s: float
    schemas: int
    ready_s: float | None = None  # when the actor was warm, seconds after the run started (if recorded)
    backend: str | None = None

    @property
    def began_s(self) -> float | None:
        """When the actor started its engine: its ready time less its init and compile times."""
        if self.ready_s is None:
            return None
        return max(0.0, self.ready_s - (self.engine_init_s or 0) - self.schema_compile_s)


def startup_times(record: dict[str, Any], started: datetime | None = None) -> list[Startup]:
    out = []
    for actor in record.get("actors", []):
        compiles = actor.get("schema_compile_s") or {}
        if isinstance(compiles, dict):
            total, schemas = float(sum(v for v in compiles.values() if v)), len(compiles)
        else:
            total, schemas = float(compiles or 0), 1
        ready = actor.get("ready_unix")
        ready_s = float(ready) - started.timestamp() if ready and started else None
        out.append(Startup(str(actor.get("actor", "?")), actor.get("engine_init_s"), total, schemas, ready_s,
                           actor.get("backend")))
    return out


def token_stats(values: Sequence[int]) -> str:
    if not values:
        return "—"
    p50, p95 = interpolated_percentile(values, 0.5), interpolated_percentile(values, 0.95)
    return f"p50 {p50:.0f} · p95 {p95:.0f} · max {max(values)}"
