"""Slices (`pipeline.output.slices`): their names, the rows they hold, the read tasks left for the rest, the writer an
actor calls, and how a bench counts what is staged."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipeline.output.layout import OutputLayout
from pipeline.output.manifest import AccountingError
from pipeline.output.query import connect
from pipeline.output.slices import (
    Slice,
    SliceWriter,
    covers,
    disjoint,
    parse_slice,
    read_slices,
    slice_name,
    uncovered,
    unit_file_id,
)
from pipeline.partition import Partition
from pipeline.reader import batch_slices, read_tasks, task_slices
from pipeline.storage import LocalStorage
from pipeline.tools.simbench import staged_rows
from pipeline.units import Unit
from workers.outcome import RECEIPT_COLUMNS, is_receipt, receipt


def s(start: int, stop: int, unit: str = "ab12") -> Slice:
    return Slice(unit, start, stop, f"/x/{slice_name(unit, start, stop)}")


def test_a_slice_name_reads_back_and_other_files_are_not_slices():
    assert parse_slice("s3://b/out/_staging/all/h/" + slice_name("0f3a", 8, 12)) == Slice(
        "0f3a", 8, 12, "s3://b/out/_staging/all/h/slice-0f3a-8-12.arrow")
    assert parse_slice("/o/slice-0f3a-8-12.parquet") == Slice("0f3a", 8, 12, "/o/slice-0f3a-8-12.parquet")  # earlier
    for other in ("unit-0f3a.parquet", "slice-0f3a-8-8.parquet", "slice-0f3a-9-8.parquet",
                  ".slice-0f3a-8-12.parquet.1.tmp", "slice-0f3a-8-12.parquet.tmp", "slice-XYZ-8-12.parquet"):
        assert parse_slice(f"/o/{other}") is None, other


def test_overlapping_slices_of_two_batch_sizes_keep_each_row_once():
    kept = disjoint([s(4, 8), s(0, 4), s(0, 3), s(3, 6), s(8, 12)])
    assert [(k.start, k.stop) for k in kept] == [(0, 4), (4, 8), (8, 12)]
    assert [(k.start, k.stop) for k in disjoint([s(0, 3), s(3, 6), s(2, 9)])] == [(0, 3), (3, 6)]


def test_the_rows_no_slice_holds():
    assert uncovered(0, 16, []) == [(0, 16)]
    assert uncovered(0, 16, [s(4, 8), s(12, 16)]) == [(0, 4), (8, 12)]
    assert uncovered(8, 16, [s(8, 16)]) == []
    assert uncovered(8, 16, [s(10, 11)]) == [(8, 10), (11, 16)]


def test_read_tasks_name_each_batchs_slice_and_skip_the_rows_slices_hold():
    a, b = Unit("", "f.parquet", 0, 0, 8, "v1"), Unit("", "f.parquet", 0, 8, 16, "v1")
    plain = read_tasks([a, b], 4)
    assert [(t["start"], t["stop"]) for t in plain] == [(0, 4), (4, 8), (8, 12), (12, 16)]
    assert all("slice" not in t for t in plain)

    def path(u: Unit, start: int, stop: int) -> str:
        return f"/stage/{slice_name(u.id, start, stop)}"

    tasks = read_tasks([a, b], 3, path, {a.id: [s(0, 4, a.id)], b.id: [s(10, 12, b.id)]})
    # One task per range of a unit no slice holds (issue 57: a block per unit, not per batch), naming its batches'
    # slices, one per `step` rows.
    assert [(t["unit_id"], t["start"], t["stop"], t["step"]) for t in tasks] == [
        (a.id, 4, 8, 3), (b.id, 8, 10, 3), (b.id, 12, 16, 3)]
    assert [[parse_slice(p) for p in task_slices(t)] for t in tasks][0] == [
        Slice(a.id, 4, 7, f"/stage/slice-{a.id}-4-7.arrow"), Slice(a.id, 7, 8, f"/stage/slice-{a.id}-7-8.arrow")]
    assert [(parse_slice(p).start, parse_slice(p).stop) for p in task_slices(tasks[2])] == [(12, 15), (15, 16)]
    paths = task_slices(tasks[2])
    assert batch_slices(3, paths, 4).to_pylist() == [paths[0]] * 3 + [paths[1]]
    # The staging's own names travel as their folder (one string per task, not one per batch); others in full.
    assert all(t["slice_dir"] == "/stage" and "slices" not in t for t in tasks)
    odd = read_tasks([a], 3, lambda u, start, stop: f"/stage/{start}-{stop}.arrow")
    assert odd[0]["slices"] == ["/stage/0-3.arrow", "/stage/3-6.arrow", "/stage/6-8.arrow"] == task_slices(odd[0])
    empty = Unit("", "f.parquet", 0, 16, 16, "v1")  # an empty unit: one slice of no rows, named in full
    assert task_slices(read_tasks([empty], 3, path)[0]) == [f"/stage/slice-{empty.id}-16-16.arrow"]


def test_an_actor_runs_a_units_block_batch_by_batch_and_stages_each():
    from types import SimpleNamespace

    from workers.actor import ExtractionActor, slice_runs

    places = batch_slices(2, ["/a", "/b", "/c"], 5)
    block = outcomes(5).append_column("_slice", places)
    assert [t.column("doc_id").to_pylist() for t in slice_runs(block)] == [["d0", "d1"], ["d2", "d3"], ["d4"]]
    assert slice_runs(outcomes(5)) == [outcomes(5)]  # no slices: the block is the batch
    ran = []

    def run(batch: pa.Table, failing: str | None = None):
        ran.append(batch.num_rows)
        full = batch
        path = batch.column("_slice")[0].as_py()
        if path == failing:
            return full, None  # its slice was not written: its outcomes in full
        return receipt(batch.drop_columns(["_slice"]), batch.column("_slice")), full

    def merging(actor: SimpleNamespace) -> SimpleNamespace:  # these paths are no slices' names: never merged
        actor.name, actor.slices = "test:1", SliceWriter(LocalStorage(), "run-1")
        actor._merge = lambda receipts, full: ExtractionActor._merge(actor, receipts, full)
        return actor

    actor = merging(SimpleNamespace(_batch=run, reader=None))
    back = ExtractionActor.__call__(actor, block)
    assert ran == [2, 2, 1]  # never more than a batch at once in the engine
    assert is_receipt(back) and back.column("_slice").to_pylist() == ["/a", "/a", "/b", "/b", "/c"]
    # With a reader, the block is the unit's description, read into its documents in the actor.
    described = pa.table({"unit_id": ["u"]})
    actor = merging(SimpleNamespace(_batch=run, reader=lambda table: block if table is described else None))
    assert ExtractionActor.__call__(actor, described).equals(back)
    assert ran == [2, 2, 1] * 2
    actor = merging(SimpleNamespace(_batch=lambda batch: run(batch, failing="/b"), reader=None))
    back = ExtractionActor.__call__(actor, block)
    assert not is_receipt(back)  # one slice not written: every batch's outcomes go to the driver in full
    assert back.column("doc_id").to_pylist() == [f"d{i}" for i in range(5)]
    assert back.column("_slice").to_pylist() == ["/a", "/a", "/b", "/b", "/c"]


def test_an_actor_merges_a_units_staged_batches_into_one_slice_and_its_receipt_names_it(tmp_path):
    """Each batch is staged as its slice as it finishes (a driver killed meanwhile keeps it); once the task's last
    batch is staged, the actor stages the task's rows again as one slice and deletes the batches': the commit reads
    one file a unit (issue 57). Slices that are not consecutive, or a merge the store refuses, leave the batches'."""
    from types import SimpleNamespace

    from workers.actor import ExtractionActor

    storage = LocalStorage()
    folder = tmp_path / "_staging" / "all" / "hash"
    paths = [f"{folder}/{slice_name('ab12', a, b)}" for a, b in ((8, 10), (10, 12), (12, 13))]
    block = outcomes(5).append_column("_slice", batch_slices(2, paths, 5))
    writer = SliceWriter(storage, "run-1")

    def run(batch: pa.Table):  # as `ExtractionActor._batch`: the batch staged, its receipt and its outcomes
        places = batch.column("_slice")
        writer.write(places[0].as_py(), batch.drop_columns(["_slice"]))
        return receipt(batch.drop_columns(["_slice"]), places), batch

    actor = SimpleNamespace(_batch=run, reader=None, name="test:1", slices=writer)
    actor._merge = lambda receipts, full: ExtractionActor._merge(actor, receipts, full)
    back = ExtractionActor.__call__(actor, block)
    merged = f"{folder}/{slice_name('ab12', 8, 13)}"
    assert is_receipt(back) and back.column("_slice").to_pylist() == [merged] * 5
    assert storage.list_files(str(tmp_path)) == [merged]  # one slice for the unit's rows; the batches' are gone
    table, = read_slices(storage, [parse_slice(merged)])
    assert table.column("doc_id").to_pylist() == [f"d{i}" for i in range(5)]
    assert table.column("_run_id").to_pylist() == ["run-1"] * 5 and "_slice" not in table.column_names

    # Not one unit's consecutive slices: nothing merged, nothing written.
    assert writer.merge([paths[0], paths[2]], outcomes(3)) is None
    assert writer.merge([paths[0], f"{folder}/{slice_name('cd34', 10, 12)}"], outcomes(4)) is None
    assert writer.merge([paths[0], paths[1]], outcomes(3)) is None  # rows not the slices' rows
    assert storage.list_files(str(tmp_path)) == [merged]

    class Refusing(SliceWriter):
        def merge(self, paths, outcomes):
            raise OSError("the store refused the write")

    actor.slices = Refusing(storage, "run-1")
    storage.delete(merged)
    back = ExtractionActor.__call__(actor, block)  # logs a warning: the batches' slices stay, and their receipts
    assert back.column("_slice").to_pylist() == [paths[0]] * 2 + [paths[1]] * 2 + [paths[2]]
    assert storage.list_files(str(tmp_path)) == sorted(paths)


