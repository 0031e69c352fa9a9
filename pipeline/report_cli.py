"""`extract report OUTPUT [--run RUN_ID] [--out DIR]`: the run report's command line.

OUTPUT is a job's output folder or s3:// prefix, or the job's extract.yaml (its `output.uri` and
`storage` settings are used, which saves retyping an S3 endpoint).
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
    from pipeline.report import ReportError, print_summary, write_report

    output_uri, settings = _output_and_settings(args.output)
    try:
        report, out_dir = write_report(output_uri, Path(args.out) if args.out else None, args.run, settings,
                                       top=args.top)
    except ReportError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print_summary(report, out_dir)
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    report = sub.add_parser("report", help="a run report: outcomes, top errors, throughput, start-up, tokens "
                                           "(terminal + report.html + PNG charts)")
    report.add_argument("output", help="the job's output folder or s3:// prefix (or its extract.yaml)")
    report.add_argument("--run", help="the run id (or a unique prefix) to report on; default: the newest run "
                                      "that processed documents")
    report.add_argument("--out", help="folder for report.html and the charts (default ./out/report/<run_id>)")
    report.add_argument("--top", type=int, default=5, help="error messages shown per reason (default 5)")
    report.set_defaults(func=cmd_report)
