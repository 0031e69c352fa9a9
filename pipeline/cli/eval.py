"""`extract eval extract.yaml --gold GOLD [--run RUN_ID] [--out DIR]`: how right are the rows?

Without `--run`, an output already committed for this job is scored as it stands and the eval is filed under
the run that committed it (no new run starts); otherwise it runs the job first (as `extract run` does, same
overrides) and scores what that run committed; with `--run` it scores an existing run's committed output (repeat it to
score several runs' partitions together, e.g. a corpus run one date partition per command). The scoring
rules are in `pipeline.tools.evaluate`. Writes DIR/eval.json and DIR/eval.md (DIR defaults to
OUTPUT/_eval/RUN_ID) and prints eval.md.

GOLD is JSONL (one object per line) or Parquet (one row per document). Each entry holds the
document id under the job's `input.id_column` and the expected record, either as
`{"doc_id": "inv-1", "record": {...}}` (the record may also be JSON text) or flat as
`{"doc_id": "inv-1", "invoice_number": "...", ...}`.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, TextIO

from pipeline.cli.options import config_options, days, error_line, overrides
from pipeline.config import ConfigError, LoadedConfig, load_config
from pipeline.storage import is_s3, join, storage_for
from pipeline.tools.calibration import committed_documents, committed_spans
from pipeline.tools.evaluate import (
    EvalError,
    EvalOptions,
    RunOutput,
    Tolerance,
    build_report,
    evaluate,
    load_gold,
    output_of_labels,
    output_of_run,
    render_markdown,
    write_report,
)
from pipeline.tools.evaluate.mistakes import CSV_COLUMNS, by_field, csv_rows, output_mistakes
from pipeline.tools.evaluate.reach import Reach, job_reach
from pipeline.tools.evaluate.which_run import already_committed, eval_run_id

PLAIN_RUN_ID = re.compile(r"[A-Za-z0-9_.-]{1,200}")  # as pipeline.tools.report checks a run record's


FIELD_COLUMNS = ("gold", "predicted", "correct", "wrong", "missed", "spurious", "null_agree", "precision", "recall")


def write_field_csv(report: dict[str, Any], out: TextIO) -> None:
    """The per-field scores (eval.md's field table) as CSV, a row per field and one for all leaves (`*`); the last
    column is the field's reach (empty where the report has none)."""
    import csv

    reach = report.get("reach") or {"fields": {}, "overall": {}}
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(("field", *FIELD_COLUMNS, "reach"))
    for path, s in [*report["fields"].items(), ("*", report["overall"]["leaves"])]:
        share = (reach["overall"] if path == "*" else reach["fields"].get(path) or {}).get("reach")
        writer.writerow((path, *("" if s.get(c) is None else s.get(c) for c in FIELD_COLUMNS),
                         "" if share is None else share))


def write_mistakes_csv(report: dict[str, Any], out: TextIO) -> None:
    """The wrong, missed and invented values (eval.md's "Wrong values"), a row each, most frequent first."""
    import csv

    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    writer.writerows(csv_rows(report.get("mistakes") or {}))


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("eval", parents=[config_options()],
                       help="score a run against gold records: per-field precision and recall, exact match, "
                       "coverage, dead letters by reason")
    p.add_argument("--gold", required=True,
                   help="JSONL or Parquet: per document id (the input.id_column key) the expected record, as "
                        "{id, \"record\": {...}} or {id, field: value, ...}")
    p.add_argument("--run", metavar="RUN_ID", action="append",
                   help="score this run's committed output instead of running the job; repeat to score several "
                        "runs together (e.g. one partition each)")
    p.add_argument("--out", metavar="DIR", help="folder for eval.json and eval.md (default OUTPUT/_eval/RUN_ID)")
    p.add_argument("--limit", type=int, help="process at most N documents (overrides input.limit)")
    p.add_argument("--output", help="output URI (overrides output.uri)")
    p.add_argument("--date", help="the partition to run when input.uri has {date}")
    p.add_argument("--force", action="store_true", help="redo a committed partition before scoring it")
    p.add_argument("--rel-tol", type=float, default=1e-6, help="relative tolerance for numbers (default 1e-6)")
    p.add_argument("--abs-tol", type=float, default=0.01, help="absolute tolerance for numbers (default 0.01)")
    p.add_argument("--unordered", action="append", default=[], metavar="PATH",
                   help="match the list at PATH (e.g. items, order.lines) as a set; repeatable")
    p.add_argument("--all-lists-unordered", action="store_true", help="match every list as a set")
    p.add_argument("--format", choices=["table", "csv", "json"], default="table",
                   help="table: eval.md's tables (default); csv: the wrong, missed and invented values, a row "
                   "each (field, kind, doc_id, gold, predicted, snippet, gold_snippet), or with --csv-rows fields "
                   "the per-field scores; json: eval.json's content on stdout, for a script")
    p.add_argument("--csv-rows", choices=["values", "fields"], default="values",
                   help="with --format csv: a row per wrong, missed or invented value (default), or per field")
    p.add_argument("--fit-calibration", metavar="FILE",
                   help="also write a calibration of _confidence fitted on this gold to FILE (JSON), for the job's "
                   "output.calibration")
    p.set_defaults(func=cmd_eval)


def _options(args: argparse.Namespace) -> EvalOptions:
    if args.rel_tol < 0 or args.abs_tol < 0:
        raise ConfigError("--rel-tol and --abs-tol must be >= 0")
    return EvalOptions(Tolerance(args.rel_tol, args.abs_tol), frozenset(args.unordered), args.all_lists_unordered)


def _fresh_run(loaded: LoadedConfig, args: argparse.Namespace) -> tuple[RunOutput, str, bool]:
    """Run the job like `extract run`, then read what it committed (or skipped as already committed)."""
    from pipeline.run import run_job
    from pipeline.summary import render_summary

    manifest = run_job(loaded, days(loaded, args.date), force=args.force)
    # With --format json or csv, stdout holds the scores alone: the run's summary goes to stderr.
    print(render_summary(manifest), file=sys.stderr if args.format in ("json", "csv") else sys.stdout)
    labels = {p["partition"] for p in manifest.partitions if p["status"] in ("committed", "skipped", "partial")}
    return output_of_labels(loaded, labels, manifest.run_id), manifest.run_id, manifest.status == "committed"


def _committed_or_fresh(loaded: LoadedConfig, args: argparse.Namespace) -> tuple[RunOutput, str, bool]:
    """The committed output as it stands, filed under the runs that committed it; else a real run's."""
    output = None if args.force else already_committed(loaded, days(loaded, args.date))
    if output is None:
        return _fresh_run(loaded, args)
    run_id = eval_run_id(output)
    print(f"scoring run {run_id}: it committed {loaded.output_uri} already (no new run; --run picks another, "
          "--force redoes it)", file=sys.stderr)
    return output, run_id, True


def _context(loaded: LoadedConfig, args: argparse.Namespace, output: RunOutput) -> dict[str, Any]:
    model = loaded.config.model
    return {
        "name": loaded.config.name,
        "config": str(loaded.path),
        "gold": str(Path(args.gold).resolve()),
        "run_ids": output.run_ids,
        "output_uri": loaded.output_uri,
        "partitions": [m.partition for m in output.partitions],
        "model": model.path,
        "constrained": getattr(model, "constrained", True),
        "max_tokens": model.max_tokens,
        "config_matches_run": all(m.output_hash == loaded.output_hash for m in output.partitions),
        "evaluated_at": datetime.now(timezone.utc).isoformat(),
    }


def _reach(loaded: LoadedConfig, golds: dict[str, Any], output: RunOutput, options: EvalOptions) -> Reach | None:
    """How many gold values the run's grammars allowed, for the scored documents (their texts read from the
    partitions' inputs); None where no text could be read."""
    scored = (set(output.rows) | set(output.dead_letters)) & set(golds)
    texts = committed_documents(loaded, output.partitions, scored)
    if not texts:
        return None
    return job_reach(loaded, {i: golds[i] for i in golds if i in texts}, texts, output.schemas, options.tolerance)


def cmd_eval(args: argparse.Namespace) -> int:
    if args.run and (args.force or args.limit is not None or args.date):
        raise ConfigError("--force, --limit and --date apply to a fresh run, not to --run")
    for run_id in args.run or []:  # it names a folder, OUTPUT/_eval/RUN_ID: a plain name, as every run id is
        if not PLAIN_RUN_ID.fullmatch(run_id) or run_id in (".", ".."):
            raise ConfigError(f"--run {run_id[:80]!r}: a run id is a plain name (letters, digits, _ . -)")
    options = _options(args)
    loaded = load_config(args.config, overrides(args))
    try:
        golds = load_gold(args.gold, loaded.config.input.id_column)  # a bad gold file fails before the run
        if args.run:
            output, run_id, ok = output_of_run(loaded, args.run), "+".join(dict.fromkeys(args.run)), True
        else:
            output, run_id, ok = _committed_or_fresh(loaded, args)
    except EvalError as exc:
        error_line(exc)
        return 2
    # the rows' `_spans` and documents: for the wrong values' snippets, and the calibration's leaf model where the
    # rows have confidences
    spans = committed_spans(loaded, output.partitions)
    documents = committed_documents(loaded, output.partitions, set(output.rows) & set(golds))
    confident = output.confidence is not None
    scores = evaluate(loaded, golds, output, options, spans if confident else None, documents if confident else None)
    report = build_report(scores, _context(loaded, args, output), options, _reach(loaded, golds, output, options))
    report["mistakes"] = by_field(output_mistakes(loaded, golds, output, options, spans, documents))
    if args.fit_calibration:
        if not scores.confidence_points:
            raise ConfigError("--fit-calibration: no scored row of this run carries a _confidence "
                              "(output.confidence was off, or the rows predate it)")
        target = Path(args.fit_calibration)
        target.write_text(json.dumps(scores.fit_calibration().to_json(), indent=1) + "\n")
        print(f"wrote {target} (calibration from {len(scores.confidence_points)} leaves; set "
              f"output.calibration: {target} in the job)", file=sys.stderr)
    out_dir = args.out if args.out and is_s3(args.out) else str(Path(args.out).resolve()) if args.out else \
        join(loaded.output_uri, "_eval", run_id)
    json_path, md_path = write_report(report, out_dir, storage_for(out_dir, loaded.s3_settings))
    if args.format == "json":
        print(json.dumps(report, default=str))  # what eval.json holds, on one line
        return 0 if ok else 1
    if args.format == "csv":
        write_field_csv(report, sys.stdout) if args.csv_rows == "fields" else write_mistakes_csv(report, sys.stdout)
        return 0 if ok else 1
    print(render_markdown(report))
    print(f"wrote {json_path} and {md_path}")
    return 0 if ok else 1
