"""`extract tune CONFIG --gold GOLD [--limit N] [--out DIR]`: which lever settings score best on your gold?

Runs the job's documents that have gold (at most N) under a small grid of lever settings, searched one lever
at a time from the job as written (pipeline.tools.tune: fields whose reach on the gold is under 0.9 marked
x-grounded: false, grounding mode, prompt schema mode, examples on or off, presence_penalty, the grammar-only
string bound), on one engine started once. Prints a row per setting (F1,
precision, recall, dead letters, docs/s) as it goes, then the best settings as YAML to paste into the job.
Writes DIR/tune.md, DIR/tune.json and DIR/tune.yaml (DIR defaults to OUTPUT/_tune/TIMESTAMP; a local path is
relative to the working directory). Nothing is written to the job's output data."""

from __future__ import annotations

import argparse
from datetime import datetime, timezone
from pathlib import Path

from pipeline.cli.options import config_options, from_working_dir, overrides, typed_value
from pipeline.config import ConfigError, load_config
from pipeline.storage import is_s3, join


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("tune", parents=[config_options()],
                       help="score the job under a small grid of lever settings (one engine) and print the best "
                       "as YAML to paste into the job")
    p.add_argument("--gold", required=True, help="JSONL or Parquet gold records, as `extract eval` takes them")
    p.add_argument("--limit", type=int, help="tune on at most N documents with gold (default: all of them)")
    p.add_argument("--out", metavar="DIR", help="folder for tune.md, tune.json and tune.yaml "
                   "(default OUTPUT/_tune/TIMESTAMP)")
    p.add_argument("--lever", action="append", metavar="KEY=V1,V2", default=[],
                   help="search only these levers and values, e.g. --lever model.sampling.presence_penalty=0,1 "
                   "(values as JSON; repeatable; default: grounding mode, examples, prompt_schema, presence_penalty, "
                   "max_string_length)")
    p.set_defaults(func=cmd_tune)


def parse_levers(items: list[str]) -> dict[str, tuple]:
    """`--lever KEY=V1,V2` items as {key: values}; each value typed by its key as `--set` types it (null, 0.5,
    false; text for a text key), ConfigError naming the value its key cannot take."""
    levers: dict[str, tuple] = {}
    for item in items:
        key, sep, values = item.partition("=")
        if not sep or not key or not values:
            raise ConfigError(f"--lever {item!r}: expected KEY=V1,V2 (e.g. model.sampling.presence_penalty=0,1)")
        # Each value as `--set` reads it: by the key's type, a path relative to the working directory.
        levers[key] = tuple(from_working_dir(key, typed_value(key, value, "--lever"))
                            for value in values.split(","))
    return levers


def cmd_tune(args: argparse.Namespace) -> int:
    from pipeline.tools.evaluate import EvalError, EvalOptions, load_gold
    from pipeline.tools.tune import (
        FREE_BELOW,
        LEVERS,
        TABLE_HEAD,
        Tuner,
        best_against_job,
        field_lines,
        reach_lines,
        snippet,
        table_line,
        write_results,
    )

    if args.limit is not None and args.limit <= 0:
        raise ConfigError("--limit must be a positive number of documents")
    levers = parse_levers(args.lever) or LEVERS  # a bad --lever fails before the engine starts
    base = overrides(args)
    loaded = load_config(args.config, base)
    try:
        golds = load_gold(args.gold, loaded.config.input.id_column)
    except EvalError as exc:
        raise ConfigError(str(exc)) from None
    tuner = Tuner(loaded, base, golds, args.limit, EvalOptions())
    out = _out_dir(args, loaded.output_uri)
    print(f"tune: reach of the job's grammar on the gold (fields under {FREE_BELOW} are tried as x-grounded: false):")
    print("\n".join(reach_lines(tuner.reach)))
    print(f"tune: {len(tuner.ids)} documents with gold; starting one engine")
    tuner.start_engine()
    print(TABLE_HEAD, flush=True)
    best = tuner.search(levers, report=lambda trial, note="": print(table_line(trial, note), flush=True))
    trials = list(tuner.trials.values())
    path = write_results(out, loaded, trials, best, tuner.engine_starts, tuner.reach)
    print("\nPer-field F1, by setting (#1 is the first row):")
    print("\n".join(field_lines(trials)))
    print(best_against_job(trials, best))
    print()
    print(snippet(loaded, best), end="")
    print(f"wrote {path} (and tune.md, tune.json beside it)")
    return 0


def _out_dir(args: argparse.Namespace, output_uri: str) -> Path:
    if args.out:
        return Path(args.out).resolve()
    if is_s3(output_uri):
        raise ConfigError("the job's output is on S3: give --out DIR for tune's local files")
    return Path(join(output_uri, "_tune", datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")))
