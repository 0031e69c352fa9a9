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
from pipeline.lease import LeaseRecord
from tests.conftest import ROOT, run_cli, write_config, write_docs

# The lease tests of tests/unit/test_lease.py, on S3: collected here again, with `where` a bucket on a moto server.
from tests.unit.test_lease import (  # noqa: F401 (collected by pytest from this module)
    lease_for,
    output_at,
    test_a_second_writer_is_refused_naming_the_holder_and_the_expiry,
    test_an_expired_lease_is_taken_over_once_and_its_old_holder_stops_publishing,
    test_renewal_moves_the_expiry_and_keeps_the_lease,
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


