"""Small parts of the run page: sample rows' `_confidence`/`_spans` as per-field chips, the few-shot examples the
prompt showed, and whether the run generated long enough for a throughput chart."""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from pipeline.tools.report.documents import confidence_class
from workers.outcome import RowCol
from workers.secrets import redact_text

MIN_CHART_GENERATION_S = 10.0  # a shorter generation fills a bin or two: no chart of throughput over time


def sample_chips(rows: pa.Table | None, n: int = 5) -> list[dict[str, list[tuple[str, str, str]]]]:
    """For the first `n` rows (the sample rows, in order): column → chips (field, text, css class)."""
    if rows is None or not rows.num_rows:
        return []
    wanted = [c for c in (RowCol.CONFIDENCE, RowCol.SPANS) if c in rows.column_names]
    out: list[dict[str, list[tuple[str, str, str]]]] = []
    for row in rows.select(wanted).slice(0, n).to_pylist():
        chips: dict[str, list[tuple[str, str, str]]] = {}
        if RowCol.CONFIDENCE in row:
            chips[RowCol.CONFIDENCE] = [(path, f"{c:.2f}", confidence_class(c))
                                        for path, c in dict(row[RowCol.CONFIDENCE] or {}).items()]
        if RowCol.SPANS in row:
            chips[RowCol.SPANS] = [(path, ", ".join(f"{p['start']}–{p['end']}" for p in places[:3])
                                    + (" …" if len(places) > 3 else ""), "")
                                   for path, places in dict(row[RowCol.SPANS] or {}).items()]
        out.append(chips)
    return out


def few_shot(record: dict[str, Any]) -> list[dict[str, str]]:
    """The few-shot examples of the run's job ({document, output} as the prompt showed them), from the redacted job
    snapshot of its run record (`pipeline.job_identity.job_snapshot`): the job's config is never loaded again."""
    job = record.get("job") if isinstance(record.get("job"), dict) else {}
    examples = job.get("examples") if isinstance(job.get("examples"), list) else []
    return [{"document": redact_text(str(e.get("document", ""))), "output": redact_text(str(e.get("output", "")))}
            for e in examples[:20] if isinstance(e, dict)]


def generation_seconds(record: dict[str, Any]) -> float | None:
    value = (record.get("timings") or {}).get("generation_s")
    return float(value) if isinstance(value, int | float) else None


def shown_charts(charts: dict[str, Any], record: dict[str, Any]) -> dict[str, Any]:
    """The charts the page shows: the throughput chart only when the run generated for 10 s or more."""
    generation = generation_seconds(record)
    if generation is not None and generation < MIN_CHART_GENERATION_S:
        return {k: v for k, v in charts.items() if k != "throughput.png"}
    return charts


def usage_cards(usage: dict[str, Any] | None) -> list[tuple[str, str, str]]:
    """The run page's cards for its tokens and cost (`pipeline.costs`, the run record's `usage`)."""
    if not usage:
        return []
    cards = [(f"{usage['prompt_tokens']:,}", "prompt tokens", ""), (f"{usage['output_tokens']:,}", "output tokens", "")]
    if usage.get("generation_tokens_per_s"):
        cards.append((f"{usage['generation_tokens_per_s']:.0f}", "output tokens/s over generation", ""))
    cost = usage.get("cost")
    if cost:
        cards.append((f"{cost['total']:.4f}", "cost of the run", ""))
        if cost.get("per_1000_documents") is not None:
            cards.append((f"{cost['per_1000_documents']:.4f}", "cost per 1,000 documents", ""))
    return cards


def windows_cards(windows: dict[str, Any] | None) -> list[tuple[str, str, str]]:
    """The run page's cards for its windows per document (`workers.windows.windows_figures`, the run record's
    `windows`): median, max, and the share of documents read in more than one window."""
    if not windows:
        return []
    return [(f"{float(windows['median']):g}", "windows per document (median)", ""),
            (str(windows["max"]), "windows per document (max)", ""),
            (f"{100 * float(windows['more_than_one']):.1f}%", "documents in more than one window", "")]
