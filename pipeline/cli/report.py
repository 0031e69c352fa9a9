"""`extract report OUTPUT [--run RUN_ID] [--out DIR] [--format table|json]`: the run report's command line.

OUTPUT is a job's output folder or s3:// prefix, or the job's extract.yaml (its `output.uri` and
`storage` settings are used, which saves retyping an S3 endpoint). A local folder is relative to the working
directory.

Without --run: OUT/index.html lists every run, newest first (counts, dead-letter rates, F1 where `extract
eval` ran, a trend chart), each linking to OUT/<run_id>/report.html. With --run: that run's page only.
OUT defaults to ./out/report, or OUTPUT-report beside the output when ./out/report would lie inside it.
`--format json` prints the same figures as one JSON object instead of the terminal summary.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Any

from pipeline import exit_codes
from pipeline.cli.options import error_line
from pipeline.storage import S3Settings


def _output_and_settings(target: str) -> tuple[str, S3Settings | None]:
    if target.endswith((".yaml", ".yml")) and Path(target).is_file():
        from pipeline.config import output_of

        return output_of(target)
    return (target if "://" in target else os.path.abspath(os.path.expanduser(target))), None


def run_json(report: Any, out_dir: Path | None) -> dict[str, Any]:
    """One run's figures, as the terminal summary shows them."""
    record, total = report.data.record, len(report.data.outcomes)
    counts = dict(report.counts)
    dead = sum(n for outcome, n in counts.items() if outcome != "row")
    return {
        "run_id": report.data.run_id, "status": record.get("status"), "name": record.get("name"),
        "model": record.get("model"), "started_at": record.get("started_at"),
        "finished_at": record.get("finished_at"), "output_uri": report.data.output_uri,
        "documents": total, "counts": counts, "dead_letter_rate": round(dead / total, 4) if total else None,
        "top_errors": {reason: [{"message": g.pattern, "documents": g.documents, "examples": list(g.examples)}
                                for g in groups] for reason, groups in report.errors.items()},
        "timings": record.get("timings", {}), "max_tokens": report.budget.max_tokens,
        "scores": report.scores, "notes": list(report.data.notes),
        "page": str(out_dir / "report.html") if out_dir is not None else None,
    }


def cmd_report(args: argparse.Namespace) -> int:
    from dataclasses import asdict

    from pipeline.tools.report import ReportError, print_summary, write_index, write_report

    output_uri, settings = _output_and_settings(args.output)
    out = Path(args.out).absolute() if args.out else None
    try:
        if args.run:
            report, out_dir = write_report(output_uri, out, args.run, settings, top=args.top)
            if args.format == "json":
                print(json.dumps(run_json(report, out_dir), default=str))
            else:
                print_summary(report, out_dir)
            return 0
        index, lines, newest = write_index(output_uri, out, settings, top=args.top)
    except ReportError as exc:  # nothing to report on: no such output, run or committed data
        error_line(exc)
        return exit_codes.USAGE
    newest_dir = index.parent / newest.data.run_id if newest is not None else None
    if args.format == "json":
        print(json.dumps({"index": str(index), "runs": [asdict(line) for line in reversed(lines)],
                          "newest": run_json(newest, newest_dir) if newest is not None else None}, default=str))
        return 0
    if newest is not None and newest_dir is not None:
        print_summary(newest, newest_dir)
    pages = sum(1 for line in lines if line.href)
    print(f"  index    {index}  ({len(lines)} runs, {pages} with a page; newest first)")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    report = sub.add_parser("report", help="a run report: outcomes, top errors, throughput, start-up, tokens "
                                           "(terminal + report.html + PNG charts)")
    report.add_argument("output", help="the job's output folder or s3:// prefix (or its extract.yaml)")
    report.add_argument("--run", metavar="RUN_ID",
                        help="the run id (or a unique prefix) to report on; default: an index page of every run "
                        "(OUT/index.html) and a page per run (OUT/<run_id>/report.html)")
    report.add_argument("--out", metavar="DIR",
                        help="folder for the pages and charts, relative to the working directory (default "
                        "./out/report, or OUTPUT-report beside the output when that would lie inside it; with "
                        "--run, <that>/<run_id>)")
    report.add_argument("--format", choices=["table", "json"], default="table",
                        help="table: the terminal summary (default); json: the same figures as one JSON object")
    report.add_argument("--top", type=int, default=5, help="error messages shown per reason (default 5)")
    report.set_defaults(func=cmd_report)
