"""One line per run for the index of every run."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pipeline.tools.report.formats import fmt_score
from pipeline.tools.report.runs import partition_states


@dataclass
class RunLine:
    run_id: str
    started: str
    status: str
    documents: int
    rows: int
    dead: int
    dead_rate: str
    reasons: str
    f1: str
    href: str | None = None
    note: str = ""
    dead_rate_value: float | None = None
    f1_value: float | None = None
    tokens: str = "—"  # prompt + output tokens (pipeline.costs, the record's `usage`)
    cost: str = "—"  # the run's cost and per 1,000 documents, at the job's output.cost


def run_line(record: dict[str, Any], scores: dict[str, Any] | None) -> RunLine:
    documents = int(record.get("input_rows") or 0)
    dead = int(record.get("dead_letters") or 0)
    reasons = sorted((record.get("dead_letters_by_reason") or {}).items(), key=lambda kv: -kv[1])
    f1 = (scores or {}).get("overall", {}).get("f1")
    rate = dead / documents if documents else None
    return RunLine(
        run_id=str(record.get("run_id")), started=str(record.get("started_at", ""))[:19].replace("T", " "),
        status=str(record.get("status")), documents=documents, rows=int(record.get("rows") or 0), dead=dead,
        dead_rate="—" if rate is None else f"{100 * rate:.1f}%",
        reasons=", ".join(f"{r} {n}" for r, n in reasons[:3]) or "—", f1=fmt_score(f1),
        note="" if documents else f"no documents processed ({partition_states(record)})",
        dead_rate_value=rate, f1_value=None if f1 is None else float(f1), **usage_cells(record.get("usage")))


def usage_cells(usage: dict[str, Any] | None) -> dict[str, str]:
    if not usage:
        return {}
    cost = usage.get("cost")
    per = cost.get("per_1000_documents") if cost else None
    return {"tokens": f"{usage['prompt_tokens']:,} + {usage['output_tokens']:,}",
            "cost": "—" if not cost else f"{cost['total']:.4f}"
            + (f" ({per:.4f} / 1k docs)" if per is not None else "")}
