"""A pytest plugin: each test's wall seconds and the machine's busy CPU seconds over it (setup, call and teardown),
appended as `nodeid<TAB>wall_s<TAB>busy_cpu_s` to $SUITE_CPU_OUT (default suite-cpu.tsv). Busy CPU is every process
on the machine (`pipeline.tools.machine.cpu_seconds`), so a test's engines, Ray workers and children count: run the
tests in one process on a quiet machine, or the figures mix.

    PYTHONPATH=$PWD:$PWD/lab/experiments SUITE_CPU_OUT=/tmp/cpu.tsv python -m pytest -q -p suite_cpu tests/integration
    sort -t$'\\t' -k3 -n -r /tmp/cpu.tsv | head    # the tests that cost the most CPU
"""

from __future__ import annotations

import os
import time

import pytest

from pipeline.tools.machine import cpu_seconds


def _busy() -> float:
    reading = cpu_seconds()
    return reading[0] if reading else 0.0


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    busy, started = _busy(), time.monotonic()
    yield
    with open(os.environ.get("SUITE_CPU_OUT", "suite-cpu.tsv"), "a") as out:
        out.write(f"{item.nodeid}\t{time.monotonic() - started:.2f}\t{_busy() - busy:.2f}\n")