def test_a_rerun_takes_a_merged_slice_over_the_batch_slices_a_kill_left_beside_it():
    """Killed between the merged slice's write and the batches' deletes: both are staged, and each row is taken once,
    from the merged slice."""
    kept = disjoint([s(0, 16), s(16, 32), s(0, 32), s(32, 48)])
    assert [(k.start, k.stop) for k in kept] == [(0, 32), (32, 48)]


def outcomes(n: int) -> pa.Table:
    return pa.table({"doc_id": [f"d{i}" for i in range(n)], "_unit": ["u"] * n, "_kind": ["row"] * n,
                     "_reason": pa.array([None] * n, pa.string())})


def test_the_writer_stages_a_batch_as_the_driver_would_its_unit(tmp_path):
    layout = OutputLayout(str(tmp_path / "out"))
    p = Partition(None, str(tmp_path / "in"))
    path = f"{layout.staging(p, 'hash')}/{slice_name('ab', 0, 3)}"
    SliceWriter(LocalStorage(), "run-1").write(path, outcomes(3))
    table, = read_slices(LocalStorage(), [parse_slice(path)])
    assert table.column_names == ["doc_id", "_kind", "_reason", "_run_id"]  # no unit column; the run that made it
    assert table.column("_run_id").to_pylist() == ["run-1"] * 3
    assert sorted(f.name for f in (tmp_path / "out").rglob("*") if f.is_file()) == ["slice-ab-0-3.arrow"]


