"""`extract bench`'s report: the markdown table of its arms and ratios (bench.md) and its chart (bench.png)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pipeline.tools.bench_long import render_markdown as long_markdown
from pipeline.tools.bench_requests import ARM as SAME_REQUESTS
from pipeline.tools.bench_requests import describe
from pipeline.tools.machine import describe as describe_machine
from workers.stages import stage_lines

COLUMNS = [("docs/s", "docs_per_s"), ("tokens/s", "output_tokens_per_s"), ("ms/token", "ms_per_output_token"),
           ("decode ms/token", "decode_ms_per_token"), ("valid", "valid_rate"), ("field acc.", "field_accuracy"),
           ("correct leaves", "correct_leaves"), ("correct leaves/s", "correct_leaves_per_s"),
           ("retries", "retries"), ("engine init s", "engine_init_s"), ("compile s", "schema_compile_s"),
           ("first output s", "time_to_first_output_s"),
           ("first commit s", "time_to_first_commit_s"), ("first output after ready s", "first_output_after_ready_s"),
           ("first progress after ready s", "first_progress_after_ready_s"),
           ("first document after ready s", "first_document_after_ready_s"),
           ("driver RSS MB", "driver_peak_rss_mb"), ("engine CPU cores used", "cores_used"),
           ("other processes CPU s", "others_cpu_s"),
           ("worker RSS MB", "worker_peak_rss_mb")]


# Each ratio's goal, as the report's ratios table gives it.
GOALS = {"pipeline_over_engine": ">= 0.95",
         "pipeline_over_engine_same_requests": "(docs/s over the pipeline's own requests in one engine call)",
         "pipeline_over_engine_same_requests_tokens": ">= 0.95 (output tokens/s, the same requests)",
         "constrained_over_unconstrained_per_token": "<= 1.05",
         "pipeline_over_retry": ">= 1.5", "pipeline_over_engine_tokens": ">= 0.95 (output tokens/s)",
         "engine_speculation_speedup": "(no goal: engine docs/s with the job's speculation over without)",
         "confidence_over_plain": ">= 0.9 (docs/s with _confidence over without)",
         "confidence_over_plain_tokens": "(output tokens/s with _confidence over without)",
         "pipeline_over_naive": ">= 1.3 (docs/s over vLLM's defaults, the user's prompt, the plain grammar)",
         "pipeline_over_naive_correct_leaves": ">= 10 (correct leaves/s, the same two arms)",
         "long_over_short_tokens": ">= 0.9 (output tokens/s on windowed documents over short ones: --long)"}


def render_markdown(report: dict[str, Any]) -> str:
    lines = [f"# extract bench: {report['docs']} documents, model {report['model']}", "",
             "| arm | " + " | ".join(c for c, _ in COLUMNS) + " |", "|---" * (len(COLUMNS) + 1) + "|"]
    for name, arm in report["arms"].items():
        cells = ["" if arm.get(key) is None else str(arm.get(key)) for _, key in COLUMNS]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    if report.get("scaling_2_over_1_actors"):
        sc = report["scaling_2_over_1_actors"]
        lines += ["", f"2 actors vs 1 on {sc['cpus']} CPUs: speed-up {sc['speedup']}, efficiency {sc['efficiency']}."]
    if report.get("driver_memory"):
        mem = report["driver_memory"]
        lines += ["", f"Driver peak RSS at {mem['scale']}x the documents: {mem['driver_rss_mb_scaled']} MB vs "
                  f"{mem['driver_rss_mb']} MB, ratio {mem['ratio']} (goal <= 1.2)."]
    lines += ["", "| ratio | value | goal |", "|---|---|---|"]
    for key, value in report["ratios"].items():
        lines.append(f"| {key} | {value} | {GOALS[key]} |")
    price = report["constraint_price"]
    lines += ["", f"Constraint price (decode only, without speculation, median of {price['rounds']} alternating "
              f"round(s) each): {price['constrained_decode_ms_per_token']} ms/token under the grammar vs "
              f"{price['equal_length_unconstrained_decode_ms_per_token']} ms/token for free text forced to the same "
              f"per-document lengths. Generation seconds per round: {price['constrained_s']} under the grammar, "
              f"{price['equal_length_unconstrained_s']} free."]
    for name, arm in report["arms"].items():
        if name.startswith("pipeline") and arm.get("time_to_first_commit_s") is not None:
            init = arm.get("engine_init_s") or 0.0
            lines += ["", f"{name}: first committed row {arm['time_to_first_commit_s']} s after the run started "
                      f"(goal: engine init + 5 s = {round(init + 5, 1)} s); first outcome at the driver "
                      f"{arm.get('first_output_after_ready_s')} s after the engine was warm; first live counts on "
                      f"screen (tokens/s) {arm.get('first_progress_after_ready_s')} s after it (goal: within 5 s), "
                      f"the first finished documents {arm.get('first_document_after_ready_s')} s after it."]
    lines += _stages(report["arms"])
    lines += describe(report["arms"].get(SAME_REQUESTS))
    wall = report["arms"]["pipeline"].get("wall_docs_per_s")
    lines += ["", "Pipeline docs/s is measured from the last actor being ready to the commit (steady state); "
              f"its wall-clock docs/s including Ray and engine start-up is {wall}.",
              "Each arm runs once (the constraint price's two sides excepted, above): on a 2-core machine the "
              "same arm varies by about 5% from run to run, so a ratio within that of its goal is not settled "
              "by one run.", "", describe_machine(report.get("machine")), ""]
    if report.get("long_documents"):
        lines += [long_markdown(report["long_documents"])]
    return "\n".join(lines)


def _stages(arms: dict[str, Any]) -> list[str]:
    """The pipeline arm's CPU per document beside the engine by stage (workers.stages), and the cores a GPU needs at
    the engine arm's documents/s, 20 and 50."""
    stages = arms["pipeline"].get("stage_cpu_ms")
    if not stages:
        return []
    rates = tuple(r for r in (arms.get("engine", {}).get("docs_per_s"), 20.0, 50.0) if r)
    return ["", *stage_lines(stages, rates)]


def render_chart(report: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = [n for n in report["arms"] if n in ("engine", "unconstrained", "retry", "pipeline")]
    fig, axes = plt.subplots(1, 3, figsize=(13, 4))
    for ax, (title, key) in zip(axes, [("documents / s", "docs_per_s"), ("ms per output token",
                                                                           "ms_per_output_token"),
                                        ("valid rows", "valid_rate")], strict=True):
        values = [report["arms"][n].get(key) or 0 for n in names]
        ax.bar(names, values, color=["#4c72b0", "#dd8452", "#c44e52", "#55a868"][: len(names)])
        ax.set_title(title)
        for i, v in enumerate(values):
            ax.text(i, v, f"{v:.3g}", ha="center", va="bottom", fontsize=8)
    fig.suptitle(f"extract bench: {report['docs']} documents")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
