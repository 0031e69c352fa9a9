"""Partitions, dates and work units: pure logic on real Parquet files."""

from datetime import date

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipeline.config import ConfigError
from pipeline.output.layout import OutputLayout
from pipeline.partition import DateError, day_range, parse_day, partition_for
from pipeline.storage import LocalStorage
from pipeline.tools.bench_scoring import accuracy
from pipeline.tools.synthetic import contract_record, make_corpus
from pipeline.units import plan_partition


def test_dates():
    today = date(2026, 11, 30)
    assert parse_day("yesterday", today) == date(2026, 11, 29)
    assert parse_day("today", today) == today
    assert parse_day("2026-11-01") == date(2026, 11, 1)
    with pytest.raises(DateError, match="not a date"):
        parse_day("11/01/2026")
    assert day_range(date(2026, 10, 30), date(2026, 11, 2))[-1] == date(2026, 11, 2)
    assert len(day_range(date(2026, 10, 30), date(2026, 11, 2))) == 4
    with pytest.raises(DateError, match="before"):
        day_range(date(2026, 11, 2), date(2026, 11, 1))


def test_partition_layout():
    p = partition_for("s3://corpus/docs/dt={date}/", date(2026, 11, 1))
    assert p.input_uri == "s3://corpus/docs/dt=2026-11-01/" and p.key == "dt=2026-11-01"
    layout = OutputLayout("s3://out/x")
    assert layout.data_file("rows", p, "c1") == "s3://out/x/rows/dt=2026-11-01/part-c1.parquet"
    assert layout.success(p) == "s3://out/x/_partitions/dt=2026-11-01/_SUCCESS"
    whole = partition_for("/data/docs.parquet", None)
    assert layout.data_file("dead_letters", whole, "c1") == "s3://out/x/dead_letters/part-c1.parquet"
    assert layout.success(whole) == "s3://out/x/_partitions/all/_SUCCESS"


@pytest.fixture
def two_files(tmp_path):
    folder = tmp_path / "docs"
    folder.mkdir()
    table = pa.table({"doc_id": [f"d{i}" for i in range(10)], "text": [f"t{i}" for i in range(10)]})
    pq.write_table(table, folder / "a.parquet", row_group_size=4)  # row groups of 4, 4, 2
    pq.write_table(table.slice(0, 3), folder / "b.parquet")
    return folder


def test_units_cover_every_row_once_within_row_groups(two_files):
    plan = plan_partition(LocalStorage(), partition_for(str(two_files), None), "doc_id", "text", None, 3)
    assert plan.total_rows == 13 == plan.rows_to_read
    spans = [(u.path.rsplit("/", 1)[-1], u.row_group, u.start, u.stop) for u in plan.units]
    assert spans == [("a.parquet", 0, 0, 3), ("a.parquet", 0, 3, 4), ("a.parquet", 1, 0, 3),
                     ("a.parquet", 1, 3, 4), ("a.parquet", 2, 0, 2), ("b.parquet", 0, 0, 3)]
    assert len({u.id for u in plan.units}) == len(plan.units)


def test_limit_takes_the_first_rows_in_file_order(two_files):
    plan = plan_partition(LocalStorage(), partition_for(str(two_files), None), "doc_id", "text", 5, 3)
    assert plan.rows_to_read == 5
    assert [(u.row_group, u.start, u.stop) for u in plan.units] == [(0, 0, 3), (0, 3, 4), (1, 0, 1)]


def test_id_type_must_agree_across_files(two_files):
    pq.write_table(pa.table({"doc_id": [1, 2], "text": ["x", "y"]}), two_files / "c.parquet")
    with pytest.raises(ConfigError, match="input.id_column: column 'doc_id' is int64"):
        plan_partition(LocalStorage(), partition_for(str(two_files), None), "doc_id", "text", None, 3)


def test_bench_scoring_matches_gold_field_by_field():
    _, _, golds = make_corpus(1, 1)
    gold = golds[0]
    perfect = {k: v for k, v in contract_record(gold).items() if k != "doc_id"}  # what `extract eval` scores
    assert accuracy([perfect], [gold]) == 1.0
    assert accuracy([None], [gold]) == 0.0
    off = accuracy([{**perfect, "total": gold["total"] + 1}], [gold])  # one leaf of the record wrong
    assert 0.8 < off < 1.0


def test_unit_ids_and_fingerprint_follow_the_file_version(two_files):
    """Another version of an input file (re-delivered with other documents) gets other unit ids, so
    staging made from the old version never matches; the same file unchanged keeps them."""
    first = plan_partition(LocalStorage(), partition_for(str(two_files), None), "doc_id", "text", None, 3)
    again = plan_partition(LocalStorage(), partition_for(str(two_files), None), "doc_id", "text", None, 3)
    assert [u.id for u in again.units] == [u.id for u in first.units]
    assert again.fingerprint == first.fingerprint and len(first.fingerprint) == 64
    pq.write_table(pa.table({"doc_id": ["x0", "x1", "x2"], "text": ["u", "v", "w"]}), two_files / "b.parquet")
    changed = plan_partition(LocalStorage(), partition_for(str(two_files), None), "doc_id", "text", None, 3)
    assert changed.fingerprint != first.fingerprint
    assert [u.id for u in changed.units][:5] == [u.id for u in first.units][:5]  # a.parquet did not change
    assert changed.units[5].id != first.units[5].id


def test_an_empty_file_has_a_fingerprint(tmp_path):
    pq.write_table(pa.table({"doc_id": pa.array([], pa.string()), "text": pa.array([], pa.string())}),
                   tmp_path / "e.parquet")
    plan = plan_partition(LocalStorage(), partition_for(str(tmp_path / "e.parquet"), None), "doc_id", "text", None, 3)
    assert plan.units == [] and plan.fingerprint
    pq.write_table(pa.table({"doc_id": ["a"], "text": ["b"]}), tmp_path / "e.parquet")
    assert plan_partition(LocalStorage(), partition_for(str(tmp_path / "e.parquet"), None), "doc_id", "text", None,
                          3).fingerprint != plan.fingerprint
