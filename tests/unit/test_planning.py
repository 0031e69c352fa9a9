"""Plan once (issue 27 item 5): each partition is planned once per run, in `pipeline.planning`; a committed
partition is skipped from its manifest and its input fingerprint alone, and ids are read only for the partitions
the run processes. Real Parquet, the real committer; the counting wrappers call the real functions."""

from __future__ import annotations

from datetime import date

import pytest

import pipeline.planning
from pipeline.config import load_config
from pipeline.output.committed import CommittedOutput
from pipeline.partition import partition_for
from pipeline.planning import FAILED, RUN, SKIPPED, plan_run
from pipeline.stage_config import InputSource, PlanningConfig
from tests.conftest import write_config, write_docs
from tests.fixtures.commits import invoice


@pytest.fixture
def counted(monkeypatch):
    """How often `check_ids` (a full read of the ids) and `cut_units` (the footers) ran, per partition label."""
    calls: dict[str, list[str]] = {"check_ids": [], "cut_units": []}
    real_ids, real_cut = pipeline.planning.check_ids, pipeline.planning.cut_units

    def check_ids(storage, pinput):
        calls["check_ids"].append(pinput.partition.label)
        return real_ids(storage, pinput)

    def cut_units(storage, partition, *args, **kwargs):
        calls["cut_units"].append(partition.label)
        return real_cut(storage, partition, *args, **kwargs)

    monkeypatch.setattr(pipeline.planning, "check_ids", check_ids)
    monkeypatch.setattr(pipeline.planning, "cut_units", cut_units)
    return calls


def _days(tmp_path):
    """Three days of input; the first is committed."""
    for day in ("2026-11-01", "2026-11-02", "2026-11-03"):
        (tmp_path / "in" / f"dt={day}").mkdir(parents=True)
        write_docs(tmp_path / "in" / f"dt={day}" / "docs.parquet", ["a", "b"], ["A-1 1.0", "b"])
    cfg = write_config(tmp_path, **{"input.uri": str(tmp_path / "in" / "dt={date}")})
    loaded = load_config(cfg)
    return cfg, loaded


def _commit_first_day(cfg, loaded):
    from pipeline.output.commit import PartitionCommitter, output_parts
    from tests.fixtures.commits import outcomes

    output = CommittedOutput.of(loaded)
    committer = PartitionCommitter(output.storage, output.layout, loaded.contract, "bundled", loaded.output_hash,
                                   "first", parts=output_parts(loaded.decisive))
    p = partition_for(loaded.input_uri, date(2026, 11, 1))
    pinput = pipeline.planning.plan_input(InputSource.of(loaded), p)
    committer.prepare(p, fresh=True)
    committer.stage(p, pinput.units[0].id, outcomes(loaded.contract.hash, {"a": invoice("A-1")}, {"b": "truncated"}))
    committer.commit(pinput, 0.0, 0)
    return {m.partition: m for m in CommittedOutput.of(loaded).partitions()}


def test_a_committed_partition_is_skipped_without_reading_its_ids_or_footers(tmp_path, counted):
    cfg, loaded = _days(tmp_path)
    committed = _commit_first_day(cfg, loaded)
    counted["check_ids"].clear(), counted["cut_units"].clear()
    days = [date(2026, 11, d) for d in (1, 2, 3)]
    plans = plan_run(PlanningConfig.of(loaded), days, committed, fail_fast=True)
    assert [p.action for p in plans] == [SKIPPED, RUN, RUN]
    assert plans[0].note == "already committed" and plans[0].committed == committed["2026-11-01"]
    assert counted["check_ids"] == ["2026-11-02", "2026-11-03"]  # once each, and only those processed
    assert counted["cut_units"] == ["2026-11-02", "2026-11-03"]


def test_a_re_delivered_input_is_planned_once_and_rerun_whole(tmp_path, counted):
    cfg, loaded = _days(tmp_path)
    committed = _commit_first_day(cfg, loaded)
    write_docs(tmp_path / "in" / "dt=2026-11-01" / "docs.parquet", ["a", "b", "c"], ["A-1 1.0", "b", "c"])
    counted["check_ids"].clear(), counted["cut_units"].clear()
    (plan,) = plan_run(PlanningConfig.of(loaded), [date(2026, 11, 1)], committed, fail_fast=True)
    assert plan.action == RUN and plan.input.offset == 0 and plan.input.rows_to_read == 3
    assert counted["check_ids"] == counted["cut_units"] == ["2026-11-01"]


def test_a_partition_that_cannot_be_planned_fails_or_raises(tmp_path):
    cfg, loaded = _days(tmp_path)
    missing = date(2026, 12, 1)
    (plan,) = plan_run(PlanningConfig.of(loaded), [missing], {}, fail_fast=False)
    assert plan.action == FAILED and "does not exist" in plan.note
    with pytest.raises(Exception, match="does not exist"):
        plan_run(PlanningConfig.of(loaded), [missing], {}, fail_fast=True)
