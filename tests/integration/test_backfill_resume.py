"""Issue 57 item 2, at a small scale: a 12-day backfill on the simulated engine whose driver is SIGKILLed mid-way,
then resumed. Every document is committed once; no partition committed before the kill is committed again, and
no document staged or committed before it is generated again."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import duckdb
import pytest

from pipeline.tools.simbench import driver_command, make_corpus, staged_rows, write_config
from tests.conftest import ROOT, joining
from tests.integration.test_cluster import extraction_actor_pids

pytestmark = pytest.mark.engine

# 12 days (30 until the suite was cut to 10 minutes): the kill comes after a third of them, so days committed before
# it, the day in flight and days after it are all there, as at 30.
DAYS, PER_DAY = 12, 8
# About 0.3 s a batch of 4, one batch at a time: the backfill takes long enough to be killed between two days.
SIMULATION = {"tokens_per_s": 100.0, "output_tokens": 30}


def committed(output: Path) -> dict[str, str]:
    """Partition → the commit id its manifest names."""
    found = {}
    for path in output.rglob("manifest.json"):
        manifest = json.loads(path.read_text())
        if "commit_id" in manifest:
            found[manifest["partition"]] = manifest["commit_id"]
    return found


def test_a_backfill_killed_mid_way_resumes_without_redoing_or_losing_a_document(ray_head, tmp_path):
    corpus = tmp_path / "corpus"
    info = make_corpus(corpus, DAYS * PER_DAY, DAYS)
    output = tmp_path / "out"
    config = write_config(tmp_path / "extract.yaml", corpus, info, output, actors=1, batch_size=4, checkpoint_rows=4,
                          simulated=SIMULATION, batches_in_flight=1)
    env = joining(ray_head)
    proc = subprocess.Popen(driver_command(config, info), env=env, cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 600
        while len(committed(output)) < DAYS // 3:
            assert proc.poll() is None, f"driver exited early ({proc.returncode}): {proc.stdout.read()[-3000:]}"
            assert time.monotonic() < deadline, "timed out waiting for the first days"
            time.sleep(0.2)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)
    gone = time.monotonic() + 60  # Ray ends a dead driver's actors; one may stage the batch it was finishing
    while extraction_actor_pids(ray_head) and time.monotonic() < gone:
        time.sleep(0.5)
    before = committed(output)
    kept = staged_rows(output)  # committed days, and the batches staged of the day in flight
    assert DAYS // 3 <= len(before) < DAYS, "the backfill finished before it could be killed"

    rerun = subprocess.run(driver_command(config, info), env=env, cwd=ROOT, capture_output=True, text=True,
                           timeout=900)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    runs = [json.loads(p.read_text()) for p in (output / "_runs").glob("*.json")]
    manifest = max(runs, key=lambda m: m["started_at"])
    status = {p["partition"]: p["status"] for p in manifest["partitions"]}
    assert len(status) == DAYS
    assert {day for day, s in status.items() if s == "skipped"} == set(before)
    assert all(s == "committed" for day, s in status.items() if day not in before)
    after = committed(output)
    assert len(after) == DAYS and all(after[day] == commit for day, commit in before.items())  # not recommitted
    assert sum(a["documents"] for a in manifest["actors"]) == DAYS * PER_DAY - kept  # nothing kept generated again
    con = duckdb.connect()
    every = (f"SELECT doc_id FROM read_parquet('{output}/rows/**/*.parquet') UNION ALL "
             f"SELECT doc_id FROM read_parquet('{output}/dead_letters/**/*.parquet')")
    total, distinct = con.execute(f"SELECT count(*), count(DISTINCT doc_id) FROM ({every})").fetchone()
    assert (total, distinct) == (DAYS * PER_DAY, DAYS * PER_DAY)
    print(f"\nbackfill resume: killed with {len(before)}/{DAYS} days committed and {kept} documents kept; the rerun "
          f"generated {DAYS * PER_DAY - kept} and committed {DAYS - len(before)} days")
