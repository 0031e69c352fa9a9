"""The report's charts (matplotlib, PNG): outcomes, throughput, start-up, token histograms and the runs' trend."""

from __future__ import annotations

import math
from datetime import datetime
from pathlib import Path
from typing import Any

from pipeline.tools.report.build import Report
from pipeline.tools.report.history import RunLine
from pipeline.tools.report.measures import Startup
from pipeline.tools.report.outcomes import COLORS, OTHER_COLOR, ROW, outcome_label
from pipeline.tools.report.timebins import TimeBins, time_unit

CHART_FILES = ("outcomes.png", "throughput.png", "startup.png", "tokens_prompt.png", "tokens_output.png")




def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def chart_outcomes(counts: list[tuple[str, int]], path: Path) -> None:
    plt = _plt()
    fig, ax = plt.subplots(figsize=(10, 0.45 * len(counts) + 1.2))
    labels = [outcome_label(k) for k, _ in counts][::-1]
    values = [v for _, v in counts][::-1]
    bars = ax.barh(labels, values, color=[COLORS.get(k, OTHER_COLOR) for k, _ in counts][::-1])
    total = sum(values) or 1
    for bar, value in zip(bars, values, strict=True):
        ax.text(bar.get_width(), bar.get_y() + bar.get_height() / 2, f" {value} ({100 * value / total:.0f}%)",
                va="center", fontsize=9)
    ax.set_xlim(0, max(values + [1]) * 1.18)
    from matplotlib.ticker import MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("documents")
    ax.set_title("Outcomes: rows and dead letters by reason")
    ax.spines[["top", "right"]].set_visible(False)
    _save(fig, path)


