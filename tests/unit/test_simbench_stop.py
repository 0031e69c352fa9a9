"""`extract bench --simulate` starts its own loopback Ray cluster. A SIGTERM to the bench (`kill`, a scheduler's
stop) must still stop that cluster: before, the default handler ended the process and left the cluster's head,
raylet and dashboard running. The cluster here is a stand-in that records `stop`; the cell sends the signal."""

from __future__ import annotations

import os
import signal
import time

import pytest

from pipeline.lifecycle import Terminated
from pipeline.tools import simbench


class _Cluster:
    stopped = 0

    def __init__(self, cpus: list[int]) -> None:
        self.cpus = cpus

    def stop(self) -> None:
        type(self).stopped += 1


def test_a_sigterm_mid_cell_stops_the_benchs_cluster(monkeypatch, tmp_path) -> None:
    def cell(*args, **kwargs):  # the bench is killed while a cell runs
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(5)  # the signal arrives first
        raise AssertionError("SIGTERM did not interrupt the cell")

    monkeypatch.setattr(simbench, "LocalCluster", _Cluster)
    monkeypatch.setattr(simbench, "run_cell", cell)
    monkeypatch.setattr(simbench, "machine", dict)
    previous = signal.getsignal(signal.SIGTERM)
    with pytest.raises(Terminated):
        simbench.run_simulated_bench(tmp_path, {"docs": [10], "actors": [1], "partitions": [1]}, ceilings=False)
    assert _Cluster.stopped == 1
    assert signal.getsignal(signal.SIGTERM) is previous  # the bench's handler is gone after it
