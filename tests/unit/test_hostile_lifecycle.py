"""What a dead writer leaves behind (issue 19, item 5): temp files, multipart uploads, `running` records, Ray
processes; SIGTERM into a failed record; one file mode. Real files, a real moto S3 server, real processes."""

from __future__ import annotations

import json
import os
import signal
import stat
import time

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipeline import lifecycle
from pipeline.output.layout import OutputLayout
from pipeline.output.manifest import RunManifest
from pipeline.storage import FILE_MODE, LocalStorage


def age(path, seconds: float) -> None:
    old = time.time() - seconds
    os.utime(path, (old, old))


def test_a_dead_writers_temp_files_are_deleted_and_nothing_else(tmp_path):
    rows = tmp_path / "rows" / "dt=2026-11-01"
    rows.mkdir(parents=True)
    stale = rows / ".part-0.parquet.4242.tmp"
    fresh = tmp_path / "_lease" / ".lease.json.ab12.tmp"  # e.g. our own lease renewal, in flight
    data = rows / "part-abc.parquet"
    for path in (stale, fresh, data):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("x")
    age(stale, 3600)
    age(data, 3600)
    assert lifecycle.clean_temp_files(LocalStorage(), str(tmp_path)) == 1
    assert not stale.exists() and fresh.exists() and data.exists()


def test_records_of_dead_runs_are_marked_failed_and_ours_is_written_running(tmp_path):
    layout = OutputLayout(str(tmp_path))
    storage = LocalStorage()
    dead = RunManifest(run_id="dead", name="j", config_path="c", config_hash="h", status="running", started_at="t")
    done = RunManifest(run_id="done", name="j", config_path="c", config_hash="h", status="committed", started_at="t")
    for record in (dead, done):
        storage.write_text(layout.run_manifest(record.run_id), record.to_json())
    ours = RunManifest(run_id="ours", name="j", config_path="c", config_hash="h", status="running", started_at="t")
    lifecycle.begin(storage, layout, ours)
    read = {r: json.loads((tmp_path / "_runs" / f"{r}.json").read_text()) for r in ("dead", "done", "ours")}
    assert read["dead"]["status"] == "failed" and "driver died" in read["dead"]["error"]
    assert read["done"]["status"] == "committed" and read["ours"]["status"] == "running"


def test_sigterm_unwinds_so_the_run_can_write_its_failed_record():
    record = {"status": "running"}
    with pytest.raises(lifecycle.Terminated):
        with lifecycle.terminating():
            try:
                os.kill(os.getpid(), signal.SIGTERM)
                time.sleep(5)
            except BaseException:
                record["status"] = "failed"
                raise
    assert record["status"] == "failed"
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL or callable(signal.getsignal(signal.SIGTERM))


def test_manifests_and_data_files_get_one_mode(tmp_path):
    storage = LocalStorage()
    storage.write_text(str(tmp_path / "manifest.json"), "{}")
    pq.write_table(pa.table({"a": [1]}), tmp_path / "part.parquet")
    modes = {stat.S_IMODE((tmp_path / n).stat().st_mode) for n in ("manifest.json", "part.parquet")}
    assert modes == {FILE_MODE}


