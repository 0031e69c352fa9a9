"""Issue 57 item 1: what the driver keeps of a stream does not grow with its documents. Receipts of N units, 16
batches of 16 each, through the driver's books (`pipeline.run._Books`): after each unit is staged its slices are
kept packed (a few bytes per batch, no `Slice` object), nothing is buffered, and a committed partition keeps none.
Counted in objects, not timed."""

from __future__ import annotations

import gc

import pyarrow as pa

from pipeline.output.commit import PartitionResult
from pipeline.output.slices import PackedSlices, Slice, slice_name
from pipeline.partition import Partition
from pipeline.run import _Books, _Commits, _Work
from pipeline.units import PartitionInput, Unit

BATCH, UNIT = 16, 256


class Committer:
    """The partition committer's side the books call: `commit` gets each unit's slices, unpacked."""

    def __init__(self) -> None:
        self.slices: dict[str, list[Slice]] = {}

    def stage(self, partition, unit_id, outcomes) -> None:
        raise AssertionError("a unit staged in slices is never staged as a file")

    def commit(self, pinput, started, resumed, slices) -> PartitionResult:
        self.slices = dict(slices)  # a copy: the books release theirs once committed
        self.slices = type(slices)(self.slices)
        return PartitionResult(pinput.partition.label, "committed")


class Marks:
    def mark(self, name: str) -> None:
        pass


def work(units: int) -> _Work:
    schema = pa.schema([("doc_id", pa.string())])
    cut = [Unit("", "/in/docs.parquet", 0, i * UNIT, (i + 1) * UNIT, "v") for i in range(units)]
    pinput = PartitionInput(Partition(None, "/in"), "doc_id", ["/in/docs.parquet"], schema, units * UNIT, cut)
    return _Work(pinput, list(pinput.units))


def receipt(unit: Unit, start: int) -> pa.Table:
    path = f"/out/_staging/all/h/{slice_name(unit.id, start, start + BATCH)}"
    return pa.table({"_kind": pa.array(["row"] * BATCH).dictionary_encode(),
                     "_reason": pa.array([None] * BATCH, pa.string()).dictionary_encode(),
                     "_slice": pa.array([path] * BATCH)})


def live_slices() -> int:
    gc.collect()
    return sum(1 for o in gc.get_objects() if isinstance(o, Slice))


def test_the_books_keep_no_slice_object_per_staged_unit_and_nothing_once_committed():
    before = live_slices()
    units = 40
    w, committer = work(units), Committer()
    books = _Books([w], committer, _Commits(committer, {}, True), Marks())  # type: ignore[arg-type]
    books.writer = object()  # type: ignore[assignment]
    held = {}
    for n, unit in enumerate(w.pending, 1):
        for start in range(unit.start, unit.stop, BATCH):
            books.take(unit.id, receipt(unit, start))
        if n in (1, units // 2, units - 1):
            held[n] = live_slices() - before
            staged = list(w.in_slices.values())
            assert len(staged) == n and all(isinstance(found, PackedSlices) for found in staged)
            assert all(len(found.bounds) == 2 * 8 * UNIT // BATCH for found in staged)  # 16 bounds, not 16 paths
    assert held == {1: 0, units // 2: 0, units - 1: 0}  # 1, 20 or 39 units staged: no Slice object kept
    assert not books.buffers
    # The commit got every unit's 16 slices back, and the committed partition keeps none.
    got = {unit.id: committer.slices.get(unit.id) for unit in w.input.units}  # as the commit reads them
    assert all(len(found) == UNIT // BATCH for found in got.values())
    assert got[w.input.units[3].id][1] == Slice(
        w.input.units[3].id, 3 * UNIT + BATCH, 3 * UNIT + 2 * BATCH,
        f"/out/_staging/all/h/{slice_name(w.input.units[3].id, 3 * UNIT + BATCH, 3 * UNIT + 2 * BATCH)}")
    assert not w.in_slices and w.left == 0