def chart_throughput(bins: TimeBins, started: datetime, first_ready_s: float | None, path: Path) -> None:
    """Documents finished per bin (bars, by outcome) and the running total (line). Actors stamp a whole
    batch at once, so the bars come in bursts; the running total's slope is the throughput."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(10, 3.8))
    span = (bins.starts[-1] + bins.width_s) if bins.starts else 1
    divisor, unit = time_unit(span)
    xs = [s / divisor for s in bins.starts]
    bottom = [0] * len(bins.starts)
    for category, per_bin in bins.counts.items():
        ax.bar(xs, per_bin, width=bins.width_s / divisor, bottom=bottom, align="edge",
               color=COLORS.get(category, OTHER_COLOR), label=f"{outcome_label(category)} per bin", edgecolor="white",
               linewidth=0.5)
        bottom = [b + c for b, c in zip(bottom, per_bin, strict=True)]
    # The axis starts shortly before the first actor was ready: the start-up before it is the start-up chart's
    # subject, and on a short run it would take most of this one.
    left = min(0.0, xs[0]) if xs else 0.0
    note = ""
    if first_ready_s is not None and first_ready_s > 0:
        left = max(left, min(first_ready_s, bins.starts[0] if bins.starts else first_ready_s) - 0.05 * span)
        ax.axvline(first_ready_s / divisor, color="#1565c0", linestyle=":", linewidth=1.2,
                   label=f"first actor ready ({first_ready_s:.1f} s)")
        note = f"; axis starts {left:.0f} s in (start-up before it)" if left > 0 else ""
    ax.set_xlabel(f"{unit} since the run started ({started:%Y-%m-%d %H:%M:%S} UTC); bins of {bins.width_s} s{note}")
    ax.set_ylabel(f"documents per {bins.width_s} s")
    _integer_ticks(ax)
    ax.set_xlim(left=left / divisor, right=span / divisor * 1.02)
    ax.spines[["top"]].set_visible(False)
    handles, labels = ax.get_legend_handles_labels()
    if bins.starts:
        running = ax.twinx()
        total, edges, cumulative = 0, [], []
        for x, count in zip(xs, bottom, strict=True):
            edges += [x, x + bins.width_s / divisor]
            cumulative += [total, total + count]
            total += count
        running.plot(edges, cumulative, color="#212121", linewidth=1.5, label="documents done (running total)")
        running.set_ylabel("documents done")
        running.set_ylim(bottom=0)
        _integer_ticks(running)
        running.spines[["top"]].set_visible(False)
        more_handles, more_labels = running.get_legend_handles_labels()
        handles, labels = handles + more_handles, labels + more_labels
    ax.set_title("Throughput over time")
    ax.legend(handles, labels, loc="upper left", fontsize=8, frameon=False)
    _save(fig, path)


def chart_startup(startups: list[Startup], timings: dict[str, Any], first_stamp_s: float | None,
                  path: Path) -> None:
    """Per actor, engine init then schema compile, placed on the run's clock when the actor recorded
    when it was ready; with the first outcome and the run's end for scale."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(10, 0.5 * max(len(startups), 1) + 2.2))
    names = [s.actor + (f" ({s.backend})" if s.backend else "") for s in startups] or ["(no actor started)"]
    placed = bool(startups) and all(s.began_s is not None for s in startups)
    began = [(s.began_s or 0.0) if placed else 0.0 for s in startups] or [0.0]
    init = [s.engine_init_s or 0 for s in startups] or [0]
    compile_ = [s.schema_compile_s for s in startups] or [0]
    schemas = max((s.schemas for s in startups), default=1)
    if placed:
        ax.barh(names, began, color="#e0e0e0", label="before engine start (Ray start-up, actor placement)")
    ax.barh(names, init, left=began, color="#1565c0", label="engine init")
    ax.barh(names, compile_, left=[b + a for b, a in zip(began, init, strict=True)], color="#64b5f6",
            label="schema compile" + (f" ({schemas} schemas)" if schemas > 1 else ""))
    for y, (b, a, c) in enumerate(zip(began, init, compile_, strict=True)):
        ax.text(b + a + c, y, f" {a:.1f} s + {c:.1f} s", va="center", fontsize=9)
    marks = [(first_stamp_s, "first outcome (actor)", ":"),
             (timings.get("first_output_s"), "first output at driver", "-."),
             (timings.get("total_s"), "run end", "--")]
    marks = [m for m in marks if m[0] is not None and float(m[0]) >= 0]  # a stamp before the start: skewed clocks
    top = len(names) - 0.5
    for i, (value, label, style) in enumerate(marks):
        ax.axvline(float(value), color="#424242", linestyle=style, linewidth=1)
        ax.text(float(value), top + 0.28 * (i + 1), f"{label} {float(value):.1f} s ", fontsize=8, ha="right",
                va="center", color="#424242")
    ax.set_ylim(-0.6, top + 0.28 * (len(marks) + 1))
    ends = [b + a + c for b, a, c in zip(began, init, compile_, strict=True)]
    ax.set_xlim(0, max(ends + [float(m[0]) for m in marks] + [1]) * 1.04)
    ax.set_xlabel("seconds since the run started" if placed else
                  "seconds (bars: durations, from 0; lines: times since the run started)")
    ax.set_title("Start-up per actor: engine initialisation and schema compilation")
    ax.legend(loc="lower right", fontsize=8, frameon=True, framealpha=0.9)
    ax.spines[["top", "right"]].set_visible(False)
    _save(fig, path)


def chart_tokens(by_outcome: dict[str, list[int]], title: str, xlabel: str, lines: list[tuple[float, str]],
                 path: Path, empty_note: str) -> None:
    plt = _plt()
    fig, ax = plt.subplots(figsize=(10, 3.6))
    present = {k: v for k, v in by_outcome.items() if v}
    values = [x for v in present.values() for x in v]
    if values:
        high = max(values + [x for x, _ in lines])
        low = min(values)
        log = low > 0 and high / low > 20
        if log:
            import numpy as np
            from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

            edges = list(np.geomspace(max(low, 1) * 0.95, high * 1.05, 41))
            ax.set_xscale("log")
            ax.xaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
            ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: f"{x:g}"))
            ax.xaxis.set_minor_formatter(NullFormatter())
            xlabel += " (log scale)"
        else:
            # Bins end just past the limit, so outputs cut off at exactly max_tokens share the last bin.
            step = max(1, math.ceil(high / 40))
            top = int(high) + 1
            edges = [top - step * k for k in range(math.ceil(top / step), -1, -1)]
        ax.hist(list(present.values()), bins=edges, stacked=True, label=[outcome_label(k) for k in present],
                color=[COLORS.get(k, OTHER_COLOR) for k in present])
        ax.legend(loc="best", fontsize=8, frameon=True, framealpha=0.9)
        _integer_ticks(ax)
    else:
        ax.text(0.5, 0.5, empty_note, transform=ax.transAxes, ha="center", va="center", color="#616161")
    for x, label in lines:
        ax.axvline(x, color="#b71c1c", linestyle="--", linewidth=1.5)
        ax.text(x, 0.97, f" {label} ", transform=ax.get_xaxis_transform(), color="#b71c1c", fontsize=9,
                va="top", ha="right" if values and x >= max(values) else "left",
                bbox={"facecolor": "white", "alpha": 0.85, "edgecolor": "none", "pad": 1})
    ax.set_xlabel(xlabel)
    ax.set_ylabel("documents")
    ax.set_title(title)
    ax.spines[["top", "right"]].set_visible(False)
    _save(fig, path)


