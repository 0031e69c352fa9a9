"""The one door to Ray's internals: everything in this project that reaches past Ray's public API is here.

`tests/unit/test_vllm_door.py` checks it by module prefix: outside this module (and `workers.vllm_compat`, vLLM's
door) no file under pipeline/, workers/ or schemas/ imports, reads or names a private Ray module (a path part that
starts with `_`: `ray._private`, `ray._raylet`, `ray.data._internal`, ...; or one of `PRIVATE_MODULES`).

Each use says what it does where Ray has another layout: the run goes on without it (a quieter console, Ray's own
scheduling tick, no record of a session folder), never fails for it. Nothing here imports Ray at import time.
"""

from __future__ import annotations

import collections
import functools
import importlib
import inspect
from collections.abc import Callable
from typing import Any

# Ray modules that are not underscored and yet not an API a product should lean on (alpha, internal state).
PRIVATE_MODULES = ("ray.util.state",)

# Ray Data's executor waits this long between looks at its tasks; its driver thread's CPU scales with 1 / wait.
TICK_MODULE = "ray.data._internal.execution.streaming_executor_state"
TICK_CONSTANT = "WAIT_FOR_TASK_COMPLETION_TIMEOUT_S"
WORKER_PRINTER = "ray_print_logs"  # the handler name Ray's driver prints its workers' output with


def session_dir() -> str | None:
    """The session folder of the Ray cluster this process started or joined (`ray._private.worker._global_node`),
    or None where there is none (or this Ray keeps it elsewhere)."""
    try:
        import ray._private.worker as ray_worker
    except ImportError:
        return None
    node = getattr(ray_worker, "_global_node", None)  # None before ray.init
    return node.get_session_dir_path() if node is not None else None


def replace_worker_printer(printer: Callable[[dict[str, Any], Callable[[dict[str, Any]], None]], None]) -> bool:
    """Put `printer(data, ray_print)` in place of Ray's printer of its workers' output (`ray_print`: Ray's own,
    for what `printer` hands back). False where there is nothing to replace: log_to_driver off, the printer
    replaced already, or another Ray layout (Ray's printer is left alone)."""
    try:
        from ray._private import worker as ray_worker
        from ray._private.ray_logging import global_worker_stdstream_dispatcher as dispatcher
    except ImportError:
        return False
    if not any(name == WORKER_PRINTER for name, _ in dispatcher.handlers):
        return False

    def ray_print(data: dict[str, Any]) -> None:
        ray_worker.print_to_stdstream(data, ignore_prefix=False)

    dispatcher.remove_handler(WORKER_PRINTER)
    dispatcher.add_handler(WORKER_PRINTER, lambda data: printer(data, ray_print))
    return True


def set_scheduler_tick(seconds: float, state: Any = None) -> str | None:
    """Set Ray Data's scheduling-loop wait (`TICK_CONSTANT` of `TICK_MODULE`, or of `state`) to `seconds`. None
    if it is set; else why not (the module, the constant, or any function reading it is gone), one line."""
    if state is None:
        try:
            state = importlib.import_module(TICK_MODULE)
        except ImportError as exc:
            return f"no module {TICK_MODULE} ({exc})"
    if not isinstance(getattr(state, TICK_CONSTANT, None), (int, float)):
        return f"{TICK_MODULE} has no number {TICK_CONSTANT}"
    if not any(TICK_CONSTANT in f.__code__.co_names for f in vars(state).values() if inspect.isfunction(f)):
        return f"no function of {TICK_MODULE} reads {TICK_CONSTANT}"
    setattr(state, TICK_CONSTANT, seconds)
    return None


# Ray Data's map operators keep one `BlockStats` per block they output for the run's life (`_output_blocks_stats`),
# and its batch iterator pickles them all to its stats actor every few seconds: a driver's memory and CPU per
# outcome that grow with the run's length (a 10^6-document run at the default batch size outputs ~62,500 blocks).
STATS_MODULE = "ray.data._internal.execution.operators.map_operator"
STATS_CLASS = "MapOperator"
STATS_LIST = "_output_blocks_stats"


