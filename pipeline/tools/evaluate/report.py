"""DIR/eval.json and DIR/eval.md: the scores with the options and rules they were made under."""

from __future__ import annotations

import json
from typing import Any

from pipeline.storage import Storage, join
from pipeline.tools.calibration import Calibration
from pipeline.tools.calibration import markdown as calibration_markdown
from pipeline.tools.evaluate.mistakes import markdown as mistakes_markdown
from pipeline.tools.evaluate.options import EvalOptions
from pipeline.tools.evaluate.reach import Reach
from pipeline.tools.evaluate.scores import Scores

RULES = (
    "Strings: equal after Unicode NFKC, casefold, whitespace runs collapsed to one space, ends stripped. "
    "Numbers: equal within rel {rel:g} or abs {abs:g}; booleans are not numbers. Dates/datetimes: compared as "
    "ISO 8601 (datetimes in UTC). Absent and null both mean no value. Lists: by position unless the schema "
    "says uniqueItems or the path is unordered ({unordered}); sets are matched greedily. Precision: correct / "
    "predicted non-null leaves. Recall: correct / gold non-null leaves (a document without a row counts its "
    "gold leaves as missed). Exact match: every leaf equal. Coverage: gold documents with a row / gold "
    "documents in the run."
)


def build_report(scores: Scores, context: dict[str, Any], options: EvalOptions,
                 reach: Reach | None = None) -> dict[str, Any]:
    """The report; with `reach`, the share of gold leaves the documents' grammars allow (per field and overall)."""
    unordered = "all lists" if options.all_lists_unordered else (", ".join(sorted(options.unordered)) or "none")
    return {
        **context,
        "options": {"rel_tol": options.tolerance.rel, "abs_tol": options.tolerance.abs,
                    "unordered": sorted(options.unordered), "all_lists_unordered": options.all_lists_unordered},
        "rules": RULES.format(rel=options.tolerance.rel, abs=options.tolerance.abs, unordered=unordered),
        **scores.summary(),
        "reach": reach.summary() if reach is not None else None,
    }


def _fmt(value: Any) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.3f}"
    return str(value)


def render_markdown(report: dict[str, Any]) -> str:
    docs, o = report["documents"], report["overall"]
    lines = [
        f"# extract eval: {report.get('name', '')} run {', '.join(report.get('run_ids', []))}",
        "",
        f"- config: `{report.get('config')}`; gold: `{report.get('gold')}`",
        f"- model: `{report.get('model')}`, constrained: {report.get('constrained')}, "
        f"max_tokens: {report.get('max_tokens')}",
        f"- gold documents: {docs['gold']}; scored (in the run): {docs['scored']}; with a row: {docs['with_row']}; "
        f"dead letters: {docs['dead_letters']}; gold documents not in the run: {docs['gold_not_in_run']}; "
        f"rows without gold: {docs['rows_without_gold']}",
    ]
    if report.get("config_matches_run") is False:
        lines.append("- **note:** the run was made under another model, prompt or schema than this config")
    lines += [
        "",
        "| metric | value |",
        "|---|---|",
        *(f"| {label} | {_fmt(o[key])} |" for label, key in (
            ("precision", "precision"), ("recall", "recall"), ("F1", "f1"), ("exact match", "exact_match_rate"),
            ("exact match (rows only)", "exact_match_rate_on_rows"), ("coverage", "coverage"),
            ("dead-letter rate", "dead_letter_rate"))),
        *_reach_metric(report),
        "",
        "| dead-letter reason | documents | rate |",
        "|---|---|---|",
        *(f"| {reason} | {v['count']} | {_fmt(v['rate'])} |" for reason, v in report["dead_letters_by_reason"].items()),
    ]
    if not report["dead_letters_by_reason"]:
        lines.append("| (none) | 0 | 0 |")
    run_reasons = report.get("run_dead_letters_by_reason") or {}
    if run_reasons:
        lines += ["", "All of the run's dead letters (gold or not): " + ", ".join(
            f"{reason} {count}" for reason, count in run_reasons.items())]
    lines += _field_lines(report)
    if "mistakes" in report:  # eval.json of before the list had no such key
        lines += mistakes_markdown(report["mistakes"])
    lines += ["", f"Rules: {report['rules']}", ""]
    return "\n".join(lines)


