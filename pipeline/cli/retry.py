"""`extract retry`: the command line of `pipeline.tools.retry` (wired into `extract` by `register`)."""

from __future__ import annotations

import argparse
from datetime import date
from pathlib import Path
from typing import Any

from pipeline.cli.options import checked, config_options, from_working_dir, overrides
from pipeline.config import ConfigError, load_config
from pipeline.output.committed import CommittedOutput
from pipeline.partition import day_range, is_templated, parse_day
from workers.outcome import DEAD_LETTER_REASONS
from workers.secrets import redact_text


def retry_overrides(args: argparse.Namespace) -> dict[str, Any]:
    """Dotted config keys from `--set` (as `extract run` takes it), and its shortcuts `--max-tokens` (model.max_tokens),
    `--model` (model.path) and `--prompt-file` (prompt, read from a file), which win over `--set`."""
    found = overrides(args)
    if args.max_tokens is not None:
        found["model.max_tokens"] = checked("model.max_tokens", (args.max_tokens,), f"--max-tokens {args.max_tokens}")
    if args.model:
        found["model.path"] = from_working_dir("model.path", args.model)
    if args.prompt_file:
        try:
            found["prompt"] = Path(args.prompt_file).read_text()
        except OSError as exc:
            raise ConfigError(f"--prompt-file {args.prompt_file}: {exc.strerror}") from None
    return found


def retry_days(templated: bool, args: argparse.Namespace) -> list[date | None] | None:
    """The partitions to retry: --date, --start/--end, or None for every committed one."""
    if args.date and (args.start or args.end):
        raise ConfigError("give --date or --start/--end, not both")
    if bool(args.start) != bool(args.end):
        raise ConfigError("--start and --end go together")
    if not templated and (args.date or args.start):
        raise ConfigError("input.uri has no {date}, so --date/--start/--end do not apply")
    if args.date:
        return [parse_day(args.date)]
    if args.start:
        return list(day_range(parse_day(args.start), parse_day(args.end)))
    return None


def cmd_retry(args: argparse.Namespace) -> int:
    from pipeline.tools.retry import render_retry, retry_job

    changes = retry_overrides(args)
    loaded = load_config(args.config, changes)
    days = retry_days(is_templated(loaded.input_uri), args)
    output = CommittedOutput.of(loaded)
    # Nothing committed and no writer ever there: a wrong output, or a job never run. (A writer's lease: the
    # retry goes on, to be refused with exit 5 while that writer lives.)
    if not output.partitions() and not output.has_writer():
        raise ConfigError(f"no committed partition under {loaded.output_uri}, so no dead letter to retry: run the job "
                          "first (`extract run`), or point output.uri at its output")
    report = retry_job(args.config, args.reason, changes, days, again=args.again)
    print(redact_text(render_retry(report)))
    return 1 if report.status == "failed" else 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("retry", parents=[config_options(set_example="model.max_tokens=1024")],
                       help="reprocess dead letters with new settings; recovered documents move to rows in one "
                       "atomic commit per partition")
    p.add_argument("--reason", action="append", required=True, choices=DEAD_LETTER_REASONS, metavar="REASON",
                   help="dead-letter reason to retry, e.g. truncated (repeatable)")
    p.add_argument("--max-tokens", type=int, help="shortcut for --set model.max_tokens=N")
    p.add_argument("--model", help="shortcut for --set model.path=M (a Hugging Face id or a folder)")
    p.add_argument("--prompt-file", help="a file whose text replaces the prompt for the retry (--set prompt=TEXT "
                   "with the text read from the file)")
    p.add_argument("--date", help="the partition to retry when input.uri has {date} (default: every committed one)")
    p.add_argument("--start", help="first day of a range of partitions, YYYY-MM-DD")
    p.add_argument("--end", help="last day of a range of partitions, YYYY-MM-DD (or yesterday)")
    p.add_argument("--again", action="store_true",
                   help="also retry dead letters that a retry with these same settings already failed")
    p.set_defaults(func=cmd_retry)
