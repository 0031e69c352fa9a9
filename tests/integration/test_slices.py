"""A finished batch survives its driver (issue 27 item 4): each actor stages every batch it finishes as a slice
(`pipeline.output.slices`) and hands the driver only its receipt, so outcomes that were between an actor and a
driver when the driver died are not generated again, and the commit reads the slices. On the real path: the
session's Ray cluster, the actors (on the simulated engine: the model is not the subject), Parquet on a local folder
and on a real S3 API (moto on loopback), DuckDB.

The driver's death is made in process: its commit raises, so the run stops with its slices staged, as a killed
driver leaves them (`tests/integration/test_cluster.py` kills a real one). Then slices are removed: the state of a
driver killed while batches were still in flight.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipeline.config import load_config
from pipeline.output.commit import PartitionCommitter
from pipeline.output.query import connect
from pipeline.output.slices import parse_slice, read_slice
from pipeline.run import run_job
from pipeline.storage import storage_for
from tests.conftest import ROOT, s3_client, write_config, write_docs

pytestmark = pytest.mark.engine

DOCS = {f"d-{i:02d}": f"Ticket {i}: my printer number {i} stopped working." for i in range(16)}


class DriverDied(RuntimeError):
    pass


@pytest.fixture(scope="module")
def slice_job(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("slices")
    write_docs(folder / "docs.parquet", list(DOCS), list(DOCS.values()))
    (folder / "ticket_models.py").write_text((ROOT / "tests" / "fixtures" / "models.py").read_text())
    return folder


def config_for(folder: Path, output: str, **overrides) -> Path:
    # Two units of 8 documents, each read as two batches of 4; `max_tokens` 3: every document is a quick
    # `truncated` dead letter, which is all the accounting needs.
    return write_config(folder, simulated=True, name="slices", schema="ticket_models:Ticket",
                        prompt="Extract the support ticket.\n{document}",
                        **{"input.uri": "docs.parquet", "output.uri": output, "output.checkpoint_rows": 8,
                           "workers.batch_size": 4, "model.max_tokens": 3, "model.max_model_len": 1024, **overrides})


def staged(storage, output: str) -> list[str]:
    """The unit files and slices staged for the output (not scratch files or commit records)."""
    return [p for p in storage.list_files(f"{output}/_staging")
            if p.rsplit("/", 1)[-1].startswith(("unit-", "slice-")) and p.endswith((".parquet", ".arrow"))]


def documents_generated(manifest) -> int:
    return sum(a["documents"] for a in manifest.actors)


def run_until_commit(cfg: Path, monkeypatch) -> str:
    """Run the job and let its driver 'die' at the commit, with every unit and slice staged; the run's id."""
    def die(self, pinput, *args):
        raise DriverDied(self.run_id)

    with monkeypatch.context() as patched:
        patched.setattr(PartitionCommitter, "commit", die)
        with pytest.raises(DriverDied) as died:
            run_job(load_config(cfg))
    return str(died.value)


@pytest.mark.parametrize("where", ["local", "s3"])
def test_a_rerun_takes_the_batches_the_actors_staged_and_generates_only_the_rest(
        where, ray_cluster, slice_job, request, monkeypatch):
    if where == "s3":
        endpoint = request.getfixturevalue("s3_endpoint")
        s3_client(endpoint).create_bucket(Bucket="slices")
        output, extra = "s3://slices/out", {"storage.endpoint_url": endpoint}
    else:
        output, extra = str(slice_job / "out-local"), {}
    cfg = config_for(slice_job, output, **extra)
    loaded = load_config(cfg)
    storage = storage_for(output, loaded.s3_settings)

    first = run_until_commit(cfg, monkeypatch)
    files = staged(storage, output)
    units = [p for p in files if p.rsplit("/", 1)[-1].startswith("unit-")]
    slices = sorted((parse_slice(p) for p in files if parse_slice(p)), key=lambda s: (s.start, s.unit_id))
    # Each batch staged by its actor, then each unit's batches merged into one slice of its rows (the commit reads a
    # file a unit); the driver writes no unit file.
    assert not units and [(s.start, s.stop) for s in slices] == [(0, 8), (8, 16)], files
    for s in slices:  # a slice holds what the unit file holds for its rows, stamped with the run that made it
        table = read_slice(storage, s)  # an Arrow IPC file, its records typed (`_typed`)
        assert s.path.endswith(".arrow") and "_typed" in table.column_names and "_record" not in table.column_names
        assert table.num_rows == 8 and set(table.column("_run_id").to_pylist()) == {first}
        assert "_unit" not in table.column_names and "_slice" not in table.column_names

    # One unit's slice is there; the other's second batch was cut off in flight: only its first batch's slice.
    cut_off = first_batch_only(storage, slices[-1])

    rerun = run_job(load_config(cfg))
    partition, = rerun.partitions
    assert partition["status"] == "committed"
    assert documents_generated(rerun) == cut_off.rows == 4  # only the batch no slice held
    assert partition["units_resumed"] == 1  # the unit its slices held whole was committed from them, never read
    assert rerun.input_rows == len(DOCS) == rerun.rows + rerun.dead_letters
    seen = connect(output, loaded.s3_settings).sql(
        "SELECT doc_id, _run_id AS run FROM rows UNION ALL SELECT doc_id, run_id FROM dead_letters").fetchall()
    assert sorted(d for d, _ in seen) == sorted(DOCS)  # each document exactly once
    runs = [r for _, r in seen]
    assert runs.count(first) == 12 and runs.count(rerun.run_id) == 4
    assert not staged(storage, output)  # the commit took the slices away with the staging folder


