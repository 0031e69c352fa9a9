"""Readers and the sweep trust the commit, not the folder (issue 23 item 4), and the commit path's store failures
are one-line `StorageError`s (item 5): on real Parquet, the real committer, real DuckDB, a local output.

Every test starts from a partition committed by the real `PartitionCommitter` (hand-made outcomes, no engine).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipeline.config import load_config
from pipeline.output.layout import OutputLayout
from pipeline.output.manifest import ManifestError, OutputCorruptError, read_manifest
from pipeline.output.query import connect
from pipeline.partition import partition_for
from tests.conftest import ROOT, own_err, write_config, write_docs
from tests.fixtures.commits import DOCS, commit_outcome, invoice


def committed(tmp_path: Path) -> Path:
    """A job over four documents, committed once: row a; dead letters b, c, d. Its extract.yaml."""
    docs = write_docs(tmp_path / "docs.parquet", DOCS, ["A-1 1.0", "b", "c", "d"])
    cfg = write_config(tmp_path, **{"input.uri": str(docs)})
    commit_outcome(cfg, "first", {"a": invoice("A-1")}, {"b": "truncated", "c": "truncated", "d": "empty_input"})
    return cfg


def ids(cfg: Path, verify: bool = False) -> list[str]:
    con = connect(load_config(cfg), verify=True) if verify else connect(load_config(cfg))
    return sorted(r[0] for r in con.sql("SELECT doc_id FROM rows UNION ALL SELECT doc_id FROM dead_letters")
                  .fetchall())


def manifest_path(tmp_path: Path) -> Path:
    return tmp_path / "out" / "_partitions" / "all" / "manifest.json"


def edit_manifest(tmp_path: Path, **changes) -> None:
    path = manifest_path(tmp_path)
    raw = json.loads(path.read_text())
    for key, value in changes.items():
        if value is None:
            raw.pop(key, None)
        else:
            raw[key] = value
    path.write_text(json.dumps(raw))


def test_manifests_record_each_files_size_and_hash(tmp_path):
    cfg = committed(tmp_path)
    raw = json.loads(manifest_path(tmp_path).read_text())
    assert raw["format"] == 3
    for kind in ("rows", "dead_letters"):
        path = tmp_path / "out" / raw["files"][kind]
        assert raw["sizes"][kind] == path.stat().st_size
        assert raw["hashes"][kind].startswith("blake2b:") and len(raw["hashes"][kind]) == len("blake2b:") + 64
    assert ids(cfg, verify=True) == DOCS


def test_a_copied_partition_folder_does_not_double_the_rows(tmp_path):
    cfg = committed(tmp_path)
    meta = tmp_path / "out" / "_partitions"
    shutil.copytree(meta / "all", meta / "all.bak")
    assert ids(cfg) == DOCS  # was a, a, b, b, c, c, d, d
    import duckdb

    from pipeline.output.manifest import duckdb_recipe

    recipe = duckdb_recipe(str(tmp_path / "out"), "dead_letters")  # plain DuckDB, without our tool
    assert sorted(r[0] for r in duckdb.connect().sql(recipe).project("doc_id").fetchall()) == ["b", "c", "d"]


def test_a_manifest_in_another_partitions_folder_is_refused(tmp_path):
    cfg = committed(tmp_path)
    meta = tmp_path / "out" / "_partitions"
    shutil.copytree(meta / "all", meta / "dt=2026-01-01")
    with pytest.raises(ManifestError, match="not of its folder"):
        ids(cfg)


@pytest.mark.parametrize("path", ["../other/rows/part-x.parquet", "rows/../../other/rows/part-x.parquet",
                                  "rows/dt=2026-01-01/part-x.parquet", "dead_letters/part-x.parquet",
                                  "rows/notes.txt"])
def test_a_manifest_naming_a_path_outside_its_partitions_table_folder_is_refused(tmp_path, path):
    cfg = committed(tmp_path)
    other = tmp_path / "other" / "rows"
    other.mkdir(parents=True)
    pq.write_table(pa.table({"doc_id": ["z"]}), other / "part-x.parquet")
    raw = json.loads(manifest_path(tmp_path).read_text())
    edit_manifest(tmp_path, files={**raw["files"], "rows": path}, sizes=None, hashes=None)
    with pytest.raises(OutputCorruptError, match="not a data file of partition all"):
        ids(cfg)


def _rows_file(tmp_path):
    """The committed rows file of the output under `tmp_path`, as its manifest names it."""
    return tmp_path / "out" / json.loads(manifest_path(tmp_path).read_text())["files"]["rows"]


def test_a_data_file_swapped_for_another_parquet_file_is_refused(tmp_path):
    cfg = committed(tmp_path)
    rows = _rows_file(tmp_path)
    pq.write_table(pa.table({"doc_id": ["x", "y", "z"]}), rows)  # another Parquet file under the same name
    with pytest.raises(OutputCorruptError, match="bytes, but .* records"):
        ids(cfg)


def test_a_data_file_changed_in_place_at_its_size_is_caught_by_verify(tmp_path):
    cfg = committed(tmp_path)
    rows = _rows_file(tmp_path)
    data = bytearray(rows.read_bytes())
    start = data.index(b"Acme")
    data[start:start + 4] = b"Acne"  # the same size: only the hash tells
    rows.write_bytes(bytes(data))
    with pytest.raises(OutputCorruptError, match="content hash"):
        ids(cfg, verify=True)


def test_a_missing_data_file_or_a_corrupt_manifest_is_output_corrupt(tmp_path):
    cfg = committed(tmp_path)
    raw = json.loads(manifest_path(tmp_path).read_text())
    (tmp_path / "out" / raw["files"]["dead_letters"]).unlink()
    with pytest.raises(OutputCorruptError, match="missing; rerun the partition with `extract run CONFIG --force`"):
        ids(cfg)
    from pipeline.run import run_job

    with pytest.raises(OutputCorruptError, match="missing"):  # a rerun does not skip it as committed
        run_job(load_config(cfg))
    manifest_path(tmp_path).write_text('{"files": ')
    with pytest.raises(OutputCorruptError, match="not a partition manifest"):
        ids(cfg)
    with pytest.raises(OutputCorruptError, match="--force"):
        run_job(load_config(cfg))
    # What --force does at its commit: the unreadable manifest is replaced, and the output reads again.
    commit_outcome(cfg, "forced", {"a": invoice("A-1")}, {k: "truncated" for k in "bcd"})
    assert ids(cfg, verify=True) == DOCS


def test_a_format_2_manifest_without_sizes_or_hashes_is_still_read(tmp_path):
    cfg = committed(tmp_path)
    edit_manifest(tmp_path, format=2, sizes=None, hashes=None, lease_generation=None, complete=None,
                  input_total_rows=None, limit=None)
    assert ids(cfg) == DOCS
    with pytest.raises(OutputCorruptError, match="--verify cannot check it"):  # issue 55: nothing to verify against
        ids(cfg, verify=True)


def test_the_sweep_deletes_only_this_outputs_commits_and_never_through_a_symlink(tmp_path):
    """A foreign `part-*` file in rows/ stays; another output's files behind a symlinked dead_letters/ stay; the
    superseded commit's files go."""
    cfg = committed(tmp_path)
    out = tmp_path / "out"
    first = json.loads(manifest_path(tmp_path).read_text())
    foreign = out / "rows" / "part-foreign.parquet"
    pq.write_table(pa.table({"doc_id": ["x"]}), foreign)
    elsewhere = tmp_path / "elsewhere" / "dead_letters"
    elsewhere.mkdir(parents=True)
    theirs = elsewhere / "part-theirs-abc123.parquet"
    pq.write_table(pa.table({"doc_id": ["y"]}), theirs)
    for path in (out / "dead_letters").iterdir():
        path.unlink()
    (out / "dead_letters").rmdir()
    (out / "dead_letters").symlink_to(elsewhere)
    from pipeline.output.links import LinkedWriteError

    with pytest.raises(LinkedWriteError) as linked:  # issue 55: no write goes through a link under the output
        commit_outcome(cfg, "refused", {"a": invoice("A-1")}, {k: "truncated" for k in "bcd"})
    assert "dead_letters is a symbolic link" in str(linked.value) and "\n" not in str(linked.value)
    assert sorted(p.name for p in elsewhere.iterdir()) == [theirs.name]  # nothing written or swept behind it
    (out / "dead_letters").unlink()
    (out / "dead_letters").mkdir()
    commit_outcome(cfg, "second", {"a": invoice("A-1")}, {k: "truncated" for k in "bcd"})
    assert foreign.exists() and theirs.exists()
    assert not (out / first["files"]["rows"]).exists()  # the superseded commit's own file is swept
    second = json.loads(manifest_path(tmp_path).read_text())
    assert sorted(p.name for p in (out / "rows").iterdir()) == sorted(
        ["part-foreign.parquet", second["files"]["rows"].rsplit("/", 1)[1]])


