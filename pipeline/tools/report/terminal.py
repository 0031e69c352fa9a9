"""The report's terminal summary (rich)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pipeline.costs import rates
from pipeline.tools.report.build import Report, near_limit
from pipeline.tools.report.charts import CHART_FILES
from pipeline.tools.report.measures import token_stats
from pipeline.tools.report.outcomes import ROW, outcome_label
from workers.windows import windows_text


def print_summary(report: Report, out_dir: Path, console: Any = None) -> None:
    from rich.console import Console
    from rich.table import Table

    console = console or Console()
    record, total = report.data.record, len(report.data.outcomes) or 1
    console.print(f"[bold]run {report.data.run_id}[/bold]: {record.get('status')}  "
                  f"({record.get('name')}, model {record.get('model')}, schema "
                  f"{record.get('schema', {}).get('name')}@{record.get('schema', {}).get('version')})")
    console.print(f"  started {record.get('started_at')}  finished {record.get('finished_at')}")
    for note in report.data.notes:
        console.print(f"  [yellow]note[/yellow]: {note}")

    outcomes = Table(title="Outcomes", title_justify="left")
    outcomes.add_column("outcome")
    outcomes.add_column("documents", justify="right")
    outcomes.add_column("share", justify="right")
    for outcome, n in report.counts:
        style = "green" if outcome == ROW else None
        outcomes.add_row(outcome_label(outcome), str(n), f"{100 * n / total:.1f}%", style=style)
    console.print(outcomes)

    if report.errors:
        errors = Table(title="Top error messages per reason", title_justify="left", show_lines=False)
        errors.add_column("reason")
        errors.add_column("message (values normalised)", overflow="fold")
        errors.add_column("docs", justify="right")
        errors.add_column("examples", overflow="fold")
        for reason, groups in report.errors.items():
            for i, g in enumerate(groups):
                errors.add_row(reason if i == 0 else "", g.pattern, str(g.documents), ", ".join(g.examples))
        console.print(errors)

    t = record.get("timings", {})
    timing = ", ".join(f"{label} {float(t[key]):.1f}s" for label, key in
                       (("engine init", "engine_init_s"), ("schema compile", "schema_compile_s"),
                        ("first output", "first_output_s"), ("generation", "generation_s"), ("total", "total_s"))
                       if t.get(key) is not None)
    console.print(f"  time     {timing or '—'}" + rate_text(t, len(report.data.outcomes)))
    console.print(f"  actors   {len(report.startups)}" + "".join(
        f"\n    {s.actor}: init {s.engine_init_s or 0:.1f}s, compile {s.schema_compile_s:.1f}s "
        f"({s.schemas} schema{'s' if s.schemas != 1 else ''})"
        + (f", ready at {s.ready_s:.1f}s" if s.ready_s is not None else "") for s in report.startups))
    _print_tokens_and_windows(report, console)
    console.print(f"  report   {out_dir / 'report.html'}  (+ {', '.join(CHART_FILES)})")


def _print_tokens_and_windows(report: Report, console: Any) -> None:
    """The tokens per document, how many outputs neared max_tokens, and the windows per document."""
    prompts = [x for v in report.tokens["prompt"].values() for x in v]
    outputs = [x for v in report.tokens["output"].values() for x in v]
    hot, measured = near_limit(report)
    console.print(f"  tokens   prompt {token_stats(prompts)};  output {token_stats(outputs)}")
    console.print(f"           max_tokens {report.budget.max_tokens} ({report.budget.source}); "
                  f"{hot} of {measured} outputs used ≥90% of it")
    windows = windows_text(report.data.record.get("windows"))  # windows per document (workers.windows), if counted
    if windows:
        console.print(f"  windows  {windows}")


def rate_text(timings: dict, documents: int) -> str:
    """The run's rates, each named by what it is over (`pipeline.costs.rates`)."""
    shown = [f"{v:.2f} {label}" for label, v in rates(timings, documents).items() if v is not None]
    return f"\n  rate     {'; '.join(shown)}" if shown else ""
