"""What a dead writer leaves behind (issue 19, item 5): temp files, multipart uploads, `running` records, Ray
processes; SIGTERM into a failed record; one file mode. Real files, a real moto S3 server, real processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid

import psutil
import pytest

from pipeline import lifecycle
from pipeline.storage import S3Settings, S3Storage
from tests.conftest import ROOT, s3_client


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
