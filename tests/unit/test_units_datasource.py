"""Issue 57: the run's documents come from a datasource's read tasks (`pipeline.units_source.UnitsDatasource`), one per
unit, not from `from_items` blocks, whose metadata Ray Data kept for the whole run and pickled every 5 s while the
driver iterated. Each read task reads exactly its unit's rows, with the slice of each batch named."""

from __future__ import annotations

import functools

import pyarrow as pa
import pyarrow.parquet as pq

from pipeline.output.slices import parse_slice, slice_name
from pipeline.reader import SLICE_COLUMN, UNIT_COLUMN, read_tasks, read_units
from pipeline.storage import LocalStorage
from pipeline.units import Unit
from pipeline.units_source import UnitsDatasource


def reader():
    return functools.partial(read_units, storage=LocalStorage(), id_field=pa.field("doc_id", pa.string()),
                             text_column="text", schema_column=None, routes=None, default_backend="xgrammar")


def test_one_read_task_per_unit_whatever_the_parallelism_each_reading_its_rows(tmp_path):
    path = str(tmp_path / "docs.parquet")
    pq.write_table(pa.table({"doc_id": [f"d{i}" for i in range(40)], "text": [f"text {i}" for i in range(40)]}),
                   path, row_group_size=20)
    units = [Unit("", path, group, start, stop, "v") for group, start, stop in ((0, 0, 16), (0, 16, 20), (1, 0, 20))]
    tasks = read_tasks(units, 8, lambda u, start, stop: f"/stage/{slice_name(u.id, start, stop)}")
    source = UnitsDatasource(tasks, reader())
    for parallelism in (1, 3, 200):
        read = source.get_read_tasks(parallelism)
        assert len(read) == 3 and [t.metadata.num_rows for t in read] == [16, 4, 20]
    blocks = [t.read_fn() for t in source.get_read_tasks(1)]
    assert [len(b) for b in blocks] == [1, 1, 1]  # one block each
    tables = [b[0] for b in blocks]
    assert [t.column("doc_id").to_pylist() for t in tables] == [
        [f"d{i}" for i in range(16)], [f"d{i}" for i in range(16, 20)], [f"d{i}" for i in range(20, 40)]]
    assert all(set(t.column(UNIT_COLUMN).to_pylist()) == {u.id} for t, u in zip(tables, units, strict=True))
    first = [parse_slice(p) for p in tables[0].column(SLICE_COLUMN).to_pylist()]
    assert [(s.start, s.stop) for s in first] == [(0, 8)] * 8 + [(8, 16)] * 8  # each batch's slice named


def test_a_units_description_is_the_same_size_whatever_its_documents_and_reads_into_them(tmp_path):
    """The actors read their units (`pipeline.unit_pool`: the one-pool run): what the driver sends per unit is its
    read task's description, the same size for documents of 10 characters or 10,000; the actor turns it into one
    row (`ExtractionActor.unit`) and its reader into the documents."""
    sizes = []
    for length in (10, 10_000):
        path = str(tmp_path / f"docs-{length}.parquet")
        pq.write_table(pa.table({"doc_id": [f"d{i}" for i in range(32)], "text": ["x" * length] * 32}), path)
        units = [Unit("", path, 0, 0, 16, "v"), Unit("", path, 0, 16, 32, "v")]
        tasks = read_tasks(units, 4, lambda u, start, stop: f"/stage/{slice_name(u.id, start, stop)}")
        described = [pa.Table.from_pylist([task]) for task in tasks]
        assert len(described) == 2 and all(d.num_rows == 1 and "text" not in d.column_names for d in described)
        sizes.append(sum(d.nbytes for d in described) - sum(len(t["path"]) for t in tasks))
        documents = reader()(pa.concat_tables(described))  # what the actor reads them into
        assert documents.column("doc_id").to_pylist() == [f"d{i}" for i in range(32)]
        assert set(documents.column("text").to_pylist()) == {"x" * length}
    assert sizes[0] == sizes[1]


def test_a_units_receipt_crosses_as_ipc_bytes_and_reads_back_the_same_in_one_chunk():
    """`ExtractionActor.unit` returns its receipt as `to_ipc` bytes (Ray's own pickling of a table of 16 batches'
    chunks cost the driver ~2 ms a unit); the driver's `from_ipc` gets the same table back, one chunk a column."""
    from workers.outcome import Col, Internal, from_ipc, receipt, to_ipc

    parts = [receipt(pa.table({Internal.UNIT: ["u1"] * 4, Col.KIND: ["row", "row", "dead_letter", "row"],
                               Col.REASON: [None, None, f"r{b}", None]}), pa.array([f"/s/slice-u1-{b}"] * 4))
             for b in range(3)]
    table = pa.concat_tables(parts).unify_dictionaries()
    back = from_ipc(to_ipc(table))
    assert back.equals(table.combine_chunks()) and back.to_pylist() == table.to_pylist()
    assert all(back.column(name).num_chunks == 1 for name in back.column_names)


def test_a_run_of_many_units_groups_them_into_fewer_actor_tasks_and_a_small_one_does_not(monkeypatch):
    """Each actor task costs the driver a submission, a wait and a reply (issue 57): with many units per actor, a task
    carries several; with few, one each, so that every unit can be in flight at once."""
    from pipeline.config import WorkersConfig
    from pipeline.unit_pool import MAX_UNITS_PER_TASK, queued_per_actor, units_per_task

    monkeypatch.delenv("EXTRACT_UNITS_PER_TASK", raising=False)
    one = WorkersConfig(actors=1)  # the defaults: 4 batches in flight, so 5 tasks queued per actor
    assert queued_per_actor(one) == 5
    assert [units_per_task(n, one) for n in (1, 5, 79, 80, 160, 391, 3_907)] == [1, 1, 1, 2, 4, 4, 4]
    assert units_per_task(10**6, one) == MAX_UNITS_PER_TASK
    assert units_per_task(391, WorkersConfig(actors=8)) == 1  # 8 actors' queues hold 40 tasks: one unit each
    monkeypatch.setenv("EXTRACT_UNITS_PER_TASK", "3")
    assert units_per_task(5, one) == 3