def bound_block_stats(keep: int, state: Any = None) -> str | None:
    """Make every map operator created from now on keep only the stats of its last `keep` output blocks (a deque,
    so Ray's own `extend` and reads go on): Ray Data's end-of-run summary then times those blocks, not all. None
    if set (or set already); else why not, one line (the module, the class, or the list its `__init__` makes is
    gone). `state`: the module to patch (a test's stand-in)."""
    if state is None:
        try:
            state = importlib.import_module(STATS_MODULE)
        except ImportError as exc:
            return f"no module {STATS_MODULE} ({exc})"
    cls = getattr(state, STATS_CLASS, None)
    init = getattr(cls, "__init__", None)
    if not inspect.isclass(cls) or not inspect.isfunction(init):
        return f"{STATS_MODULE} has no class {STATS_CLASS}"
    if getattr(init, "_bounded_block_stats", None) == keep:
        return None
    original = getattr(init, "__wrapped__", init)
    if STATS_LIST not in original.__code__.co_names:
        return f"{STATS_CLASS}.__init__ of {STATS_MODULE} makes no {STATS_LIST}"

    @functools.wraps(original)
    def bounded_init(self: Any, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        setattr(self, STATS_LIST, collections.deque(getattr(self, STATS_LIST, ()), maxlen=keep))

    bounded_init._bounded_block_stats = keep  # type: ignore[attr-defined]
    cls.__init__ = bounded_init
    return None


# Ray Data's iterator (the driver's `iter_batches`) waits for the executor's next output block in a loop that
# sleeps 10 ms between looks (`OpState.get_output_blocking`): 100 looks a second, about 9 ms of the driver's CPU
# per second of the run whatever its throughput (issue 57), while blocks reach that queue only at the scheduling
# loop's ticks (`set_scheduler_tick`, 0.5 s).
POLL_CLASS = "OpState"
POLL_METHOD = "get_output_blocking"
POLL_SLEEP_S = 0.01  # Ray's own wait between looks


class _SlowerSleep:
    """Stands for the `time` module in one Ray module: `sleep` waits at least `seconds`, all else is `time`'s."""

    def __init__(self, real: Any, seconds: float) -> None:
        self._real = real
        self._seconds = seconds

    def sleep(self, seconds: float) -> None:
        self._real.sleep(max(seconds, self._seconds))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)


def set_output_poll(seconds: float, state: Any = None) -> str | None:
    """Make the driver's wait for Ray Data's next output block look every `seconds`, not every 10 ms: the `time`
    that `TICK_MODULE` (or `state`) sees sleeps at least `seconds` (its only sleep is that wait). None if set; else
    why not, one line (the module, the method, or its 10 ms sleep is gone)."""
    if state is None:
        try:
            state = importlib.import_module(TICK_MODULE)
        except ImportError as exc:
            return f"no module {TICK_MODULE} ({exc})"
    method = getattr(getattr(state, POLL_CLASS, None), POLL_METHOD, None)
    if not inspect.isfunction(method):
        return f"{TICK_MODULE} has no {POLL_CLASS}.{POLL_METHOD}"
    code = method.__code__
    if not {"time", "sleep"} <= set(code.co_names) or POLL_SLEEP_S not in code.co_consts:
        return f"{POLL_CLASS}.{POLL_METHOD} of {TICK_MODULE} no longer sleeps {POLL_SLEEP_S} s between looks"
    current = getattr(state, "time", None)
    real = current._real if isinstance(current, _SlowerSleep) else current
    if real is None or not callable(getattr(real, "sleep", None)):
        return f"{TICK_MODULE} has no time module"
    state.time = _SlowerSleep(real, seconds)
    return None
