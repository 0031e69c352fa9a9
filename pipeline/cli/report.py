"""`extract report OUTPUT [--run RUN_ID] [--out DIR]`: the run report's command line.

OUTPUT is a job's output folder or s3:// prefix, or the job's extract.yaml (its `output.uri` and
`storage` settings are used, which saves retyping an S3 endpoint).

Without --run: OUT/index.html lists every run, newest first (counts, dead-letter rates, F1 where `extract
eval` ran, a trend chart), each linking to OUT/<run_id>/report.html. With --run: that run's page only.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from pipeline.storage import S3Settings


def _output_and_settings(target: str) -> tuple[str, S3Settings | None]:
    if target.endswith((".yaml", ".yml")) and Path(target).is_file():
        from pipeline.config import load_config

        loaded = load_config(target)
        return loaded.output_uri, loaded.s3_settings
    return target, None


def cmd_report(args: argparse.Namespace) -> int:
    from pipeline.tools.report import ReportError, print_summary, write_index, write_report

    output_uri, settings = _output_and_settings(args.output)
    try:
        if args.run:
            report, out_dir = write_report(output_uri, Path(args.out) if args.out else None, args.run, settings,
                                           top=args.top)
            print_summary(report, out_dir)
            return 0
        index, lines, newest = write_index(output_uri, Path(args.out) if args.out else None, settings, top=args.top)
    except ReportError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    if newest is not None:
        print_summary(newest, index.parent / newest.data.run_id)
    pages = sum(1 for line in lines if line.href)
    print(f"  index    {index}  ({len(lines)} runs, {pages} with a page; newest first)")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    report = sub.add_parser("report", help="a run report: outcomes, top errors, throughput, start-up, tokens "
                                           "(terminal + report.html + PNG charts)")
    report.add_argument("output", help="the job's output folder or s3:// prefix (or its extract.yaml)")
    report.add_argument("--run", help="the run id (or a unique prefix) to report on; default: an index page of "
                                      "every run (OUT/index.html) and a page per run (OUT/<run_id>/report.html)")
    report.add_argument("--out", help="folder for the pages and charts (default ./out/report; with --run, "
                                      "./out/report/<run_id>)")
    report.add_argument("--top", type=int, default=5, help="error messages shown per reason (default 5)")
    report.set_defaults(func=cmd_report)
