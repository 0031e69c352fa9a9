"""One writer per output, fenced: the lease locally (an flock the kernel releases) and on S3 (a moto server, which
honours If-None-Match/If-Match; the same tests are collected again from tests/integration/test_lease.py).

Each case of issue 23 item 3: a writer whose clock runs 400 s ahead is refused; a holder whose lease was broken
publishes nothing from then on (checked against the store at its next publish, not at its next renewal); a
publish under a stale generation is refused; a holder of this host in another pid namespace is not taken over;
an empty, corrupt or wrongly typed lease record is one line naming the file and how to break it.
"""

from __future__ import annotations

import json
import os
import time
import uuid

import pytest

from pipeline.lease import Lease, LeaseHeldError, LeaseLostError, LeaseRecord
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


def storage_at(where):
    from pipeline.storage import S3Settings

    root, endpoint = where
    return storage_for(root, S3Settings(endpoint_url=endpoint, region="us-east-1") if endpoint else None)


def lease_for(where, holder: str, clock=time.time, ttl: float = 60) -> Lease:
    root, endpoint = where
    storage = storage_at(where)
    if not endpoint:
        storage.check_writable(root)
    return Lease(storage, OutputLayout(root).lease(), holder, ttl_s=ttl, clock=clock)


def lease_uri(where) -> str:
    return OutputLayout(where[0]).lease()


def put_record(where, text: str) -> None:
    """Overwrite the lease record in place (locally the same file, so a holder's lock stays)."""
    root, endpoint = where
    if endpoint:
        bucket, key = lease_uri(where)[len("s3://"):].split("/", 1)
        s3_client(endpoint).put_object(Bucket=bucket, Key=key, Body=text.encode())
    else:
        with open(lease_uri(where), "w") as handle:
            handle.write(text)


def break_lease(where) -> None:
    """What the one-line message tells an operator to do: delete the lease file."""
    root, endpoint = where
    if endpoint:
        bucket, key = lease_uri(where)[len("s3://"):].split("/", 1)
        s3_client(endpoint).delete_object(Bucket=bucket, Key=key)
    else:
        os.unlink(lease_uri(where))


def record_text(where) -> str:
    return storage_at(where).read_text(lease_uri(where))


def test_a_second_writer_is_refused_naming_the_holder(where):
    first = lease_for(where, "run-1").acquire()
    with pytest.raises(LeaseHeldError) as refused:
        lease_for(where, "run-2").acquire()
    message = str(refused.value)
    assert "run-1" in message and first.record.host in message and f"pid {os.getpid()}" in message
    assert "\n" not in message
    first.release()
    lease_for(where, "run-2").acquire().release()  # released: free again


def test_a_writer_whose_clock_runs_400_s_ahead_is_refused(where):
    """Its clock is not the lease's: the store's is (S3), or the kernel's lock (local)."""
    first = lease_for(where, "run-1").acquire()
    with pytest.raises(LeaseHeldError, match="run-1"):
        lease_for(where, "run-2", clock=lambda: time.time() + 400).acquire()
    first.ensure()
    first.release()


def test_a_broken_lease_stops_its_old_holder_at_its_next_publish_and_generations_rise(where):
    first = lease_for(where, "run-1").acquire()
    assert first.ensure() == first.generation
    break_lease(where)
    second = lease_for(where, "run-2").acquire()  # its generation: above any published (see the stale test)
    with pytest.raises(LeaseLostError):  # at once: the store is asked, not a flag set by a later renewal
        first.ensure()
    first.release()  # must not touch the new holder's lease
    with pytest.raises(LeaseHeldError, match="run-2"):
        lease_for(where, "run-3").acquire()
    generation = second.ensure()
    assert generation == second.generation
    second.release()
    third = lease_for(where, "run-3").acquire()  # the record survives a release: the generation goes on rising
    assert third.generation == generation + 1
    third.release()


def test_a_holder_of_this_host_in_another_pid_namespace_is_not_taken_over(where):
    """Same hostname, its pid dead here: in another pid namespace (a container) it may well be running."""
    first = lease_for(where, "run-1").acquire()
    record = json.loads(record_text(where))
    put_record(where, json.dumps({**record, "pid": 2 ** 22 + 17, "pidns": "pid:[4026531999]"}))
    with pytest.raises(LeaseHeldError, match="run-1"):
        lease_for(where, "run-2").acquire()
    first.release()


@pytest.mark.parametrize("text", ["", "{not json", "[]", "expires_unix"])
def test_an_unreadable_lease_record_of_a_live_lease_is_one_line_naming_the_file_and_how_to_break_it(where, text):
    first = lease_for(where, "run-1").acquire()
    if text == "expires_unix":  # a record whose expiry is a string
        text = json.dumps({**json.loads(record_text(where)), "expires_unix": "1764547200"})
    put_record(where, text)
    with pytest.raises(LeaseHeldError) as refused:
        lease_for(where, "run-2").acquire()
    message = str(refused.value)
    assert "\n" not in message and lease_uri(where) in message and "unreadable" in message
    assert f"rm {lease_uri(where)}" in message
    first.release()


def test_an_unreadable_lease_record_nobody_holds_does_not_block_the_output(tmp_path):
    """Locally the lock, not the record, says whether a writer lives: an empty file left by a crash is taken."""
    where = (str(tmp_path / "out"), None)
    os.makedirs(where[0])
    for text in ("", "{not json", json.dumps({"expires_unix": "soon"})):
        put_record(where, text)
        taken = lease_for(where, "run-2").acquire()
        assert LeaseRecord.from_json(record_text(where)).holder == "run-2"
        taken.release()


def test_a_publish_under_a_stale_generation_is_refused_and_a_new_lease_starts_above_the_published_one(tmp_path):
    """Fencing at the publish: a manifest published by generation g+1 is not overwritten by a writer of g. A
    lease taken after the record was deleted starts above every generation the manifests record."""
    from pipeline.output.commit import publish
    from pipeline.output.manifest import read_manifest
    from tests.fixtures.commits import DOCS, commit_outcome, committer_for, invoice
    from tests.unit.test_output_integrity import committed

    cfg = committed(tmp_path)
    loaded, storage, layout, p, _, _ = committer_for(cfg, "unused")
    where = (loaded.output_uri, None)
    old = lease_for(where, "run-1").acquire()
    commit_outcome(cfg, "second", {"a": invoice("A-1")}, {k: "truncated" for k in "bcd"}, guard=old.ensure)
    stale = read_manifest(storage, layout, p)
    assert stale.lease_generation == old.generation
    break_lease(where)  # the old holder stalls; its lease is broken and taken
    new = lease_for(where, "run-2").acquire()
    assert new.generation > old.generation  # above every published generation
    commit_outcome(cfg, "third", {"a": invoice("A-1")}, {k: "truncated" for k in "bcd"}, guard=new.ensure)
    published = read_manifest(storage, layout, p)
    assert published.lease_generation == new.generation
    with pytest.raises(LeaseLostError, match="stale"):  # the old holder wakes past its check and publishes
        publish(storage, layout, p, stale, generation=old.generation)
    assert read_manifest(storage, layout, p).commit_id == published.commit_id
    with pytest.raises(LeaseLostError):
        commit_outcome(cfg, "fourth", {}, {k: "truncated" for k in DOCS}, guard=old.ensure)
    assert read_manifest(storage, layout, p).commit_id == published.commit_id
    new.release()
    old.release()
    break_lease(where)
    assert lease_for(where, "run-3").acquire().generation > published.lease_generation