def _integer_ticks(ax: Any) -> None:
    from matplotlib.ticker import MaxNLocator

    ax.yaxis.set_major_locator(MaxNLocator(integer=True))


def _save(fig: Any, path: Path) -> None:
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    _plt().close(fig)


def chart_trend(lines: list[RunLine], path: Path) -> None:
    """Oldest to newest: documents per run (bars), dead-letter rate and F1 (lines, where known)."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(10, 3.6))
    xs = list(range(len(lines)))
    ax.bar(xs, [line.documents for line in lines], color="#cfd8dc", label="documents")
    ax.set_ylabel("documents")
    _integer_ticks(ax)
    rates = ax.twinx()
    known = [(x, line.dead_rate_value) for x, line in zip(xs, lines, strict=True) if line.dead_rate_value is not None]
    if known:
        rates.plot([x for x, _ in known], [100 * v for _, v in known], "o-", color=COLORS["semantic_invalid"],
                   label="dead-letter rate %")
    scored = [(x, line.f1_value) for x, line in zip(xs, lines, strict=True) if line.f1_value is not None]
    if scored:
        rates.plot([x for x, _ in scored], [100 * v for _, v in scored], "s--", color=COLORS[ROW], label="F1 × 100")
    rates.set_ylim(0, 105)
    rates.set_ylabel("percent")
    ax.set_xticks(xs)
    ax.set_xticklabels([line.started[5:16] for line in lines], rotation=30, ha="right", fontsize=8)
    ax.set_xlabel("run start (UTC), oldest to newest")
    handles, labels = ax.get_legend_handles_labels()
    more_handles, more_labels = rates.get_legend_handles_labels()
    ax.legend(handles + more_handles, labels + more_labels, loc="upper left", fontsize=8, frameon=False)
    ax.set_title("Runs over time: documents, dead-letter rate and F1")
    _save(fig, path)


def write_charts(report: Report, out_dir: Path) -> dict[str, Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {name: out_dir / name for name in CHART_FILES}
    chart_outcomes(report.counts, paths["outcomes.png"])
    ready = [s.ready_s for s in report.startups if s.ready_s is not None]
    chart_throughput(report.bins, report.started, min(ready) if ready else None, paths["throughput.png"])
    chart_startup(report.startups, report.data.record.get("timings", {}), report.first_stamp_s,
                  paths["startup.png"])
    budget = report.budget
    prompt_lines = []
    if budget.max_model_len and budget.max_tokens:
        prompt_lines.append((budget.max_model_len - budget.max_tokens,
                             f"prompt budget {budget.max_model_len - budget.max_tokens} "
                             f"(max_model_len − max_tokens)"))
    chart_tokens(report.tokens["prompt"], "Prompt tokens per document", "prompt tokens", prompt_lines,
                 paths["tokens_prompt.png"], "no prompt token counts recorded")
    output_lines = [(budget.max_tokens, f"max_tokens {budget.max_tokens}")] if budget.max_tokens else []
    chart_tokens(report.tokens["output"], "Output tokens per document (truncation pressure: mass near the line)",
                 "output tokens", output_lines, paths["tokens_output.png"], "no output token counts recorded")
    return paths