def test_a_bench_counts_a_unit_from_its_file_or_else_its_slices(tmp_path):
    output = tmp_path / "out"
    stage = output / "_staging" / "all" / "hash"
    stage.mkdir(parents=True)
    pq.write_table(outcomes(8), stage / "unit-aa.parquet")
    for start, stop in ((0, 4), (4, 8)):  # slices of a unit staged since: not counted again
        pq.write_table(outcomes(4), stage / slice_name("aa", start, stop))
    for start, stop in ((8, 12), (8, 11)):  # a unit not staged: its slices' rows, each once
        pq.write_table(outcomes(stop - start), stage / slice_name("bb", start, stop))
    footers: dict = {}
    assert staged_rows(output, footers) == 8 + 4
    assert list(footers.values()) == [8]


class _Writer:
    def __init__(self, fail: bool = False) -> None:
        self.fail, self.written = fail, {}

    def write(self, path: str, table: pa.Table) -> None:
        if self.fail:
            raise OSError("the store is read-only")
        self.written[path] = table.column("doc_id").to_pylist()


def test_an_actor_stages_each_slice_of_a_batch_and_returns_a_receipt_or_on_a_failed_write_the_outcomes():
    from types import SimpleNamespace

    from workers.actor import ExtractionActor

    places = pa.chunked_array([pa.DictionaryArray.from_arrays(pa.array([0, 0, 1], pa.int32()), pa.array(["/a", "/b"]))])
    actor = SimpleNamespace(name="test:1", slices=_Writer())
    back = ExtractionActor._stage_slices(actor, places, outcomes(3))  # two blocks bundled into one batch: two slices
    assert actor.slices.written == {"/a": ["d0", "d1"], "/b": ["d2"]}
    assert is_receipt(back) and sorted(back.column_names) == sorted(RECEIPT_COLUMNS)  # no outcome goes back
    assert back.column("_slice").to_pylist() == ["/a", "/a", "/b"] and back.column("_kind").to_pylist() == ["row"] * 3
    actor.slices = _Writer(fail=True)
    back = ExtractionActor._stage_slices(actor, places.slice(0, 2), outcomes(2))  # logs a warning, raises nothing
    assert actor.slices.written == {}
    assert not is_receipt(back) and back.column("doc_id").to_pylist() == ["d0", "d1"]  # in full, for the driver
    assert back.column("_slice").to_pylist() == ["/a", "/a"]


