"""One writer per output: the lease, locally and on S3 (a moto server, which honours IfNoneMatch/IfMatch).

Two writers on one output: a process holding the lease (the same `Lease` a run takes), then `extract run`
and `extract retry` on the same output, refused at once with exit 5 and one line naming the holder and the
expiry. After the holder is killed its lease is taken over once it has expired (the clock is passed in, so
nothing waits).
"""

from __future__ import annotations

import signal
import subprocess
import sys

import pytest

from pipeline import exit_codes
from pipeline.lease import LeaseHeldError, LeaseLostError, LeaseRecord
from tests.conftest import ROOT, run_cli, write_config, write_docs

# The lease tests of tests/unit/test_lease.py, on S3: collected here again, with `where` a bucket on a moto server.
from tests.unit.test_lease import (  # noqa: F401 (collected by pytest from this module)
    lease_for,
    output_at,
    put_record,
    record_text,
    test_a_broken_lease_stops_its_old_holder_at_its_next_publish_and_generations_rise,
    test_a_holder_of_this_host_in_another_pid_namespace_is_not_taken_over,
    test_a_second_writer_is_refused_naming_the_holder,
    test_a_writer_whose_clock_runs_400_s_ahead_is_refused,
    test_an_unreadable_lease_record_of_a_live_lease_is_one_line_naming_the_file_and_how_to_break_it,
)


@pytest.fixture(params=["s3"])
def where(request, tmp_path):
    return output_at(request, tmp_path)


HOLDER = """
import sys, time
from pipeline.lease import Lease
from pipeline.output.layout import OutputLayout
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
            assert "nightly-run-1" in line and record.host in line and f"pid {holder.pid}" in line
            assert "Traceback" not in second.stderr
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    # The holder died without releasing: the kernel let go of its lock, so the next writer takes the lease at
    # once: a rerun after a killed driver does not wait out the lease.
    assert (tmp_path / "out" / "_lease.json").exists()
    taken = lease_for((output, None), "run-2").acquire()
    assert taken.record.holder == "run-2"
    taken.release()




def test_an_s3_lease_expires_by_the_stores_clock_and_is_taken_over_once(where):
    """No renewal for longer than the ttl, by the store's `Date` against the object's `LastModified` (1 s
    resolution: the test waits about 3 s). The old holder's next publish is refused."""
    import time

    first = lease_for(where, "run-1", ttl=1).acquire()
    with pytest.raises(LeaseHeldError):
        lease_for(where, "run-2", ttl=1).acquire()
    for _ in range(20):
        time.sleep(0.5)
        try:
            second = lease_for(where, "run-2", ttl=1).acquire()
            break
        except LeaseHeldError:
            continue
    assert second.generation == first.generation + 1
    with pytest.raises(LeaseLostError):
        first.ensure()
    first.release()
    assert LeaseRecord.from_json(record_text(where)).holder == "run-2"


def test_an_unreadable_s3_lease_record_older_than_the_ttl_is_taken_over(where):
    lease_for(where, "run-1", ttl=1).acquire()
    put_record(where, "")
    import time

    for _ in range(20):
        time.sleep(0.5)
        try:
            taken = lease_for(where, "run-2", ttl=1).acquire()
            break
        except LeaseHeldError as exc:
            assert "unreadable" in str(exc)
    assert LeaseRecord.from_json(record_text(where)).holder == "run-2"
    taken.release()
