"""`extract run CONFIG [--date D]` runs one partition; `extract backfill CONFIG --start S --end E` runs every day
of a range, skipping committed days."""

from __future__ import annotations

import argparse
from datetime import date

from pipeline.cli.options import days, fail_fast_flag, job_options, overrides
from pipeline.config import ConfigError, load_config
from pipeline.partition import day_range, is_templated, parse_day
from pipeline.quality import gate_exit
from workers.secrets import redact_text


def cmd_run(args: argparse.Namespace) -> int:
    loaded = load_config(args.config, overrides(args))  # a bad config fails before Ray Data is imported
    from pipeline.run import run_job
    from pipeline.summary import render_summary

    manifest = run_job(loaded, days(loaded, args.date), force=args.force, fail_fast_after=args.fail_fast_after,
                       new_job=args.force_new_job)
    print(redact_text(render_summary(manifest, args.config, args.set)))
    return gate_exit(loaded, manifest)


def cmd_backfill(args: argparse.Namespace) -> int:
    loaded = load_config(args.config, overrides(args))
    if not is_templated(loaded.input_uri):
        raise ConfigError(f"input.uri: {loaded.config.input.uri!r} has no {{date}} to backfill over")
    span: list[date | None] = list(day_range(parse_day(args.start), parse_day(args.end)))
    from pipeline.run import run_job
    from pipeline.summary import render_backfill_table, render_summary

    manifest = run_job(loaded, span, force=args.force, fail_fast=False,
                       fail_fast_after=args.fail_fast_after, new_job=args.force_new_job)
    print(redact_text(render_summary(manifest, args.config, args.set)))
    print()
    print(render_backfill_table(manifest))
    return gate_exit(loaded, manifest)


NEW_JOB_HELP = ("the output belongs to another job (schema, partitioning or id column): start a fresh version of it "
                "for this job; the old job's manifests and run records move to OUTPUT/_previous/<time>/")


def register(sub: argparse._SubParsersAction) -> None:
    run = sub.add_parser("run", parents=[job_options()], help="run an extraction job (one partition)")
    run.add_argument("--date", help="the partition to run when input.uri has {date}: YYYY-MM-DD, today, yesterday")
    run.add_argument("--force", action="store_true", help="redo a committed partition and replace it")
    run.add_argument("--force-new-job", action="store_true", help=NEW_JOB_HELP)
    fail_fast_flag(run)
    run.set_defaults(func=cmd_run)


def register_backfill(sub: argparse._SubParsersAction) -> None:
    backfill = sub.add_parser("backfill", parents=[job_options()],
                              help="run every day from --start to --end, skipping committed days")
    backfill.add_argument("--start", required=True, help="first day, YYYY-MM-DD")
    backfill.add_argument("--end", required=True, help="last day, YYYY-MM-DD (or yesterday)")
    backfill.add_argument("--force", action="store_true", help="redo committed days too")
    backfill.add_argument("--force-new-job", action="store_true", help=NEW_JOB_HELP)
    fail_fast_flag(backfill)
    backfill.set_defaults(func=cmd_backfill)
