"""`workers.engine.imports.collector_paused`: heavy imports run with the cyclic garbage collector off, and what they
built is frozen before it is turned back on."""

from __future__ import annotations

import gc
import sys

import pytest

from workers.engine.imports import collector_paused


@pytest.fixture(autouse=True)
def _collector_as_it_was():
    enabled = gc.isenabled()
    yield
    gc.unfreeze()  # back where collections look, as before the test
    if enabled:
        gc.enable()
    else:
        gc.disable()


def test_the_block_runs_without_the_collector_and_what_its_import_built_is_frozen(tmp_path, monkeypatch):
    (tmp_path / "heavy_for_the_test.py").write_text("built = [[i] for i in range(1000)]\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "heavy_for_the_test", raising=False)
    gc.enable()
    frozen = gc.get_freeze_count()
    with collector_paused():
        assert not gc.isenabled()
        import heavy_for_the_test  # container objects the collector tracks
    assert gc.isenabled()
    assert gc.get_freeze_count() >= frozen + len(heavy_for_the_test.built)


def test_a_block_that_imports_nothing_new_freezes_nothing():
    gc.enable()
    frozen = gc.get_freeze_count()
    with collector_paused():
        import json  # already imported

        built = [[i] for i in range(1000)]
    assert json and len(built) == 1000
    assert gc.get_freeze_count() == frozen


def test_a_nested_use_leaves_the_collector_off_until_the_outer_one_ends():
    gc.enable()
    with collector_paused():
        with collector_paused():
            pass
        assert not gc.isenabled()
    assert gc.isenabled()


def test_a_collector_that_was_off_stays_off_even_when_the_block_raises():
    gc.disable()
    with pytest.raises(ImportError), collector_paused():
        raise ImportError("no such module")
    assert not gc.isenabled()
