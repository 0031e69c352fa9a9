"""What a dead writer leaves behind (issue 19, item 5): temp files, multipart uploads, `running` records, Ray
processes; SIGTERM into a failed record; one file mode. Real files, a real moto S3 server, real processes."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import time
import uuid

import psutil
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipeline import lifecycle
from pipeline.manifest import RunManifest
from pipeline.partition import OutputLayout
from pipeline.storage import FILE_MODE, LocalStorage, S3Settings, S3Storage
from tests.conftest import ROOT, s3_client


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


def test_a_killed_writers_multipart_upload_is_aborted_on_s3(s3_endpoint):
    bucket = f"mpu-{uuid.uuid4().hex[:8]}"
    client = s3_client(s3_endpoint)
    client.create_bucket(Bucket=bucket)
    mine = client.create_multipart_upload(Bucket=bucket, Key="out/rows/part-x.parquet")["UploadId"]
    client.upload_part(Bucket=bucket, Key="out/rows/part-x.parquet", UploadId=mine, PartNumber=1, Body=b"x" * 100)
    other = client.create_multipart_upload(Bucket=bucket, Key="elsewhere/part.parquet")["UploadId"]
    storage = S3Storage(S3Settings(endpoint_url=s3_endpoint, region="us-east-1"))
    assert lifecycle.abort_stale_uploads(storage, f"s3://{bucket}/out", older_than_s=-60) == 1
    left = [u["UploadId"] for u in client.list_multipart_uploads(Bucket=bucket).get("Uploads", [])]
    assert left == [other]


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


DRIVER = """
import os, subprocess, sys
sys.path.insert(0, {root!r})
from pipeline import lifecycle
child = subprocess.Popen(["sleep", "300"], start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
lifecycle.record_ray_processes(session_dir=None)
print(child.pid, flush=True)
os._exit(0)  # a driver killed without cleaning up: its child lives on
"""


@pytest.mark.slow
def test_processes_recorded_by_a_dead_driver_are_stopped_and_a_live_drivers_are_not(tmp_path, monkeypatch):
    monkeypatch.setenv("EXTRACT_CACHE_DIR", str(tmp_path))
    out = subprocess.run([sys.executable, "-c", DRIVER.format(root=str(ROOT))], capture_output=True, text=True,
                         env=dict(os.environ), timeout=60)
    orphan = psutil.Process(int(out.stdout.split()[0]))
    alive = tmp_path / "ray-drivers" / "alive.json"
    me = psutil.Process(os.getpid())
    sleeper = subprocess.Popen(["sleep", "300"])
    alive.write_text(json.dumps({"driver": {"pid": me.pid, "started": me.create_time()}, "session_dir": None,
                                 "processes": [{"pid": sleeper.pid,
                                                "started": psutil.Process(sleeper.pid).create_time()}]}))
    try:
        assert lifecycle.stop_orphaned_ray() == 1
        orphan.wait(timeout=10)
        assert not orphan.is_running() or orphan.status() == psutil.STATUS_ZOMBIE
        assert sleeper.poll() is None and alive.exists()
    finally:
        sleeper.kill()
        if orphan.is_running():
            orphan.kill()
