"""What the commands share: the job options' parent parser, the terminal flags, `--set` overrides and `--date`.

A command module builds its parser from these and imports nothing else from the CLI, so `main` is the only
module that knows every command, and no command imports `main` back."""

from __future__ import annotations

import argparse
import json
from datetime import date
from typing import Any

from pipeline.config import ConfigError, LoadedConfig
from pipeline.partition import is_templated, parse_day


def config_options(config_help: str = "path to extract.yaml") -> argparse.ArgumentParser:
    """The parent parser of every command that reads a job's config: CONFIG and `--set`."""
    p = argparse.ArgumentParser(add_help=False)
    p.add_argument("config", help=config_help)
    p.add_argument("--set", action="append", metavar="KEY=VALUE",
                   help="override a config key, e.g. --set model.max_tokens=256 (repeatable)")
    return p


def job_options() -> argparse.ArgumentParser:
    """The parent parser of the commands that run (or check) a job: `run`, `backfill`, `validate`."""
    p = argparse.ArgumentParser(add_help=False, parents=[config_options()])
    p.add_argument("--limit", type=int, help="process at most N documents (overrides input.limit)")
    p.add_argument("--output", help="output URI (overrides output.uri)")
    p.add_argument("--set-file", metavar="FILE", help="more --set items: a JSON list of \"KEY=VALUE\" strings")
    p.add_argument("--max-dead-letter-rate", type=float, metavar="RATE",
                   help="quality bar (overrides output.max_dead_letter_rate): above it the run commits, "
                   "records an alert and exits 4")
    return p


def terminal_flags(p: argparse.ArgumentParser, default: object = argparse.SUPPRESS) -> None:
    p.add_argument("-v", "--verbose", action="store_true", default=default,
                   help="show everything Ray, vLLM and torch print (default: our lines and a live display)")
    p.add_argument("--log-json", action="store_true", default=default, help="log JSON lines instead of console text")


def fail_fast_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument("--fail-fast-after", type=int, metavar="N",
                   help="stop the run when its first N outcomes are all dead letters (a bad prompt); "
                   "staged units are kept")


def parse_value(value: str) -> Any:
    """A command-line value as JSON where it parses (null, 0.5, false, [1]), else the text itself."""
    try:
        return json.loads(value)
    except json.JSONDecodeError:
        return value


def overrides(args: argparse.Namespace) -> dict[str, Any]:
    """Dotted config keys from `--set`, `--set-file`, `--limit`, `--output` and `--max-dead-letter-rate`."""
    found: dict[str, Any] = {}
    for item in [*(args.set or []), *_set_file(args)]:
        key, sep, value = item.partition("=")
        if not sep:
            raise ConfigError(f"--set {item!r}: expected KEY=VALUE")
        found[key] = parse_value(value)
    if getattr(args, "limit", None) is not None:
        found["input.limit"] = args.limit
    if getattr(args, "output", None):
        found["output.uri"] = args.output
    if getattr(args, "max_dead_letter_rate", None) is not None:
        found["output.max_dead_letter_rate"] = args.max_dead_letter_rate
    return found


def _set_file(args: argparse.Namespace) -> list[str]:
    """`--set-file F`: a JSON list of KEY=VALUE items (how `extract submit` ships --set values: not on a command
    line that `ray job list` shows)."""
    path = getattr(args, "set_file", None)
    if not path:
        return []
    try:
        items = json.loads(open(path, encoding="utf-8").read())
    except (OSError, json.JSONDecodeError) as exc:
        raise ConfigError(f"--set-file {path}: {exc}") from None
    if not isinstance(items, list) or not all(isinstance(i, str) for i in items):
        raise ConfigError(f"--set-file {path}: expected a JSON list of \"KEY=VALUE\" strings")
    return items


def days(loaded: LoadedConfig, date_arg: str | None) -> list[date | None]:
    """The one partition `--date` names, or [None] for an undated input (`--date` must match the input)."""
    templated = is_templated(loaded.input_uri)
    if templated and date_arg is None:
        raise ConfigError(f"input.uri: {loaded.config.input.uri!r} has a {{date}}: give --date YYYY-MM-DD "
                          "(or yesterday)")
    if not templated and date_arg is not None:
        raise ConfigError(f"input.uri: {loaded.config.input.uri!r} has no {{date}}, so --date does not apply")
    return [parse_day(date_arg)] if date_arg is not None else [None]
