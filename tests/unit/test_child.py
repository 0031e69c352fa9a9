"""`pipeline.tools.child.run_in_child`: a call in a spawned child, its result, its exception, its death."""

from __future__ import annotations

import functools
import os
import sys

import pytest

from pipeline.tools.child import ChildDied, run_in_child


def test_the_result_comes_back_and_env_reaches_the_child_without_staying_here(monkeypatch) -> None:
    monkeypatch.delenv("EXTRACT_CHILD_PROBE", raising=False)
    assert run_in_child(os.getenv, "EXTRACT_CHILD_PROBE", env={"EXTRACT_CHILD_PROBE": "yes"}) == "yes"
    assert "EXTRACT_CHILD_PROBE" not in os.environ


def test_a_variable_already_set_here_wins(monkeypatch) -> None:
    monkeypatch.setenv("EXTRACT_CHILD_PROBE", "mine")
    assert run_in_child(os.getenv, "EXTRACT_CHILD_PROBE", env={"EXTRACT_CHILD_PROBE": "theirs"}) == "mine"
    assert os.environ["EXTRACT_CHILD_PROBE"] == "mine"


def test_the_childs_exception_is_raised_here() -> None:
    with pytest.raises(ValueError, match="invalid literal"):
        run_in_child(int, "not a number")


def test_a_child_that_dies_is_childdied_naming_what_it_was() -> None:
    with pytest.raises(ChildDied, match="the xgrammar engine's process ended before it finished"):
        run_in_child(functools.partial(os._exit, 9), what="the xgrammar engine")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the parent-death signal is Linux's (prctl)")
def test_a_child_ends_with_the_process_that_started_it() -> None:
    """A killed `extract bench` or `extract conformance` does not leave its engine child running."""
    import subprocess
    import time
    from pathlib import Path

    import psutil

    root = Path(__file__).resolve().parents[2]
    child: psutil.Process | None = None
    parent = subprocess.Popen([sys.executable, "-c", "import time\nfrom pipeline.tools.child import run_in_child\n"
                               "run_in_child(time.sleep, 120)"], cwd=root)
    try:
        deadline = time.monotonic() + 60
        while child is None and time.monotonic() < deadline and parent.poll() is None:
            for proc in psutil.Process(parent.pid).children():
                try:
                    cmdline = " ".join(proc.cmdline())
                except psutil.Error:
                    continue
                if "spawn_main" in cmdline and "resource_tracker" not in cmdline:
                    child = proc
            time.sleep(0.1)
        assert child is not None, "the child never started"
        time.sleep(1.0)  # past the child's start-up, where it asks for the signal
        parent.kill()
        parent.wait()
        gone, alive = psutil.wait_procs([child], timeout=15)
        assert not alive, f"the child {child.pid} outlived its parent"
    finally:
        if parent.poll() is None:
            parent.kill()
        if child is not None and child.is_running():
            child.kill()
