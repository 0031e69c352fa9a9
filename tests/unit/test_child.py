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


# The parent: its child (`run_in_child`) writes READY once it runs the call, that is after its start-up, where it asks
# for the parent-death signal, and then sleeps. A module of its own, not `-c`: a spawned child imports the function
# from the parent's main script.
PARENT = """
import pathlib
import sys
import time


def ready_then_sleep(path):
    pathlib.Path(path).write_text("ready")
    time.sleep(120)


if __name__ == "__main__":
    from pipeline.tools.child import run_in_child

    run_in_child(ready_then_sleep, sys.argv[1])
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the parent-death signal is Linux's (prctl)")
def test_a_child_ends_with_the_process_that_started_it(tmp_path) -> None:
    """A killed `extract bench` or `extract conformance` does not leave its engine child running. The parent is
    killed once the child says it runs the call (no wait of a guessed length: a loaded machine starts it later)."""
    import subprocess
    import time
    from pathlib import Path

    import psutil

    root = Path(__file__).resolve().parents[2]
    (tmp_path / "parent.py").write_text(PARENT)
    ready = tmp_path / "READY"
    child: psutil.Process | None = None
    parent = subprocess.Popen([sys.executable, str(tmp_path / "parent.py"), str(ready)], cwd=root,
                              env={**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [
                                  str(root), os.environ.get("PYTHONPATH")]))})
    try:
        deadline = time.monotonic() + 300
        while not ready.exists() and time.monotonic() < deadline and parent.poll() is None:
            time.sleep(0.1)
        assert ready.exists(), "the child never ran the call"
        children = [p for p in psutil.Process(parent.pid).children()
                    if "resource_tracker" not in " ".join(p.cmdline())]
        assert len(children) == 1, children
        child = children[0]
        parent.kill()
        parent.wait()
        gone, alive = psutil.wait_procs([child], timeout=60)
        assert not alive, f"the child {child.pid} outlived its parent"
    finally:
        if parent.poll() is None:
            parent.kill()
        if child is not None and child.is_running():
            child.kill()
