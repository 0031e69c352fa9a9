"""One call in a spawned child process of its own: for work that starts an engine, whose memory a process never
gives back until it exits (`extract bench`'s engine arms, `extract conformance`'s backends)."""

from __future__ import annotations

import concurrent.futures
import multiprocessing
import os
import signal
import sys
from collections.abc import Callable
from concurrent.futures.process import BrokenProcessPool
from typing import Any


class ChildDied(RuntimeError):
    """The child process ended before returning (killed: by the kernel's OOM killer, a signal, `os._exit`)."""


def run_in_child(fn: Callable[..., Any], *args: Any, env: dict[str, str] | None = None, what: str = "the child") -> Any:
    """`fn(*args)` in a spawned child (no copy of this process's threads), started with `env` added to this
    environment (keys already set here win). Its exception is raised here; its death is `ChildDied`, naming
    `what`."""
    saved = {key: os.environ.get(key) for key in env or {}}
    os.environ.update({key: value for key, value in (env or {}).items() if key not in os.environ})
    try:
        with concurrent.futures.ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn"),
                                                    initializer=_die_with, initargs=(os.getpid(),)) as pool:
            return pool.submit(fn, *args).result()
    except BrokenProcessPool as exc:
        raise ChildDied(f"{what}'s process ended before it finished (killed by a signal or out of memory?); "
                        "its own log above says more") from exc
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)


PR_SET_PDEATHSIG = 1  # linux/prctl.h


def _die_with(parent: int) -> None:
    """In the child, first: end when the process that started it ends, however that ends. A `kill` of `extract bench`
    left its engine child running (measured: 15 minutes and 1.5 GB, beside the next test session). On Linux
    the kernel sends the child SIGKILL when its parent's thread that started it exits; the pool starts it from the
    caller's thread, which waits in `run_in_child` until the child has ended."""
    if sys.platform.startswith("linux"):
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:  # the parent ended before the line above took effect
        os._exit(1)
