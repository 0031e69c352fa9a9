"""A changed job is told, not skipped: a partition committed under another output hash stops the run before
Ray starts, naming what changed and offering --force or a new output. A partition whose input changed since
its commit (another input fingerprint) is rerun, not skipped. No engine: nothing gets as far as Ray."""

from __future__ import annotations

import pytest

from pipeline import exit_codes
from pipeline.commit import ChangedJobError, changes, output_parts
from pipeline.config import load_config
from tests.conftest import run_cli, write_config, write_docs
from tests.test_commit_kill import DOCS, commit_outcome, invoice


@pytest.fixture
def job(tmp_path):
    docs = write_docs(tmp_path / "docs.parquet", DOCS, ["A-1 1.0", "b", "c", "d"])
    cfg = write_config(tmp_path, **{"input.uri": str(docs)})
    commit_outcome(cfg, "first", {"a": invoice("A-1")}, {"b": "truncated", "c": "truncated", "d": "empty_input"})
    return cfg, docs


def test_the_settings_that_changed_are_named():
    old = output_parts({"prompt": "a", "model": {"path": "m", "max_tokens": 10}, "schema": "h"})
    new = output_parts({"prompt": "b", "model": {"path": "m", "max_tokens": 20}, "schema": "h"})
    assert changes(old, new) == ["model.max_tokens", "prompt"]
    assert changes({}, new) == []  # a manifest from before per-setting hashes: only the hash is known


def test_a_prompt_change_stops_the_run_before_ray_and_says_what_changed(job):
    from pipeline.run import run_job

    cfg, _ = job
    with pytest.raises(ChangedJobError) as stopped:
        run_job(load_config(cfg, {"prompt": "Extract the invoice, carefully: {document}"}))
    message = str(stopped.value)
    assert "prompt changed" in message and "--force" in message and "output.uri" in message
    import ray

    assert not ray.is_initialized()


def test_the_cli_says_it_in_one_line_with_exit_2(job, cli_env):
    cfg, _ = job
    done = run_cli(["run", str(cfg), "--set", "model.max_tokens=77"], cli_env)
    assert done.returncode == exit_codes.USAGE, done.stderr[-2000:]
    (line,) = [x for x in done.stderr.splitlines() if x.startswith("error:")]
    assert "model.max_tokens changed" in line and "--force" in line
    assert "Traceback" not in done.stderr


def test_the_same_job_skips_and_a_changed_input_is_rerun(job):
    from pipeline.commit import PartitionCommitter
    from pipeline.run import _resumable

    cfg, docs = job
    loaded = load_config(cfg)
    from tests.test_commit_kill import committer_for

    *_, committer = committer_for(cfg, "again")
    assert isinstance(committer, PartitionCommitter)
    assert list(_resumable(committer, loaded, [None], force=False)) == ["all"]
    assert _resumable(committer, loaded, [None], force=True) == {}
    write_docs(docs, DOCS + ["e"], ["A-1 1.0", "b", "c", "d", "e"])  # the input grew since the commit
    assert _resumable(committer, loaded, [None], force=False) == {}
