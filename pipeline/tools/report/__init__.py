"""`extract report`: what one run did, for the person who runs the job every night.

A run record (`_runs/<run_id>.json`) says how many documents went where; the committed Parquet files
say which ones, why, when and at what token cost. The report joins the two:
  - counts by outcome (rows, and each dead-letter reason);
  - the commonest error messages per reason, grouped after normalising away the values that differ
    from document to document (numbers, dates, hex ids), with example document ids to look up;
  - throughput over time (documents per time bin, from `_extracted_at` and `failed_at`);
  - engine start-up and schema compile times, per actor;
  - prompt and output token histograms, with the `max_tokens` line, so truncation pressure shows.

It prints a terminal summary (rich) and writes DIR/report.html (self-contained: charts are inline
PNG data URIs, CSS is inline, nothing is fetched) and the charts as PNG files beside it.

One concern per module: `runs` (which run, and its committed records), `errors` (grouped messages, failing
fields, dead-letter samples), `timebins`, `measures` (token budget, start-up times), `profiles` (per-field
values, sample rows), `context` (config, prompt, eval scores), `build` (the report's numbers), `charts`,
`render` (HTML from the Jinja templates in `pipeline/tools/templates`), `terminal`, `history` (the index's
lines) and `pages` (the files written). This package re-exports their public names.
"""

from __future__ import annotations

from pipeline.tools.report.build import Report, build_report, near_limit
from pipeline.tools.report.charts import (
    CHART_FILES,
    chart_outcomes,
    chart_startup,
    chart_throughput,
    chart_tokens,
    chart_trend,
    write_charts,
)
from pipeline.tools.report.context import RunContext, eval_scores, run_context
from pipeline.tools.report.errors import (
    DeadSample,
    ErrorGroup,
    FieldError,
    dead_samples,
    error_messages,
    field_errors,
    format_loc,
    group_errors,
    normalise_message,
)
from pipeline.tools.report.formats import RAW_LIMIT, truncate
from pipeline.tools.report.history import RunLine, run_line
from pipeline.tools.report.measures import (
    Startup,
    TokenBudget,
    interpolated_percentile,
    startup_times,
    token_budget,
    token_stats,
)
from pipeline.tools.report.outcomes import COLORS, OTHER_COLOR, REASON_ORDER, ROW, RecordOutcome, counts_by_outcome
from pipeline.tools.report.pages import default_out, write_index, write_report
from pipeline.tools.report.profiles import LINEAGE, FieldProfile, field_profiles, sample_rows, value_summary
from pipeline.tools.report.render import query_hint, render_html
from pipeline.tools.report.runs import (
    PLAIN_RUN_ID,
    ReportError,
    RunData,
    all_rows,
    committed_by_partition,
    list_runs,
    load_run,
    pick_run,
    plain_run_id,
)
from pipeline.tools.report.terminal import print_summary
from pipeline.tools.report.timebins import NICE_BIN_SECONDS, TimeBins, bin_times, bin_width, time_unit

__all__ = [
    "CHART_FILES", "COLORS", "LINEAGE", "NICE_BIN_SECONDS", "OTHER_COLOR", "PLAIN_RUN_ID", "RAW_LIMIT",
    "REASON_ORDER", "ROW", "DeadSample", "ErrorGroup", "FieldError", "FieldProfile", "RecordOutcome", "Report",
    "ReportError", "RunContext", "RunData", "RunLine", "Startup", "TimeBins", "TokenBudget", "all_rows",
    "bin_times", "bin_width", "build_report", "chart_outcomes", "chart_startup", "chart_throughput",
    "chart_tokens", "chart_trend", "committed_by_partition", "counts_by_outcome", "dead_samples",
    "default_out", "error_messages", "eval_scores", "field_errors", "field_profiles", "format_loc",
    "group_errors", "interpolated_percentile", "list_runs", "load_run", "near_limit", "normalise_message",
    "pick_run", "plain_run_id", "print_summary", "query_hint", "render_html", "run_context", "run_line",
    "sample_rows", "startup_times", "time_unit", "token_budget", "token_stats", "truncate", "value_summary",
    "write_charts", "write_index", "write_report",
]
