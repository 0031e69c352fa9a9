"""A changed job is told, not skipped: a partition committed under another output hash stops the run before
Ray starts, naming what changed and offering --force or a new output. A partition whose input changed since
its commit (another input fingerprint) is rerun, not skipped. No engine: nothing gets as far as Ray."""

from __future__ import annotations

import pytest

from pipeline.config import load_config
from pipeline.output.commit import ChangedJobError, changes, output_parts
from tests.conftest import write_config, write_docs
from tests.fixtures.commits import DOCS, commit_outcome, invoice


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


def test_a_prompt_change_stops_the_run_before_ray_and_says_what_changed(job, monkeypatch):
    import pipeline.run
    from pipeline.run import run_job

    def no_ray():  # whether an earlier test in this process left Ray up must not matter
        raise AssertionError("the run reached Ray")

    monkeypatch.setattr(pipeline.run, "connect_ray", no_ray)
    cfg, _ = job
    with pytest.raises(ChangedJobError) as stopped:
        run_job(load_config(cfg, {"prompt": "Extract the invoice, carefully: {document}"}))
    message = str(stopped.value)
    assert "prompt changed" in message and "--force" in message and "output.uri" in message


def test_the_same_job_skips_and_a_changed_input_is_rerun(job):
    from pipeline.partition import partition_for
    from pipeline.planning import RUN, SKIPPED, plan_run
    from pipeline.stage_config import PlanningConfig
    from tests.fixtures.commits import committer_for

    cfg, docs = job
    loaded = load_config(cfg)
    planning = PlanningConfig.of(loaded)
    *_, committer = committer_for(cfg, "again")
    committed = {"all": committer.committed(partition_for(loaded.input_uri, None))}
    assert [p.action for p in plan_run(planning, [None], committed, fail_fast=True)] == [SKIPPED]
    assert [p.action for p in plan_run(planning, [None], {}, fail_fast=True)] == [RUN]  # --force: nothing committed
    write_docs(docs, DOCS + ["e"], ["A-1 1.0", "b", "c", "d", "e"])  # the input grew since the commit
    (rerun,) = plan_run(planning, [None], committed, fail_fast=True)
    assert rerun.action == RUN and rerun.input.offset == 0 and rerun.input.rows_to_read == 5
