"""Kill-at-every-step: the real `PartitionCommitter` (a run's commit) and the real `merge_partition` (a
retry's commit) run in a child process (forked from a forkserver) that SIGKILLs itself at a chosen step, on a
local folder and on S3 (a moto server). After each kill, the committed output read through `extract query`'s reader
is the old state or the new one, never a mix of tables; rows + dead letters = input, no id twice. Then a later run
(`run_job`, which starts no engine when every partition is committed) or a later commit sweeps what the
dead process left, and only the files the manifest names remain.

No engine: the children stage hand-made outcomes as the actors emit them.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pyarrow as pa
import pytest

from pipeline.config import load_config
from pipeline.output.layout import KINDS, OutputLayout
from pipeline.output.manifest import read_manifest
from pipeline.output.query import connect
from pipeline.partition import partition_for
from pipeline.storage import storage_for
from tests.fixtures.commits import DOCS, commit_outcome, committed_output, committer_for, invoice, outcomes

pytestmark = pytest.mark.slow  # child processes killed at every step, locally and on a moto server

COMMIT_STEPS = ["compacting", "files_written", "manifest_written", "swept", "staging_discarded", None]
RETRY_STEPS = ["files_written", "manifest_written", "swept", None]


def kill_hook(step: str | None):
    def hook(name: str, *_: object) -> None:
        if name == step:
            os.kill(os.getpid(), signal.SIGKILL)
    return hook


# -------------------------------------------------------------------------------------- the child process


def child_commit(cfg: Path, step: str | None) -> None:
    commit_outcome(cfg, "second", {"a": invoice("A-1"), "b": invoice("B-2")}, {"c": "truncated", "d": "empty_input"},
                   kill_hook(step))


def child_retry(cfg: Path, step: str | None) -> None:
    from pipeline.output.tables import RecordTables
    from pipeline.tools.retry import load_state, merge_partition

    loaded, storage, layout, p, _, _ = committer_for(cfg, "unused")
    state = load_state(storage, layout, p, "doc_id", {"truncated"}, loaded.output_hash, again=False)
    tables = RecordTables(loaded.contract, pa.field("doc_id", pa.string()), "retry-1", "bigger-model")
    recovered, still = tables.split(outcomes(loaded.contract.hash, {"b": invoice("B-2")}, {"c": "semantic_invalid"})
                                    .append_column("_run_id", pa.array(["retry-1"] * 2)))
    merge_partition(storage, layout, state, recovered, still, "doc_id", "retry-1", {"run_id": "retry-1"},
                    kill_hook(step))


def run_child(kind: str, cfg: Path, step: str | None) -> int:
    """`child_KIND(cfg, step)` in a child process; its exit code (-SIGKILL when it killed itself at `step`). The
    children fork from one forkserver that imported this module once (a fresh interpreter for each of the 20 cost
    about 2 CPU s of imports); the forkserver runs no thread of this process's (moto's server, Ray's)."""
    child = _forkserver().Process(target=_child, args=(kind, str(cfg), step))
    child.start()
    child.join(300)
    if child.exitcode is None:
        child.kill()
        child.join()
    assert child.exitcode in (0, -signal.SIGKILL), f"the {kind} child exited {child.exitcode} (its traceback above)"
    return child.exitcode


def _child(kind: str, cfg: str, step: str | None) -> None:
    {"commit": child_commit, "retry": child_retry}[kind](Path(cfg), step)


_CONTEXT: list = []


def _forkserver():
    if not _CONTEXT:
        import multiprocessing

        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload([__name__])
        _CONTEXT.append(context)
    return _CONTEXT[0]


# -------------------------------------------------------------------------------------------- the tests


@pytest.fixture(params=["local", "s3"])
def output(request, tmp_path):
    return committed_output(request, tmp_path)


def seen(cfg: Path) -> dict:
    """What a reader of the committed output sees, through `extract query`'s reader."""
    con = connect(load_config(cfg))
    rows = sorted(con.sql("SELECT doc_id, _run_id FROM rows").fetchall())
    dead = sorted(con.sql("SELECT doc_id, reason, run_id FROM dead_letters").fetchall())
    return {"rows": rows, "dead": dead}


def check_whole(state: dict) -> None:
    ids = [r[0] for r in state["rows"]] + [d[0] for d in state["dead"]]
    assert sorted(ids) == DOCS, state  # rows + dead letters = input, no id twice


def check_swept(cfg: Path) -> None:
    loaded = load_config(cfg)
    storage, layout = storage_for(loaded.output_uri, loaded.s3_settings), OutputLayout(loaded.output_uri)
    p = partition_for(loaded.input_uri, None)
    manifest = read_manifest(storage, layout, p)
    for kind in KINDS:
        assert storage.list_files(layout.folder(kind, p)) == [manifest.uri(kind, layout.root)]
    assert not storage.list_files(layout.staging_root(p))


OLD = {"rows": [("a", "first")], "dead": [("b", "truncated", "first"), ("c", "truncated", "first"),
                                          ("d", "empty_input", "first")]}
NEW_COMMIT = {"rows": [("a", "second"), ("b", "second")], "dead": [("c", "truncated", "second"),
                                                                    ("d", "empty_input", "second")]}
NEW_RETRY = {"rows": [("a", "first"), ("b", "retry-1")], "dead": [("c", "semantic_invalid", "retry-1"),
                                                                   ("d", "empty_input", "first")]}


@pytest.mark.parametrize("step", COMMIT_STEPS)
def test_a_commit_killed_at_any_step_leaves_the_old_state_or_the_new_and_a_later_run_sweeps(output, step):
    from pipeline.run import run_job

    killed = run_child("commit", output, step) == -signal.SIGKILL
    assert killed == (step is not None)
    state = seen(output)
    check_whole(state)
    expected = OLD if step in ("compacting", "files_written") else NEW_COMMIT
    assert state == expected
    # A later run of the same job skips the committed partition (no engine) and sweeps the leftovers.
    manifest = run_job(load_config(output))
    assert [p["status"] for p in manifest.partitions] == ["skipped"]
    check_swept(output)
    assert seen(output) == expected


@pytest.mark.parametrize("step", RETRY_STEPS)
def test_a_retry_killed_at_any_step_leaves_the_old_state_or_the_new_and_a_later_commit_sweeps(output, step):
    killed = run_child("retry", output, step) == -signal.SIGKILL
    assert killed == (step is not None)
    state = seen(output)
    check_whole(state)
    expected = OLD if step == "files_written" else NEW_RETRY
    assert state == expected
    commit_outcome(output, "third", {}, {k: "truncated" for k in DOCS})  # e.g. `extract run --force`
    check_swept(output)
    assert seen(output)["dead"] == [(k, "truncated", "third") for k in DOCS]