def test_the_driver_notes_a_receipts_slices_and_writes_those_an_actor_could_not(tmp_path):
    from pipeline.run import _note_slices

    def piece(unit: str, ranges: list[tuple[int, int]], full: bool) -> pa.Table:
        paths = [f"{tmp_path}/{slice_name(unit, a, b)}" for a, b in ranges for _ in range(b - a)]
        table = outcomes(len(paths))
        table = table if full else table.select(["_kind", "_reason"])
        return table.drop_columns([c for c in ("_unit",) if c in table.column_names]).append_column(
            "_slice", pa.array(paths).dictionary_encode())

    noted: list[Slice] = []
    writer = SliceWriter(LocalStorage(), "run-1")
    _note_slices(noted, "ab", piece("ab", [(0, 2)], full=False), writer)
    _note_slices(noted, "ab", piece("ab", [(0, 2)], full=False), writer)  # a piece of a slice seen: noted once
    assert [(n.start, n.stop) for n in noted] == [(0, 2)] and not list(tmp_path.iterdir())  # a receipt: no write
    _note_slices(noted, "ab", piece("ab", [(2, 3), (3, 5)], full=True), writer)  # in full: the driver writes both
    assert [(n.start, n.stop) for n in noted] == [(0, 2), (2, 3), (3, 5)]
    written = read_slices(LocalStorage(), noted[1:])
    assert [t.num_rows for t in written] == [1, 2] and "_slice" not in written[0].column_names
    with pytest.raises(AccountingError, match="slice of another"):
        _note_slices(noted, "ab", piece("cd", [(0, 2)], full=False), writer)
    no_slice = piece("ab", [(5, 6)], full=False).set_column(2, "_slice", pa.array([None], pa.string()))
    with pytest.raises(AccountingError, match="without their slice"):
        _note_slices(noted, "ab", no_slice, writer)


