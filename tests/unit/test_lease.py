"""One writer per output: the lease, locally and on S3 (a moto server, which honours IfNoneMatch/IfMatch).

Two writers on one output: a process holding the lease (the same `Lease` a run takes), then `extract run`
and `extract retry` on the same output, refused at once with exit 5 and one line naming the holder and the
expiry. After the holder is killed its lease is taken over once it has expired (the clock is passed in, so
nothing waits).
"""

from __future__ import annotations

import json
import time
import uuid

import pytest

from pipeline.lease import Lease, LeaseHeldError, LeaseLostError
from pipeline.output.layout import OutputLayout
from pipeline.storage import storage_for
from tests.conftest import s3_client


def output_at(request, tmp_path) -> tuple[str, str | None]:
    """(root, S3 endpoint or None) of an output in a folder or, for `request.param == "s3"`, a fresh bucket."""
    if request.param == "local":
        return str(tmp_path / "out"), None
    endpoint = request.getfixturevalue("s3_endpoint")
    bucket = f"lease-{uuid.uuid4().hex[:8]}"
    s3_client(endpoint).create_bucket(Bucket=bucket)
    return f"s3://{bucket}/out", endpoint


@pytest.fixture(params=["local"])  # the same tests on S3 (a moto server): tests/integration/test_lease.py
def where(request, tmp_path):
    return output_at(request, tmp_path)


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