def test_a_commit_that_died_before_its_manifest_is_swept_by_the_next(tmp_path):
    """Its files carry a commit id recorded under _staging/all/_commits before they were written."""
    cfg = committed(tmp_path)
    out = tmp_path / "out"

    def die(step):
        if step == "files_written":
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        commit_outcome(cfg, "dead", {}, {k: "truncated" for k in DOCS}, hook=die)
    assert len(list((out / "rows").iterdir())) == 2 and list((out / "_staging" / "all" / "_commits").iterdir())
    commit_outcome(cfg, "third", {"a": invoice("A-1")}, {k: "truncated" for k in "bcd"})
    assert len(list((out / "rows").iterdir())) == 1 and len(list((out / "dead_letters").iterdir())) == 1
    assert ids(cfg) == DOCS


# ---------------------------------------------------------------------------------- store failures at commit

FULL_DISK = """
import resource, signal, sys
from pathlib import Path
from tests.fixtures.commits import committer_for, invoice, outcomes
from pipeline.storage import StorageError
loaded, _, _, p, pinput, committer = committer_for(Path(sys.argv[1]), "second")
committer.prepare(p, fresh=True)
committer.stage(p, pinput.units[0].id, outcomes(loaded.contract.hash, {"a": invoice("A-1")},
                                                {k: "truncated" for k in "bcd"}))
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # past the limit a write fails with EFBIG, as a full disk fails
resource.setrlimit(resource.RLIMIT_FSIZE, (600, 600))
try:
    committer.commit(pinput, 0.0, 0)
except StorageError as exc:
    print("StorageError:", exc)
"""


