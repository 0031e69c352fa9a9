"""Issue 55: no symbolic link is followed under an output. A link planted as `_staging`, `_staging/all`, the lease
file, a manifest or a run record, or as the report's folder, is refused in one line, and what it points at is left
as it was: exit 6 where a write would follow it, exit 8 where a read would."""

from __future__ import annotations

import pytest

from pipeline import exit_codes
from pipeline.cli.main import main
from pipeline.lease import Lease
from pipeline.output.links import LinkedReadError, LinkedWriteError
from pipeline.storage import StorageError, storage_for
from tests.fixtures.commits import commit_outcome, invoice
from tests.unit.test_output_integrity import committed


def victim(tmp_path):
    """A folder outside the output, with a file someone cares about."""
    folder = tmp_path / "precious"
    folder.mkdir()
    (folder / "keep.txt").write_text("mine")
    return folder


@pytest.mark.parametrize("linked", ["_staging", "_staging/all"])
def test_a_linked_staging_folder_is_refused_and_its_target_kept(tmp_path, linked):
    cfg = committed(tmp_path)
    out, target = tmp_path / "out", victim(tmp_path)
    link = out / linked
    if link.exists():
        import shutil

        shutil.rmtree(link)
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(target)
    with pytest.raises(LinkedWriteError, match="symbolic link"):
        commit_outcome(cfg, "second", {"a": invoice("A-1")}, {k: "truncated" for k in "bcd"})
    assert (target / "keep.txt").read_text() == "mine" and sorted(p.name for p in target.iterdir()) == ["keep.txt"]


def test_a_linked_lease_file_is_refused_and_its_target_not_truncated(tmp_path):
    out, target = tmp_path / "out", victim(tmp_path)
    out.mkdir()
    (out / "_lease.json").symlink_to(target / "keep.txt")
    with pytest.raises(StorageError, match="symbolic link"):
        Lease(storage_for(str(out)), str(out / "_lease.json"), "run-1").acquire()
    assert (target / "keep.txt").read_text() == "mine"


def test_a_run_over_a_linked_staging_is_exit_6_in_one_line(tmp_path, capsys):
    cfg = committed(tmp_path)
    target = victim(tmp_path)
    import shutil

    shutil.rmtree(tmp_path / "out" / "_staging", ignore_errors=True)
    (tmp_path / "out" / "_staging").symlink_to(target)
    assert main(["run", str(cfg), "--force"]) == exit_codes.STORAGE
    err = [line for line in capsys.readouterr().err.strip().splitlines() if line.startswith("error:")]
    assert len(err) == 1 and "symbolic link" in err[0]
    assert sorted(p.name for p in target.iterdir()) == ["keep.txt"]


@pytest.mark.parametrize("linked", ["_partitions/all/manifest.json", "_partitions", "_runs"])
def test_reading_through_a_linked_manifest_or_record_is_exit_8(tmp_path, capsys, linked):
    cfg = committed(tmp_path)
    out = tmp_path / "out"
    (out / "_runs").mkdir(exist_ok=True)
    (out / "_runs" / "r.json").write_text('{"run_id": "r", "name": "x", "config_path": "", "config_hash": "",'
                                          ' "status": "committed", "started_at": "2026-01-01"}')
    real = out / linked
    moved = tmp_path / "moved"
    real.rename(moved)
    real.symlink_to(moved)
    command = ["report", str(out), "--out", str(tmp_path / "pages")] if linked == "_runs" else \
        ["query", str(out), "SELECT count(*) FROM rows"]
    assert main(command) == exit_codes.OUTPUT_CORRUPT
    err = [line for line in capsys.readouterr().err.strip().splitlines() if line.startswith("error:")]
    assert len(err) == 1 and "symbolic link" in err[0]
    assert cfg.exists()


def test_a_linked_report_folder_is_refused(tmp_path):
    from pipeline.tools.report import write_report
    from tests.unit.test_report import write_output

    root = write_output(tmp_path / "output")
    target = victim(tmp_path)
    pages = tmp_path / "pages"
    pages.symlink_to(target)
    with pytest.raises(LinkedWriteError):
        write_report(str(root), pages, "r2")
    assert sorted(p.name for p in target.iterdir()) == ["keep.txt"]


def test_a_read_error_is_corrupt_and_a_write_error_is_storage():
    from pipeline.cli.main import ONE_LINE
    from pipeline.output.manifest import OutputCorruptError

    assert issubclass(LinkedWriteError, StorageError) and not issubclass(LinkedWriteError, OutputCorruptError)
    assert next(code for kinds, code in ONE_LINE if issubclass(LinkedReadError, kinds)) == exit_codes.OUTPUT_CORRUPT