def test_slices_cover_rows_exactly_once_or_not():
    assert covers(0, 8, [s(4, 8), s(0, 4)])
    assert covers(3, 4, [s(3, 4)])
    assert not covers(0, 8, [s(0, 4)])  # a gap at the end
    assert not covers(0, 8, [s(0, 4), s(5, 8)])  # a gap inside
    assert not covers(0, 8, [s(0, 4), s(3, 8)])  # a row twice
    assert not covers(0, 8, [s(0, 4), s(4, 8), s(4, 8)])
    assert not covers(0, 8, [s(1, 8)]) and not covers(0, 8, [])
    assert unit_file_id("/o/_staging/all/h/unit-0f3a.parquet") == "0f3a"
    assert unit_file_id("/o/unit-0f3a.parquet.tmp") is None and unit_file_id(slice_name("0f3a", 0, 2)) is None


def test_a_commit_reads_each_unit_from_slices_that_cover_it_exactly_once(tmp_path):
    from tests.conftest import write_config, write_docs
    from tests.fixtures.commits import committer_for, invoice
    from tests.fixtures.commits import outcomes as real_outcomes

    docs = write_docs(tmp_path / "docs.parquet", ["a", "b", "c", "d"], ["A-1 1.0", "b", "c", "d"])
    cfg = write_config(tmp_path, **{"input.uri": str(docs)})
    loaded, storage, _, p, pinput, committer = committer_for(cfg, "run-1")
    unit, = pinput.units
    committer.prepare(p, fresh=True)
    writer = SliceWriter(storage, "run-0")
    first = parse_slice(committer.slice_path(p, unit.id, 0, 2))
    writer.write(first.path, real_outcomes(loaded.contract.hash, {"a": invoice("A-1")}, {"b": "truncated"}))
    rest = parse_slice(committer.slice_path(p, unit.id, 2, 4))
    writer.write(rest.path, real_outcomes(loaded.contract.hash, {}, {"c": "truncated", "d": "truncated"}))
    overlap = parse_slice(committer.slice_path(p, unit.id, 1, 4))
    for wrong in ([first], [first, rest, overlap]):
        with pytest.raises(AccountingError, match="do not cover its rows"):
            committer.commit(pinput, 0.0, 0, {unit.id: wrong})
    result = committer.commit(pinput, 0.0, 0, {unit.id: [rest, first]})
    assert (result.rows, result.dead_letters) == (1, 3)
    ids = connect(loaded.output_uri).sql("SELECT doc_id FROM rows UNION ALL SELECT doc_id FROM dead_letters")
    assert sorted(r[0] for r in ids.fetchall()) == ["a", "b", "c", "d"]
    assert not (tmp_path / "out" / "_staging").exists() or not list((tmp_path / "out" / "_staging").rglob("slice-*"))


def test_a_receipt_is_what_progress_and_fail_fast_read():
    from pipeline.progress import FailFastError, Progress

    dead = pa.table({"doc_id": ["a", "b"], "_unit": ["u", "u"], "_kind": ["dead_letter"] * 2,
                     "_reason": ["truncated", "invalid_json"]})
    back = receipt(dead, pa.array(["/s", "/s"]).dictionary_encode())
    assert pa.types.is_dictionary(back.schema.field("_kind").type)  # a few values a batch: small to send
    progress = Progress(10, "job", live=False)
    progress.see(back)
    assert progress.reasons == {"truncated": 1, "invalid_json": 1}
    with pytest.raises(FailFastError, match="first 2 outcomes were all dead letters"):
        Progress(10, "job", live=False, fail_fast_after=2).see(back)


