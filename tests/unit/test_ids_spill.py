"""Issue 57: a partition with more ids than `IDS_IN_MEMORY` is checked in buckets on disk, never all its ids at once,
and says exactly what the in-memory check (and the dict of ids before it) said."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from pipeline import ids_spill
from pipeline.ids import check_ids
from pipeline.partition import partition_for
from pipeline.storage import storage_for
from pipeline.units import cut_units
from tests.unit.test_ids_arrow import CASES, outcome


@pytest.fixture
def small_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ids_spill, "IDS_IN_MEMORY", 4)  # every case spills, in several buckets
    monkeypatch.setattr(ids_spill, "CHUNK_ROWS", 3)


@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.parametrize(("row_group", "checkpoint_rows"), [(1000, 1000), (5, 2)])
def test_the_bucketed_check_says_what_the_dict_of_ids_said(tmp_path, small_budget, name, row_group, checkpoint_rows):
    got, expected = outcome(tmp_path / "in", CASES[name], row_group, checkpoint_rows)
    assert got == expected
    if name != "unique":
        assert got is not None


def test_a_bucket_holds_a_bounded_share_of_the_ids(tmp_path, monkeypatch):
    monkeypatch.setattr(ids_spill, "IDS_IN_MEMORY", 2_000)
    n = 40_000
    ids = pa.array([f"doc-{i:08d}" for i in range(n)])
    got, expected = outcome(tmp_path / "in", [ids.slice(0, n // 2), ids.slice(n // 2)], 5_000, 256)
    assert got is None and expected is None
    seen = {}
    original = ids_spill.check_spilled

    def spy(*args, **kwargs):
        seen.update(original(*args, **kwargs))
        return seen

    monkeypatch.setattr(ids_spill, "check_spilled", spy)
    storage = storage_for(str(tmp_path / "in"))
    check_ids(storage, cut_units(storage, partition_for(str(tmp_path / "in"), None), "doc_id", "text", None, 256))
    assert seen["buckets"] == 40  # 2 × 40,000 / 2,000
    assert seen["largest"] <= 2_000  # about 1,000 each: none near the whole partition


@pytest.mark.parametrize("column", [
    pa.array(["a", "bb", "", "a", "日本", "bb"]),
    pa.array(["a", "bb", "", "a", "日本", "bb"], pa.large_string()),
    pa.array([b"a", b"\x00", b"a", b""]),
    pa.array([1, -1, 2**40, 1, -1]),
    pa.array([0.0, -0.0, 1.5, 1.5]),
    pa.array([0, 3, 0], pa.int32()).cast(pa.date32()),
])
def test_equal_ids_share_a_bucket(column):
    buckets = ids_spill.bucket_of(column, 7)
    values = column.to_pylist()
    for i, a in enumerate(values):
        for j, b in enumerate(values):
            if a == b:
                assert buckets[i] == buckets[j]
    assert ((0 <= buckets) & (buckets < 7)).all()


def test_distinct_ids_spread_over_the_buckets():
    buckets = ids_spill.bucket_of(pa.array([f"d{i:07d}" for i in range(20_000)]), 10)
    counts = np.bincount(buckets, minlength=10)
    assert counts.min() > 1_500 and counts.max() < 2_500
