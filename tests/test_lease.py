"""One writer per output: the lease, locally and on S3 (a moto server, which honours IfNoneMatch/IfMatch).

Two writers on one output: a process holding the lease (the same `Lease` a run takes), then `extract run`
and `extract retry` on the same output, refused at once with exit 5 and one line naming the holder and the
expiry. After the holder is killed its lease is taken over once it has expired (the clock is passed in, so
nothing waits).
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
import uuid

import pytest

from pipeline import exit_codes
from pipeline.lease import Lease, LeaseHeldError, LeaseLostError, LeaseRecord
from pipeline.partition import OutputLayout
from pipeline.storage import storage_for
from tests.conftest import ROOT, run_cli, s3_client, write_config, write_docs


@pytest.fixture(params=["local", "s3"])
def where(request, tmp_path):
    if request.param == "local":
        return str(tmp_path / "out"), None
    endpoint = request.getfixturevalue("s3_endpoint")
    bucket = f"lease-{uuid.uuid4().hex[:8]}"
    s3_client(endpoint).create_bucket(Bucket=bucket)
    return f"s3://{bucket}/out", endpoint


def lease_for(where, holder: str, clock=time.time, ttl: float = 60) -> Lease:
    from pipeline.storage import S3Settings

    root, endpoint = where
    storage = storage_for(root, S3Settings(endpoint_url=endpoint, region="us-east-1") if endpoint else None)
    if not endpoint:
        storage.check_writable(root)
    return Lease(storage, OutputLayout(root).lease(), holder, ttl_s=ttl, clock=clock)


def test_a_second_writer_is_refused_naming_the_holder_and_the_expiry(where):
    first = lease_for(where, "run-1").acquire()
    with pytest.raises(LeaseHeldError) as refused:
        lease_for(where, "run-2").acquire()
    message = str(refused.value)
    assert "run-1" in message and first.record.host in message and first.record.expires_at in message
    assert "\n" not in message
    first.release()
    lease_for(where, "run-2").acquire().release()  # released: free again


def test_an_expired_lease_is_taken_over_once_and_its_old_holder_stops_publishing(where):
    now = time.time()
    first = lease_for(where, "run-1", clock=lambda: now).acquire()
    later = lambda: now + 61  # noqa: E731 - past the first lease's expiry
    second = lease_for(where, "run-2", clock=later).acquire()
    assert second.record.holder == "run-2"
    with pytest.raises(LeaseHeldError, match="run-2"):
        lease_for(where, "run-3", clock=later).acquire()
    first.renew()  # the old holder wakes up: its renewal finds the lease taken
    with pytest.raises(LeaseLostError):
        first.ensure()
    first.release()  # must not delete the new holder's lease
    with pytest.raises(LeaseHeldError, match="run-2"):
        lease_for(where, "run-3", clock=later).acquire()
    second.release()


def test_renewal_moves_the_expiry_and_keeps_the_lease(where):
    now = [time.time()]
    lease = lease_for(where, "run-1", clock=lambda: now[0]).acquire()
    first_expiry = lease.record.expires_unix
    now[0] += 30
    lease.renew()
    lease.ensure()
    assert lease.record.expires_unix == first_expiry + 30
    with pytest.raises(LeaseHeldError):  # 61 s after the first expiry would have passed, it is renewed
        lease_for(where, "run-2", clock=lambda: first_expiry + 1).acquire()
    lease.release()


HOLDER = """
import sys, time
from pipeline.lease import Lease
from pipeline.partition import OutputLayout
from pipeline.storage import storage_for
storage = storage_for(sys.argv[1])
storage.check_writable(sys.argv[1])
with Lease(storage, OutputLayout(sys.argv[1]).lease(), "nightly-run-1", ttl_s=3600):
    print("held", flush=True)
    time.sleep(3600)
"""


def test_two_writers_on_one_output_the_second_exits_5_and_the_dead_holders_lease_is_taken_over(tmp_path, cli_env):
    docs = write_docs(tmp_path / "docs.parquet", ["a"], ["text"])
    cfg = write_config(tmp_path, **{"input.uri": str(docs)})
    output = str(tmp_path / "out")
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, output], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        for line in holder.stdout:  # its log lines come first
            if line.strip() == "held":
                break
        for args in (["run", str(cfg)], ["retry", str(cfg), "--reason", "truncated"]):
            second = run_cli(args, cli_env)
            assert second.returncode == exit_codes.OUTPUT_LEASED, second.stderr[-2000:]
            (line,) = [x for x in second.stderr.splitlines() if x.startswith("error:")]
            record = LeaseRecord.from_json((tmp_path / "out" / "_lease.json").read_text())
            assert "nightly-run-1" in line and record.expires_at in line and record.host in line
            assert "Traceback" not in second.stderr
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    # The holder died without releasing. Its host is this one and its pid is gone, so the next writer takes the
    # lease at once: a rerun after a killed driver does not wait out the lease.
    assert (tmp_path / "out" / "_lease.json").exists()
    taken = lease_for((output, None), "run-2").acquire()
    assert taken.record.holder == "run-2"
    taken.release()


def test_a_holder_on_another_host_keeps_its_lease_until_it_expires(tmp_path):
    """Whether a process on another host lives cannot be seen from here: only the expiry frees its lease."""
    output = str(tmp_path / "out")
    first = lease_for((output, None), "run-1").acquire()
    path = tmp_path / "out" / "_lease.json"
    record = json.loads(path.read_text())
    path.write_text(json.dumps({**record, "host": "elsewhere", "pid": 999999}))
    with pytest.raises(LeaseHeldError, match="on elsewhere"):
        lease_for((output, None), "run-2").acquire()
    taken = lease_for((output, None), "run-2", clock=lambda: record["expires_unix"] + 1).acquire()
    assert taken.record.holder == "run-2"
    taken.release()
    del first


def test_a_reused_pid_is_not_the_holder(tmp_path):
    """This process's pid, with a lease taken before it started: the pid was reused, the holder is dead."""
    output = str(tmp_path / "out")
    lease_for((output, None), "run-1").acquire()
    path = tmp_path / "out" / "_lease.json"
    record = json.loads(path.read_text())
    path.write_text(json.dumps({**record, "acquired_at": "2020-01-01T00:00:00+00:00"}))
    assert lease_for((output, None), "run-2").acquire().record.holder == "run-2"
