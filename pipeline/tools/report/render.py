"""The report's HTML: its Jinja templates (every table in them) filled from a built report."""

from __future__ import annotations

import base64
import os
import shlex
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from pipeline.costs import rates
from pipeline.field_warnings import field_warnings
from pipeline.tools.report.build import Report, near_limit
from pipeline.tools.report.extras import (
    few_shot,
    generation_seconds,
    sample_chips,
    shown_charts,
    usage_cards,
    windows_cards,
)
from pipeline.tools.report.formats import fmt_s, fmt_score
from pipeline.tools.report.outcomes import COLORS, OTHER_COLOR, ROW
from pipeline.tools.report.runs import all_rows
from workers.secrets import redact_text

TEMPLATES = Path(__file__).parents[1] / "templates"
RUN_TIMINGS = (("engine init", "engine_init_s"), ("schema compile", "schema_compile_s"),
               ("first output reached the driver", "first_output_s"),
               ("generation (sum over batches)", "generation_s"), ("total", "total_s"))


def environment() -> Any:
    import jinja2

    return jinja2.Environment(loader=jinja2.FileSystemLoader(str(TEMPLATES)), autoescape=True,
                              undefined=jinja2.ChainableUndefined, trim_blocks=True, lstrip_blocks=True)


def data_uri(path: Path) -> str:
    return "data:image/png;base64," + base64.b64encode(path.read_bytes()).decode("ascii")


def _cards(report: Report) -> list[dict[str, str]]:
    record, total = report.data.record, len(report.data.outcomes)
    rows = dict(report.counts).get(ROW, 0)
    t = record.get("timings", {})
    truncated = dict(report.counts).get("truncated", 0)
    init = max((s.engine_init_s or 0 for s in report.startups), default=None)
    compile_ = max((s.schema_compile_s for s in report.startups), default=None)
    f1 = (report.scores or {}).get("overall", {}).get("f1")
    cards = [
        (str(total), "documents", ""),
        (f"{rows} ({100 * rows / (total or 1):.0f}%)", "rows", "good"),
        (f"{total - rows} ({100 * (total - rows) / (total or 1):.0f}%)", "dead letters", "bad" if total - rows else ""),
        (str(truncated), "truncated", "warn" if truncated else ""),
        *((f"{v:.2f}" if v is not None else "—", label, "") for label, v in rates(t, total).items()),
        (fmt_s(init), "engine init (slowest actor)", ""),
        (fmt_s(compile_), "schema compile", ""),
        (fmt_s(t.get("total_s")), "run time", ""),
    ]
    if report.scores is not None:
        cards.append((fmt_score(f1), "F1 (extract eval)", ""))
    cards += usage_cards(record.get("usage"))
    cards += windows_cards(record.get("windows"))
    return [{"value": v, "label": label, "kind": kind} for v, label, kind in cards]


def query_hint(report: Report) -> str:
    """A command that runs wherever it is pasted: `extract query` on the output itself (an absolute path or URI),
    never on the config file a run record names (a record can be tampered with, and a config loads code)."""
    reason = next(iter(report.dead_samples), "truncated")
    sql = f"SELECT * FROM dead_letters WHERE reason = '{reason}' LIMIT 20"  # any id column, any output format
    output = report.data.output_uri if "://" in report.data.output_uri else os.path.abspath(report.data.output_uri)
    return redact_text(shlex.join(["extract", "query", output, sql]))


def render_html(report: Report, charts: dict[str, Path], index_href: str | None = None,
                doc_links: dict[str, str] | None = None) -> str:
    data = report.data
    hot, measured = near_limit(report)
    record = {**data.record, "schema": data.record.get("schema") or {}}
    return environment().get_template("run.html.j2").render(
        run_id=data.run_id, record=record, output_uri=data.output_uri, cards=_cards(report), notes=data.notes,
        charts={name: data_uri(path) for name, path in shown_charts(charts, data.record).items()},
        field_errors=report.field_errors, chips=sample_chips(all_rows(data)), examples=few_shot(data.record),
        generation_s=fmt_s(generation_seconds(data.record)), usage=data.record.get("usage"),
        field_warnings=field_warnings(all_rows(data)),
        dead_total=max(1, sum(n for k, n in report.counts if k != ROW)), errors=report.errors, colors=COLORS,
        other_color=OTHER_COLOR, dead_samples=report.dead_samples, query_hint=query_hint(report),
        sample_columns=report.sample[0], sample_rows=report.sample[1], profiles=report.profiles,
        scores=report.scores, fmt=fmt_score, fmt_s=fmt_s, budget=report.budget, hot=hot, measured=measured,
        timings=_run_timings(report), startups=report.startups, partitions=data.record.get("partitions", []),
        context=report.context, index_href=index_href, unsure=report.unsure, doc_href=doc_links or {},
        mistakes=(report.scores or {}).get("mistakes") or {},
        generated=f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M:%S}",
    )


def _run_timings(report: Report) -> list[tuple[str, str]]:
    """The run timing table's lines: (what, seconds as shown)."""
    t = report.data.record.get("timings", {})
    lines = [(label, fmt_s(t.get(key))) for label, key in RUN_TIMINGS]
    if report.first_stamp_s is not None:
        lines.append(("first outcome stamped by an actor", fmt_s(report.first_stamp_s)))
    return lines