def test_slices_come_back_in_order_and_a_short_one_is_refused(tmp_path):
    # Read side by side, by a commit and a rerun's check: the tests of `_staged` and `_readable` below.
    writer, found = SliceWriter(LocalStorage(), "run-1"), []
    for start, stop in ((0, 3), (3, 4), (4, 6)):
        found.append(parse_slice(f"{tmp_path}/{slice_name('ab', start, stop)}"))
        writer.write(found[-1].path, outcomes(stop - start))
    assert [t.num_rows for t in read_slices(LocalStorage(), found)] == [3, 1, 2]
    liar = parse_slice(f"{tmp_path}/{slice_name('ab', 6, 9)}")
    writer.write(liar.path, outcomes(2))
    with pytest.raises(ValueError, match="holds 2 outcomes for 3 rows"):
        read_slices(LocalStorage(), [*found, liar])


class Counting(LocalStorage):
    """A local store that counts the calls the slices make of it."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def write_bytes(self, uri: str, data: bytes) -> None:
        self.calls.append("write_bytes")
        super().write_bytes(uri, data)

    def read_bytes(self, uri: str) -> bytes:
        self.calls.append("read_bytes")
        return super().read_bytes(uri)

    def atomic_output(self, uri: str, scratch: str | None = None):
        self.calls.append("atomic_output")
        return super().atomic_output(uri, scratch)

    def arrow_fs(self):
        self.calls.append("arrow_fs")
        return super().arrow_fs()


def test_a_slice_is_written_whole_in_one_call_and_read_back_in_one(tmp_path):
    # On S3 one call is one request: a PUT, which readers see whole or not at all, and a GET.
    store = Counting()
    path = f"{tmp_path}/{slice_name('ab', 0, 3)}"
    SliceWriter(store, "run-1").write(path, outcomes(3))
    assert store.calls == ["write_bytes"]
    assert [f.name for f in tmp_path.iterdir()] == ["slice-ab-0-3.arrow"]  # nothing left beside it
    table, = read_slices(store, [parse_slice(path)])
    assert store.calls == ["write_bytes", "read_bytes"] and table.num_rows == 3


@pytest.mark.parametrize("bound", ["files", "rows"])
def test_a_commit_reads_the_next_units_slices_ahead_and_writes_the_units_in_order(tmp_path, monkeypatch, bound):
    import threading

    from pipeline.output import commit as commit_module
    from pipeline.storage import storage_for
    from pipeline.units import plan_partition
    from tests.conftest import write_config, write_docs
    from tests.fixtures.commits import committer_for
    from tests.fixtures.commits import outcomes as real_outcomes

    if bound == "rows":  # units of one document: 3 outcomes ahead are 3 files
        monkeypatch.setattr(commit_module, "READ_AHEAD_ROWS", 3)
    ahead = min(commit_module.READ_AHEAD, commit_module.READ_AHEAD_ROWS)
    ids = [f"d{i:02d}" for i in range(commit_module.READ_AHEAD + 8)]
    docs = write_docs(tmp_path / "docs.parquet", ids, ids)
    cfg = write_config(tmp_path, **{"input.uri": str(docs)})
    loaded, _, _, p, _, committer = committer_for(cfg, "run-1")
    pinput = plan_partition(storage_for(p.input_uri), p, "doc_id", "text", None, 1)  # one document a unit
    committer.prepare(p, fresh=True)
    slices = {}
    for unit, doc in zip(pinput.units, ids, strict=True):
        found = parse_slice(committer.slice_path(p, unit.id, unit.start, unit.stop))
        SliceWriter(LocalStorage(), "run-0").write(found.path, real_outcomes(loaded.contract.hash, {}, {doc: "x"}))
        slices[unit.id] = [found]
    first = slices[pinput.units[0].id][0].path
    started: list[str] = []
    seen_by_first: list[int] = []
    lock, enough = threading.Lock(), threading.Event()

    class FirstReadWaits(LocalStorage):
        """The first unit's slice comes back only once the reads of the units after it have begun."""

        def read_bytes(self, uri: str) -> bytes:
            with lock:
                started.append(uri)
                if len(started) >= ahead:
                    enough.set()
            if uri == first:
                assert enough.wait(60), f"only {len(started)} reads begun while the first unit's was waiting"
                with lock:
                    seen_by_first.append(len(started))
            return super().read_bytes(uri)

    committer.storage = FirstReadWaits()
    result = committer.commit(pinput, 0.0, 0, slices)
    assert result.dead_letters == len(ids)
    assert seen_by_first == [ahead]  # read ahead, and no further than the bound before the first unit is written
    dead, = (tmp_path / "out" / "dead_letters").rglob("*.parquet")
    assert pq.read_table(dead).column("doc_id").to_pylist() == ids  # written in the units' order
    assert pq.ParquetFile(dead).metadata.num_row_groups == 1  # one row group, not one a slice