def _reach_metric(report: dict[str, Any]) -> list[str]:
    reach = report.get("reach")
    if not reach:
        return []
    o = reach["overall"]
    return [f"| reach (gold values the grammar allows) | {_fmt(o['reach'])} ({o['reached']} of {o['gold']}) |"]


def _reach_of(report: dict[str, Any], path: str | None) -> str:
    reach = report.get("reach")
    if not reach:
        return ""
    found = reach["overall"] if path is None else reach["fields"].get(path)
    return f" {_fmt(found['reach']) if found else '–'} |"


def _reach_lines(report: dict[str, Any]) -> list[str]:
    """What the grammar refused, in a sentence, and the first refusals (all of them are in eval.json)."""
    reach = report.get("reach")
    if not reach or not reach["refused"]:
        return []
    refused = reach["overall"]["gold"] - reach["overall"]["reached"]
    lines = ["", f"Reach: {refused} gold value(s) are not among the values grounding lets the model write for "
             "their document (the row cannot be right there, whatever the model does): mark such a field "
             "`x-grounded: false`, or see `extract validate --gold`. The first of them:"]
    lines += [f"- {r['doc_id']} {r['at']} {r['gold']!r}: the finder reads "
              f"{', '.join(map(repr, r['finder_reads'])) or 'nothing (only null)'}" for r in reach["refused"][:10]]
    return lines


def _field_lines(report: dict[str, Any]) -> list[str]:
    """The per-field table, the fields outside the schema, and the confidence's calibration."""
    o = report["overall"]
    with_reach = bool(report.get("reach"))
    lines: list[str] = []
    lines += [
        "",
        "| field | gold | predicted | correct | wrong | missed | spurious | null=null | precision | recall |"
        + (" reach |" if with_reach else ""),
        "|---|---|---|---|---|---|---|---|---|---|" + ("---|" if with_reach else ""),
    ]
    leaves = o["leaves"]
    for path, s in [*report["fields"].items(), ("**all leaves**", leaves)]:
        lines.append(f"| {path or '(record)'} | {s['gold']} | {s['predicted']} | {s['correct']} | {s['wrong']} | "
                     f"{s['missed']} | {s['spurious']} | {s['null_agree']} | {_fmt(s['precision'])} | "
                     f"{_fmt(s['recall'])} |" + _reach_of(report, None if s is leaves else path))
    lines += _reach_lines(report)
    if report["not_in_schema"]:
        lines += ["", "Gold fields not in the schema (not scored): " + ", ".join(
            f"`{p}` ({n})" for p, n in report["not_in_schema"].items())]
    if report.get("predicted_not_in_schema"):
        lines += ["", "Predicted fields not in the schema (not scored): " + ", ".join(
            f"`{p}` ({n})" for p, n in report["predicted_not_in_schema"].items())]
    if report.get("confidence") is not None:
        lines += ["", *calibration_markdown(Calibration(**report["confidence"]))]
    if report.get("confidence_calibrated") is not None:
        lines += calibration_markdown(Calibration(**report["confidence_calibrated"]),
                                      "Confidence calibrated (the leaf model of --fit-calibration, 2-fold cross-fitted "
                                      "on this gold)")
    return lines


def write_report(report: dict[str, Any], out_dir: str, storage: Storage) -> tuple[str, str]:
    json_path, md_path = join(out_dir, "eval.json"), join(out_dir, "eval.md")
    storage.write_text(json_path, json.dumps(report, indent=2, default=str) + "\n")
    storage.write_text(md_path, render_markdown(report))
    return json_path, md_path
