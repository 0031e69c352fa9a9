"""`pipeline.tools.child.run_in_child`: a call in a spawned child, its result, its exception, its death."""

from __future__ import annotations

import functools
import os

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
