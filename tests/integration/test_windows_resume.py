"""Resume mid-way through a windowed partition: every document is read in windows, the driver is killed once some
units are staged, and the rerun commits each document exactly once, as one row of its merged windows. The
simulated engine (slowed, so there is a moment to kill in): staging and accounting are the subject, not the model."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pytest

from tests.conftest import ROOT, joining, write_config, write_docs
from tests.integration.test_cluster import extraction_actor_pids, last_manifest, running_driver, staged_units, wait_for

pytestmark = pytest.mark.engine
N_DOCS = 12
SENTENCE = "The customer wrote again about the kettle that stopped working after the first week. "


def letters() -> dict[str, str]:
    # about 1,700 simulated tokens each (4 characters a token): past 1,024 − 128, so each is read in windows
    return {f"w-{i:03d}": f"From user{i}@example.com:\n\n" + "\n\n".join([SENTENCE * 6] * 13) for i in range(N_DOCS)}


def test_a_killed_windowed_run_resumes_and_commits_each_document_once(ray_head, tmp_path: Path):
    docs = letters()
    write_docs(tmp_path / "docs.parquet", list(docs), list(docs.values()))
    shutil.copy(ROOT / "tests" / "fixtures" / "models.py", tmp_path / "ticket_models.py")
    output = tmp_path / "out"
    config = write_config(tmp_path, simulated={"tokens_per_s": 40.0, "output_tokens": 40}, name="windows",
                          schema="ticket_models:Ticket", prompt="Extract the support ticket.\n{document}",
                          **{"input.uri": "docs.parquet", "output.uri": str(output), "output.checkpoint_rows": 4,
                             "model.max_tokens": 128, "model.max_model_len": 1024, "input.window_tokens": 512,
                             "workers.batch_size": 4, "workers.batches_in_flight": 1})
    env = joining(ray_head)
    with running_driver(config, env) as proc:
        wait_for(lambda: len(staged_units(output)) >= 1, proc)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    gone = time.monotonic() + 60
    while extraction_actor_pids(ray_head) and time.monotonic() < gone:
        time.sleep(0.5)
    staged_at_kill = len(staged_units(output))
    assert 1 <= staged_at_kill < N_DOCS // 4, "the run finished before it could be killed"
    rerun = subprocess.run([sys.executable, "-m", "pipeline", "run", str(config)], env=env, cwd=ROOT,
                           capture_output=True, text=True, timeout=600)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    manifest = last_manifest(output)
    partition, = manifest["partitions"]
    assert partition["status"] == "committed" and partition["units_resumed"] >= 1
    assert manifest["input_rows"] == N_DOCS == manifest["rows"] + manifest["dead_letters"]
    # Windows per document (issue 56 item 5), of the documents this run read (those staged before the kill are not
    # read again): every one needed more than one window.
    windows = manifest["windows"]
    assert 0 < windows["documents"] <= N_DOCS and windows["more_than_one"] == 1.0
    assert 1 < windows["median"] <= windows["max"], windows
    assert f"windows    per document median {windows['median']:g}, max {windows['max']}; 100.0% of" in rerun.stdout
    con = duckdb.connect()
    rows = con.execute(f"SELECT doc_id, _windows, cardinality(_window_of) FROM "
                       f"read_parquet('{output}/rows/**/*.parquet') ORDER BY doc_id").fetchall()
    dead = con.execute(f"SELECT doc_id FROM read_parquet('{output}/dead_letters/**/*.parquet')").fetchall() \
        if list(output.glob("dead_letters/**/*.parquet")) else []
    ids = sorted([r[0] for r in rows] + [d[0] for d in dead])
    assert ids == sorted(docs)  # each document once: no window became a row of its own
    assert rows and all(windows > 1 and leaves > 0 for _, windows, leaves in rows), rows
