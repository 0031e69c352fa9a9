"""The input selection is part of a partition's identity (issue 23 item 2), as pure logic on real Parquet files and
the real committer: a limited commit is marked incomplete, a later plan starts where it stopped (split inside a
unit, across row groups and files), and the commit that completes it carries the committed rows over, so every
document is committed once. A run whose limit selects nothing more skips the partition and says what is unread.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq

from pipeline.config import load_config
from pipeline.output.commit import more_selected, skip_note
from pipeline.output.query import connect
from pipeline.partition import Partition
from pipeline.storage import LocalStorage
from pipeline.units import plan_partition
from tests.conftest import write_config
from tests.fixtures.commits import committer_for, invoice, outcomes


def two_files(folder) -> str:
    """Ten documents: d0..d5 in a file of two row groups (4 + 2), d6..d9 in a second file."""
    folder.mkdir()
    table = pa.table({"doc_id": [f"d{i}" for i in range(6)], "text": ["x"] * 6})
    pq.write_table(table, folder / "a.parquet", row_group_size=4)
    pq.write_table(pa.table({"doc_id": [f"d{i}" for i in range(6, 10)], "text": ["x"] * 4}), folder / "b.parquet")
    return str(folder)


def rows_of(units) -> list[tuple[str, int, int, int]]:
    return [(u.path.rsplit("/", 1)[1], u.row_group, u.start, u.stop) for u in units]


def test_a_plan_continues_where_the_committed_documents_stop(tmp_path):
    folder = two_files(tmp_path / "in")
    p = Partition(None, folder)
    plan = plan_partition(LocalStorage(), p, "doc_id", "text", None, 3, offset=5)
    assert rows_of(plan.covered) == [("a.parquet", 0, 0, 3), ("a.parquet", 0, 3, 4), ("a.parquet", 1, 0, 1)]
    assert rows_of(plan.units) == [("a.parquet", 1, 1, 2), ("b.parquet", 0, 0, 3), ("b.parquet", 0, 3, 4)]
    assert plan.selected_rows == 10 and plan.complete
    limited = plan_partition(LocalStorage(), p, "doc_id", "text", 7, 3, offset=5)
    assert rows_of(limited.units) == [("a.parquet", 1, 1, 2), ("b.parquet", 0, 0, 1)]
    assert limited.selected_rows == 7 and not limited.complete
    first = plan_partition(LocalStorage(), p, "doc_id", "text", 5, 3)
    assert sum(u.rows for u in first.units) == 5 and not first.covered  # the same prefix, read by the smoke run


def test_a_limited_commit_is_incomplete_and_the_next_commit_completes_it_once(tmp_path):
    folder = two_files(tmp_path / "in")
    cfg = write_config(tmp_path, **{"input.uri": folder})
    loaded = load_config(cfg)

    def commit(run_id: str, limit: int | None, offset: int):
        _, storage, layout, p, _, committer = committer_for(cfg, run_id)
        plan = plan_partition(storage, p, "doc_id", "text", limit, 256, offset=offset)
        committer.prepare(p, fresh=False)
        for unit in plan.units:
            group = pq.ParquetFile(unit.path).read_row_group(unit.row_group, columns=["doc_id"])
            ids = group.column(0).to_pylist()[unit.start:unit.stop]
            rows = {i: invoice(i) for i in ids if i != "d8"}
            committer.stage(p, unit.id, outcomes(loaded.contract.hash, rows, {"d8": "truncated"} if "d8" in ids
                                                 else {}))
        committer.commit(plan, 0.0, 0)
        return plan, committer.committed(p)

    plan, smoke = commit("smoke", 4, 0)
    assert (smoke.input_rows, smoke.input_total_rows, smoke.complete, smoke.limit) == (4, 10, False, 4)
    assert more_selected(smoke, plan, 4) == 0 and more_selected(smoke, plan, 6) == 2
    assert more_selected(smoke, plan, None) == 6
    assert "first 4 of 10 documents" in skip_note(smoke) and "run without --limit" in skip_note(smoke)
    _, full = commit("full", None, smoke.input_rows)
    assert (full.input_rows, full.rows, full.dead_letters, full.complete) == (10, 9, 1, True)
    assert more_selected(full, plan, None) == 0 and skip_note(full) == "already committed"
    seen = connect(loaded).sql("SELECT doc_id, _run_id FROM rows UNION ALL SELECT doc_id, run_id "
                               "FROM dead_letters").fetchall()
    assert sorted(d for d, _ in seen) == sorted(f"d{i}" for i in range(10))
    assert {d: r for d, r in seen if r == "smoke"}.keys() == {"d0", "d1", "d2", "d3"}


def test_a_format_2_manifest_of_a_limited_run_is_recognised_by_its_counts(tmp_path):
    """Written before the selection was recorded: fewer documents than its input means a limit cut it."""
    from pipeline.output.manifest import PartitionManifest

    folder = two_files(tmp_path / "in")
    plan = plan_partition(LocalStorage(), Partition(None, folder), "doc_id", "text", None, 256)
    old = PartitionManifest(partition="all", files={}, input_rows=4, format=2)
    assert more_selected(old, plan, None) == 6
    assert more_selected(PartitionManifest(partition="all", files={}, input_rows=10, format=2), plan, None) == 0
