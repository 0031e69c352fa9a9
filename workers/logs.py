"""What reaches the terminal, from the driver and from the actors alike (the driver imports it as `workers.logs` too).

Our own lines are structlog: a console renderer for people, JSON lines when asked (`--log-json` or
EXTRACT_LOG_FORMAT=json). By default the terminal is quiet: vLLM logs at ERROR, known-harmless Ray, torch
and vLLM lines are dropped (`NOISE`), and Ray Data's own progress bars are off. `-v/--verbose` (or
EXTRACT_VERBOSE=1) brings everything back.
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import re
import sys
import threading
import warnings
from typing import Any

import structlog

from workers.secrets import redact, redact_value

# Lines that Ray, vLLM and torch print on every run and that tell the user nothing they can act on. Each
# entry is a regex searched in one line. The quiet-terminal test checks a real run against this list.
NOISE: tuple[str, ...] = (
    r"LD_PRELOAD",  # vLLM CPU: "libtcmalloc/libiomp is not found in LD_PRELOAD", speculation advice
    r"doesn't allow to use `torch\.set_num_threads`",
    r"FutureWarning",
    r"^\s+(if hasattr\(value, \"__dict__\"\)|wrapper = lookup\(vars\(value\))",  # the FutureWarnings' source lines
    r"has constructor arguments in the object store and max_restarts > 0",  # Ray core worker, Ray Data actors
    r"Progress bars (for operators )?disabled",  # Ray Data telling how to turn its bars back on
    r"Token authentication is enabled for this Ray cluster",
    r"streaming_executor\.py:\d+ -- (Starting execution|Execution plan|.*execution finished)",
    r"Triton is (installed, but doesn't include CPU backend|not installed)",
    r"NUMA binding: Using MEMBIND policy",
    r"Loading safetensors checkpoint shards",
    r"The global random seed is set to",
    r"Async scheduling not supported with ngram",
    r"Enforce eager set, disabling torch\.compile",
    r"Inductor compilation was disabled by user settings",
    r"max_num_scheduled_tokens is set to \d+ based on the speculative",
    r"Reset SSM cache type",
    r"Model Runner V2 requires Triton",
    r"min_p and logit_bias parameters won't work with speculative decoding",
    r"OMP_NUM_THREADS=\d+ is set; leaving Torch threads",
    r"Passing raw prompts to InputProcessor is deprecated",
    r"^\s*$",  # tqdm's trailing blank line
)
_NOISE = re.compile("|".join(f"(?:{p})" for p in NOISE))
_OURS = re.compile(r"^(\{|\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z \[)")  # a structlog JSON or console line


def verbose() -> bool:
    return os.environ.get("EXTRACT_VERBOSE", "") not in ("", "0", "false")


def json_mode() -> bool:
    return os.environ.get("EXTRACT_LOG_FORMAT", "").lower() == "json"


def is_noise(line: str) -> bool:
    return bool(_NOISE.search(line))


class _Stderr:
    """structlog's PrintLogger binds its file once; this one writes to whatever sys.stderr is now, so lines
    logged while the live display runs go through its redirect and print above it."""

    def msg(self, message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    log = debug = info = warning = warn = error = critical = exception = fatal = failure = msg


# Log fields named `key` (a file's key in a store) or `event` are not secrets for their name alone.
_PLAIN_FIELDS = frozenset({"key", "keys", "event", "level", "timestamp"})


def redact_event(_logger: Any, _name: str, event: dict[str, Any]) -> dict[str, Any]:
    """Every log line through the one redactor (`workers.secrets`): secret-looking fields and every secret form
    inside any value are masked."""
    return {k: (redact_value(v) if k in _PLAIN_FIELDS else redact({k: v})[k]) for k, v in event.items()}


def configure(json_logs: bool | None = None, level: str | None = None, verbose_logs: bool | None = None) -> None:
    """Set up structlog (driver and actors). `json_logs`/`verbose_logs` given here are also put in the
    environment, which the actors inherit."""
    if json_logs:
        os.environ["EXTRACT_LOG_FORMAT"] = "json"
    if verbose_logs:
        os.environ["EXTRACT_VERBOSE"] = "1"
    json_logs = json_mode() if json_logs is None else json_logs
    level_name = (level or os.environ.get("EXTRACT_LOG_LEVEL") or "INFO").upper()
    renderer = structlog.processors.JSONRenderer() if json_logs else structlog.dev.ConsoleRenderer(
        colors=sys.stderr.isatty()
    )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            redact_event,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(logging.getLevelName(level_name)),
        logger_factory=lambda *_: _Stderr(),
        cache_logger_on_first_use=False,
    )
    if not verbose():
        quiet_python()


def quiet_python() -> None:
    """Python-level noise in this process: deprecation and future warnings from our dependencies."""
    warnings.simplefilter("ignore")


def ray_logging_level() -> str:
    return "INFO" if verbose() else "ERROR"


def quiet_driver() -> None:
    """Before `ray.init` on the driver: `NOISE` is dropped from this process's stderr (`gate_stderr`: Ray's
    C++ core worker writes its error-level line about Ray Data's own actors there), and Ray Data's console
    handler shows errors only (its file log under the Ray session keeps everything)."""
    if verbose():
        return
    quiet_python()  # again: importing Ray installs its own warning filters
    gate_stderr()
    quiet_ray_data()


def quiet_ray_data() -> None:
    """Ray Data's console handler (installed as Ray Data is imported) shows errors only, unless verbose; its file
    log under the Ray session keeps everything. Again after a late import of Ray Data (a split run's graph)."""
    if verbose():
        return
    for handler in logging.getLogger("ray.data").handlers:
        if not getattr(handler, "baseFilename", None):  # console, not the session's file log
            handler.setLevel(logging.ERROR)


def actor_quiet_env() -> dict[str, str]:
    """Environment for extraction actors: as quiet as the driver, unless verbose."""
    if verbose():
        return {"EXTRACT_VERBOSE": "1", "VLLM_LOGGING_LEVEL": os.environ.get("VLLM_LOGGING_LEVEL", "INFO")}
    return {"VLLM_LOGGING_LEVEL": "ERROR", "PYTHONWARNINGS": "ignore", "TORCH_CPP_LOG_LEVEL": "ERROR",
            "TQDM_DISABLE": "1"}


def filter_worker_logs() -> None:
    """After `ray.init`: replace Ray's printer of worker output with one that drops `NOISE` (unless verbose),
    prints our own lines without Ray's "(MapWorker(...) pid=N)" prefix, and in JSON mode wraps any other
    line as JSON, so every line on the terminal is ours."""
    from workers.ray_compat import replace_worker_printer

    replace_worker_printer(_print_worker_lines)


def _print_worker_lines(data: dict[str, Any], ray_print: Any) -> None:
    loud = verbose()
    lines = [line for line in data.get("lines", []) if loud or not is_noise(line)]
    if not lines:
        return
    if (loud and not json_mode()) or not str(data.get("pid")).isdigit():
        # Ray's own printer: it keeps only the autoscaler's events and dedups the raylet's lines.
        ray_print({**data, "lines": lines})
        return
    for line in lines:
        print(worker_line(line, data), file=sys.stderr, flush=True)


def worker_line(line: str, data: dict[str, Any]) -> str:
    """One line of a worker's output as the driver prints it."""
    if _OURS.match(line):
        return line
    if json_mode():
        return json.dumps({"event": "worker.output", "line": line, "pid": data.get("pid"),
                           "stream": "stderr" if data.get("is_err") else "stdout", "level": "info"})
    return f"(pid={data.get('pid')}) {line}"


_terminal: Any = None
_drained = threading.Event()
_END = "\x00extract-stderr-end\n"


def terminal() -> Any:
    """Where the person's terminal is: the real stderr when `gate_stderr` is on, else `sys.stderr`."""
    return _terminal or sys.stderr


def gate_stderr() -> None:
    """Route this process's file descriptor 2 through a pipe and forward every line but `NOISE` to the real
    stderr. Catches what no logger setting reaches: C++ lines from Ray's core worker, warnings printed by
    libraries. Python code keeps writing to `sys.stderr` (now the pipe); the live display draws on
    `terminal()`."""
    global _terminal
    if _terminal is not None or os.name != "posix":
        return
    sys.stderr.flush()
    real = os.dup(2)
    _terminal = os.fdopen(real, "w", buffering=1, encoding="utf-8", errors="replace")
    read_end, write_end = os.pipe()
    os.dup2(write_end, 2)
    os.close(write_end)
    threading.Thread(target=_forward, args=(read_end,), name="stderr-gate", daemon=True).start()
    atexit.register(_drain)


def _forward(read_end: int) -> None:
    with os.fdopen(read_end, "r", encoding="utf-8", errors="replace") as lines:
        for line in lines:
            if line == _END:
                _drained.set()
                continue
            if verbose() or not is_noise(line.rstrip("\n")):
                _terminal.write(line)
                _terminal.flush()


def _drain() -> None:
    """At exit: let the forwarder print what is still in the pipe."""
    try:
        sys.stderr.flush()
        os.write(2, _END.encode())
        _drained.wait(2.0)
    except OSError:
        pass
