"""`CommittedOutput` (one object for a committed output) and `Commit` (one commit transaction), on real Parquet
written by the real committer, read by real DuckDB."""

from __future__ import annotations

import pytest

from pipeline.config import load_config
from pipeline.output.committed import CommittedOutput, NothingCommittedError
from pipeline.output.manifest import RunManifest
from pipeline.output.transaction import Commit
from pipeline.partition import partition_for
from pipeline.storage import storage_for
from tests.conftest import write_config, write_docs
from tests.fixtures.commits import DOCS, commit_outcome, invoice
from workers.outcome import DeadCol


def _committed(tmp_path):
    docs = write_docs(tmp_path / "docs.parquet", DOCS, ["A-1 1.0", "b", "c", "d"])
    cfg = write_config(tmp_path, **{"input.uri": str(docs)})
    commit_outcome(cfg, "first", {"a": invoice("A-1")}, {"b": "truncated", "c": "truncated", "d": "empty_input"})
    return load_config(cfg)


def test_one_object_reads_partitions_tables_runs_and_duckdb(tmp_path):
    loaded = _committed(tmp_path)
    output = CommittedOutput.of(loaded)
    (manifest,) = output.partitions()
    assert manifest.rows == 1 and manifest.dead_letters == 3
    assert output.manifest(partition_for(loaded.input_uri, None)) == manifest
    assert output.read("rows", ["doc_id"]).column("doc_id").to_pylist() == ["a"]
    dead = output.read("dead_letters", ["doc_id", DeadCol.REASON])
    assert sorted(dead.column(DeadCol.REASON).to_pylist()) == ["empty_input", "truncated", "truncated"]
    con = output.duckdb()
    assert con.sql("SELECT count(*) FROM dead_letters").fetchall() == [(3,)]
    assert output.runs() == []
    output.storage.write_text(output.layout.run_manifest("r1"), RunManifest("r1", "job", "c", "h", "committed",
                                                                            "2026-01-01").to_json())
    assert [r.run_id for r in output.runs()] == ["r1"]


def test_an_empty_output_has_nothing_to_read_or_query(tmp_path):
    output = CommittedOutput(str(tmp_path / "nothing"))
    assert output.partitions() == [] and output.read("rows") is None and not output.has_writer()
    with pytest.raises(NothingCommittedError):
        output.duckdb()


def test_a_commit_whose_check_fails_leaves_no_data_file_and_publishes_nothing(tmp_path):
    loaded = _committed(tmp_path)
    output = CommittedOutput.of(loaded)
    p = partition_for(loaded.input_uri, None)
    before = output.manifest(p)
    steps = []
    commit = Commit(output.storage, output.layout, p, "second", hook=steps.append)
    with pytest.raises(RuntimeError), commit.files() as targets:
        for target in targets.values():
            storage_for(target).write_text(target, "half")
        raise RuntimeError("the accounting check failed")
    assert steps == []  # files_written is never reached
    assert not any(output.storage.exists(path) for path in commit.paths.values())
    assert output.manifest(p) == before
    assert commit.named == {kind: path.removeprefix(output.root + "/") for kind, path in commit.paths.items()}