def first_batch_only(storage, merged):
    """The staging a driver killed while the unit's second batch was in flight leaves: the unit's first batch's slice
    (as its actor staged it) in place of the unit's merged slice. The rows cut off, as a slice would name them."""
    from pipeline.output.slices import SliceWriter, slice_name

    table = read_slice(storage, merged)
    folder = merged.path.rsplit("/", 1)[0]
    SliceWriter(storage, "unused").write(f"{folder}/{slice_name(merged.unit_id, merged.start, merged.start + 4)}",
                                         table.slice(0, 4))  # keeps the run id it carries
    storage.delete(merged.path)
    return parse_slice(f"{folder}/{slice_name(merged.unit_id, merged.start + 4, merged.stop)}")


def test_slices_of_another_batch_size_are_used_without_overlap_and_a_broken_one_is_redone(
        ray_cluster, slice_job, monkeypatch):
    """A rerun with another batch size finds slices whose ranges are not its batches: it reads only the rows they
    do not hold, in its own batches, and takes no row twice. A slice that does not read back (a torn file) is
    deleted and its rows are generated again."""
    output = str(slice_job / "out-resized")
    cfg = config_for(slice_job, output)
    storage = storage_for(output)
    first = run_until_commit(cfg, monkeypatch)
    for path in staged(storage, output):  # keep each unit's first batch only
        first_batch_only(storage, parse_slice(path))
    torn = next(p for p in staged(storage, output) if parse_slice(p).start == 0)
    Path(torn).write_bytes(Path(torn).read_bytes()[:100])
    rerun = run_job(load_config(cfg, {"workers.batch_size": 3}))
    assert documents_generated(rerun) == 12  # the torn slice's 4 rows and the two missing batches
    assert rerun.input_rows == len(DOCS) == rerun.rows + rerun.dead_letters
    runs = json.loads(json.dumps(connect(output).sql(
        "SELECT run_id, count(*) FROM dead_letters GROUP BY run_id ORDER BY run_id").fetchall()))
    assert sorted(map(tuple, runs)) == sorted([(first, 4), (rerun.run_id, 12)])


def test_batches_whose_slices_an_actor_cannot_write_come_in_full_and_the_driver_writes_them(
        ray_cluster, slice_job, monkeypatch):
    """The store refuses the actors' writes (not the driver's): each actor logs it and hands its batch back in full,
    with its slice's name; the driver writes the slice, and the commit reads it like any other."""
    import os

    import pipeline.run
    from pipeline.output.slices import SliceWriter

    written_by_driver: list[str] = []

    class ActorsCannotWrite(SliceWriter):  # a local class: pickled by value into the actors
        def __init__(self, storage, run_id) -> None:
            super().__init__(storage, run_id)
            self.driver_pid = os.getpid()

        def write(self, path, outcomes) -> None:
            if os.getpid() != self.driver_pid:
                raise PermissionError(13, "the store refused the write", path)
            written_by_driver.append(path)
            super().write(path, outcomes)

    monkeypatch.setattr(pipeline.run, "SliceWriter", ActorsCannotWrite)
    output = str(slice_job / "out-refused")
    manifest = run_job(load_config(config_for(slice_job, output)))
    assert manifest.status == "committed" and manifest.input_rows == len(DOCS) == manifest.rows + manifest.dead_letters
    assert sorted(parse_slice(p).rows for p in written_by_driver) == [4, 4, 4, 4]  # every batch, by the driver
    ids = connect(output).sql("SELECT doc_id FROM rows UNION ALL SELECT doc_id FROM dead_letters").fetchall()
    assert sorted(d for d, in ids) == sorted(DOCS)