def test_a_write_refused_by_the_os_at_commit_is_one_line_storage_error_and_the_old_commit_stays(tmp_path):
    """The data file's write fails (the kernel's file size limit: EFBIG, as ENOSPC would on a full disk)."""
    cfg = committed(tmp_path)
    done = subprocess.run([sys.executable, "-c", FULL_DISK, str(cfg)], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)
    lines = [x for x in done.stdout.splitlines() if x.startswith("StorageError:")]
    assert done.returncode == 0 and len(lines) == 1, done.stderr[-3000:]
    assert "cannot write" in lines[0] and "part-second-" in lines[0] and "ulimit -f" in lines[0]
    assert ids(cfg) == DOCS  # the first commit is what readers see
    assert read_manifest_of(cfg).run_id == "first"


def test_a_permission_refused_late_in_the_commit_is_one_line_storage_error_and_the_old_commit_stays(tmp_path):
    """Staged, then the rows folder refuses the commit's file: here `rows` is a plain file, so no file can be created
    under it, root included (the store refuses to make the folder). A `rows/` linked elsewhere is refused before any
    write (tests/unit/test_output_links.py)."""
    from pipeline.storage import StorageError
    from tests.fixtures.commits import committer_for, outcomes

    cfg = committed(tmp_path)
    loaded, _, _, p, pinput, committer = committer_for(cfg, "second")
    committer.prepare(p, fresh=True)
    committer.stage(p, pinput.units[0].id, outcomes(loaded.contract.hash, {"a": invoice("A-1")},
                                                    {k: "truncated" for k in "bcd"}))
    rows = tmp_path / "out" / "rows"
    rows.rename(tmp_path / "out" / "rows.kept")
    rows.write_text("not a folder")
    with pytest.raises(StorageError) as refused:
        committer.commit(pinput, 0.0, 0)
    message = str(refused.value)
    assert "\n" not in message and "part-second-" in message and "not writable" not in message
    assert "cannot create the folder of" in message and "File exists" in message, message
    rows.unlink()
    (tmp_path / "out" / "rows.kept").rename(rows)
    assert ids(cfg) == DOCS and read_manifest_of(cfg).run_id == "first"


def read_manifest_of(cfg: Path):
    from pipeline.storage import storage_for

    loaded = load_config(cfg)
    return read_manifest(storage_for(loaded.output_uri), OutputLayout(loaded.output_uri),
                         partition_for(loaded.input_uri, None))


def test_an_existing_output_folder_the_os_will_not_write_in_is_storage_error_before_anything_is_written(tmp_path):
    """`/sys` exists, and no one, root included, may create a file in it (EACCES, or EROFS where it is mounted
    read-only): as in a read-only output."""
    from pipeline.storage import LocalStorage, StorageError

    with pytest.raises(StorageError, match="output folder /sys is not writable"):
        LocalStorage().check_writable("/sys")
    if os.geteuid() != 0:  # root writes into a folder of mode 0555 anyway
        folder = tmp_path / "ro"
        folder.mkdir(mode=0o555)
        with pytest.raises(StorageError, match="is not writable"):
            LocalStorage().check_writable(str(folder))


def test_an_os_error_of_a_local_write_is_one_line_storage_error(tmp_path):
    from pipeline.storage import LocalStorage, StorageError

    (tmp_path / "_runs").write_text("a file where a folder should be")
    with pytest.raises(StorageError) as refused:
        LocalStorage().write_text(str(tmp_path / "_runs" / "r.json"), "{}")
    assert str(tmp_path / "_runs" / "r.json") in str(refused.value) and "\n" not in str(refused.value)


def test_extract_query_verify_exits_8_in_one_line_on_a_file_changed_at_its_size(tmp_path, capsys):
    from pipeline import exit_codes
    from pipeline.cli.main import main

    cfg = committed(tmp_path)
    raw = json.loads(manifest_path(tmp_path).read_text())
    rows = tmp_path / "out" / raw["files"]["rows"]
    data = bytearray(rows.read_bytes())
    start = data.index(b"Acme")
    data[start:start + 4] = b"Acne"
    rows.write_bytes(bytes(data))
    assert main(["query", str(cfg), "SELECT count(*) FROM rows", "--format", "json"]) == 0  # sizes agree
    capsys.readouterr()
    assert main(["query", str(cfg), "SELECT count(*) FROM rows", "--verify"]) == exit_codes.OUTPUT_CORRUPT
    err = own_err(capsys).strip().splitlines()
    assert len(err) == 1 and "content hash" in err[0] and str(rows) in err[0]