def test_a_committed_file_gathers_its_row_groups_and_a_failed_commit_drops_what_it_gathered(tmp_path, monkeypatch):
    from pipeline.output import commit as commit_module

    monkeypatch.setattr(commit_module, "ROW_GROUP_ROWS", 10)
    schema = pa.schema([("n", pa.int64())])
    out = commit_module.RowGroups(pq.ParquetWriter(tmp_path / "a.parquet", schema))
    for n in range(25):
        out.write_table(pa.table({"n": [n]}, schema))
    out.flush()
    out.close()
    meta = pq.ParquetFile(tmp_path / "a.parquet").metadata
    assert [meta.row_group(i).num_rows for i in range(meta.num_row_groups)] == [10, 10, 5]
    assert pq.read_table(tmp_path / "a.parquet").column("n").to_pylist() == list(range(25))
    monkeypatch.setattr(commit_module, "ROW_GROUP_BYTES", 16)  # 2 int64 values
    out = commit_module.RowGroups(pq.ParquetWriter(tmp_path / "b.parquet", schema))
    for n in range(5):
        out.write_table(pa.table({"n": [n]}, schema))
    out.close()  # not flushed: a commit that failed
    meta = pq.ParquetFile(tmp_path / "b.parquet").metadata
    assert [meta.row_group(i).num_rows for i in range(meta.num_row_groups)] == [2, 2]


def test_a_rerun_checks_earlier_slices_side_by_side_and_drops_those_that_do_not_read_back(tmp_path):
    import threading
    from types import SimpleNamespace

    from pipeline.run import _readable

    writer, groups = SliceWriter(LocalStorage(), "run-0"), []
    for n, unit in enumerate(("aa", "bb", "cc")):
        found = parse_slice(f"{tmp_path}/{slice_name(unit, 0, 4)}")
        writer.write(found.path, outcomes(4 if n != 1 else 3))  # bb's slice holds 3 outcomes for 4 rows
        groups.append((unit, [found]))
    both = threading.Barrier(2, timeout=60)

    class TwoAtOnce(LocalStorage):
        """The first two reads return only once both have begun: read one at a time, the barrier breaks."""

        def read_bytes(self, uri: str) -> bytes:
            if "slice-aa" in uri or "slice-bb" in uri:
                both.wait()
            return super().read_bytes(uri)

    assert _readable(SimpleNamespace(storage=TwoAtOnce()), "all", groups) == [True, False, True]
    assert sorted(f.name for f in tmp_path.iterdir()) == ["slice-aa-0-4.arrow", "slice-cc-0-4.arrow"]


def test_a_staged_units_slices_are_kept_packed_and_unpack_as_they_were():
    from pipeline.output.slices import PackedSlices, pack, unpack

    unit = "0f3a"
    found = [Slice(unit, a, a + 4, f"s3://b/out/_staging/all/h/{slice_name(unit, a, a + 4)}") for a in (0, 4, 8)]
    packed = pack(unit, found)
    assert isinstance(packed, PackedSlices) and len(packed.bounds) == 3 * 16
    assert unpack(packed) == found
    odd = [*found[:2], Slice(unit, 8, 12, "/elsewhere/" + slice_name(unit, 8, 12))]  # two folders: kept as they are
    assert pack(unit, odd) is odd and unpack(odd) is odd
    assert pack(unit, []) == []
