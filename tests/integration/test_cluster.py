"""On a real `ray start --head` cluster: SIGKILL the driver mid-run and rerun; SIGKILL an extraction
actor mid-batch and let Ray restart it; SIGKILL it with no restarts left (one line, exit 3). Afterwards DuckDB
checks input == rows + dead letters, ids unique.

All of them run the simulated engine: their subject is the driver, Ray's restarts and the cluster. A vLLM engine
that dies, and its replacement on a fresh engine in the restarted actor, are test_engine_failures.py's. A job
submitted through the Ray Jobs API (`extract submit`) is test_multinode.py's, on its cluster's dashboard."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import psutil
import pytest

from pipeline import exit_codes
from pipeline.tools.simbench import staged_rows
from tests.conftest import ROOT, joining, processes_of_cluster, write_config, write_docs

pytestmark = pytest.mark.engine

N_DOCS = 16


def tickets(n: int) -> dict[str, str]:
    products = ["Kettle", "Router", "Lamp", "Scanner", "Tablet", "Printer"]
    return {f"r-{i:03d}": f"From user{i}@example.com: my {products[i % 6]} stopped working on day {i}. "
                          f"{'Urgent!' if i % 3 == 0 else 'Please help.'}" for i in range(n)}


@pytest.fixture(scope="module")
def resume_dir(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("resume")
    docs = tickets(N_DOCS)
    write_docs(folder / "docs.parquet", list(docs), list(docs.values()))
    shutil.copy(ROOT / "tests" / "fixtures" / "models.py", folder / "ticket_models.py")
    return folder


# The tests here are about the driver, the actors and the cluster, not the model: they run the simulated engine
# (workers/simulated.py), slowed to about 2 s a batch so there is a moment to kill in.
SLOW_SIMULATION = {"tokens_per_s": 20.0, "output_tokens": 40}


def config_for(folder: Path, output: str, simulated: dict | bool = False, **settings) -> Path:
    return write_config(
        folder, simulated=simulated, name="resume", schema="ticket_models:Ticket",
        prompt="Extract the support ticket from this message.\n{document}",
        **{"input.uri": "docs.parquet", "output.uri": output, "output.checkpoint_rows": 4,
           "model.max_tokens": 128, "model.max_model_len": 1024, "model.engine_kwargs": {"enforce_eager": True},
           # one batch at a time, so units land one by one and there is a moment to kill in (with all four
           # batches in flight they finish together, and the run can commit between two looks)
           "workers.batch_size": 4, "workers.batches_in_flight": 1, **settings},
    )


@contextlib.contextmanager
def running_driver(config: Path, env: dict[str, str]):
    """`extract run` in a child process; killed when the test leaves, passed or failed, so a driver left behind by a
    failed assertion never holds the session cluster's CPUs through the tests after it."""
    proc = subprocess.Popen([sys.executable, "-m", "pipeline", "run", str(config)], env=env, cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)


def staged_units(output: Path) -> list[Path]:
    """The units staged: here each batch is a whole unit (`batch_size` = `checkpoint_rows`), so each slice is one."""
    staging = output / "_staging"
    return sorted([*staging.rglob("unit-*.parquet"), *staging.rglob("slice-*.arrow")]) if staging.exists() else []


def wait_for(predicate, proc: subprocess.Popen, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        if proc.poll() is not None:
            raise AssertionError(f"driver exited early ({proc.returncode}): {proc.stdout.read()[-3000:]}")
        time.sleep(0.2)
    raise AssertionError("timed out waiting")


def check_accounting(output: Path) -> None:
    con = duckdb.connect()
    all_ids = (f"SELECT doc_id FROM read_parquet('{output}/rows/*.parquet') UNION ALL "
               f"SELECT doc_id FROM read_parquet('{output}/dead_letters/*.parquet')")
    total, distinct = con.execute(f"SELECT count(*), count(DISTINCT doc_id) FROM ({all_ids})").fetchone()
    assert (total, distinct) == (N_DOCS, N_DOCS)
    ids = sorted(r[0] for r in con.execute(all_ids).fetchall())
    assert ids == sorted(tickets(N_DOCS))


def last_manifest(output: Path) -> dict:
    manifests = [json.loads(p.read_text()) for p in (output / "_runs").glob("*.json")]
    return max(manifests, key=lambda m: m["started_at"])


def test_driver_sigkill_then_rerun_finishes_without_loss_or_duplicates(ray_head, resume_dir):
    output = resume_dir / "out-driver"
    config = config_for(resume_dir, str(output), simulated=SLOW_SIMULATION)
    env = joining(ray_head)
    with running_driver(config, env) as proc:
        wait_for(lambda: len(staged_units(output)) >= 2, proc)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    gone = time.monotonic() + 60  # Ray ends a dead driver's actors; one may stage the batch it was finishing
    while extraction_actor_pids(ray_head) and time.monotonic() < gone:
        time.sleep(0.5)
    staged_at_kill = len(staged_units(output))
    kept = staged_rows(output)  # the units the driver staged, and the batches its actors staged as slices
    assert staged_at_kill < N_DOCS // 4, "the run finished before it could be killed"
    assert not (output / "rows").exists()  # nothing half-committed is visible as output

    rerun = subprocess.run([sys.executable, "-m", "pipeline", "run", str(config)], env=env, cwd=ROOT,
                           capture_output=True, text=True, timeout=600)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    manifest = last_manifest(output)
    partition, = manifest["partitions"]
    assert partition["status"] == "committed"
    assert partition["units"] == N_DOCS // 4
    assert partition["units_resumed"] >= staged_at_kill  # committed work was not redone
    # Nothing kept is generated again: not the staged units, nor the batches the actors staged (output.slices)
    assert sum(a["documents"] for a in manifest["actors"]) == N_DOCS - kept
    assert manifest["input_rows"] == N_DOCS == manifest["rows"] + manifest["dead_letters"]
    check_accounting(output)
    assert not staged_units(output)
    print(f"\nresume: killed the driver with {staged_at_kill}/{partition['units']} units staged and {kept} documents "
          f"kept; the rerun "
          f"resumed {partition['units_resumed']} units and redid {partition['units'] - partition['units_resumed']}; "
          f"rows {manifest['rows']} + dead letters {manifest['dead_letters']} = input {manifest['input_rows']}")


def extraction_actor_pids(head: dict) -> list[int]:
    """This cluster's extraction actors (their process title names the class), not another cluster's."""
    return [p.pid for p in processes_of_cluster(head["temp_dir"]) if _mentions(p, "ExtractionActor")]


def _mentions(proc: psutil.Process, text: str) -> bool:
    try:
        return text in " ".join(proc.cmdline() or [])
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return False


def test_actor_sigkill_mid_batch_is_restarted_and_the_batch_redone_once(ray_head, resume_dir):
    output = resume_dir / "out-actor"
    config = config_for(resume_dir, str(output), simulated=SLOW_SIMULATION)
    with running_driver(config, joining(ray_head)) as proc:
        wait_for(lambda: len(staged_units(output)) >= 1 and extraction_actor_pids(ray_head), proc)
        victims = extraction_actor_pids(ray_head)
        for pid in victims:
            os.kill(pid, signal.SIGKILL)
        out, _ = proc.communicate(timeout=600)
    assert proc.returncode == 0, out[-3000:]
    manifest = last_manifest(output)
    assert manifest["status"] == "committed"
    assert len(manifest["actors"]) >= 2, "no replacement actor reported in"
    assert manifest["input_rows"] == N_DOCS == manifest["rows"] + manifest["dead_letters"]
    check_accounting(output)
    print(f"\nactor kill: killed {len(victims)} actor process(es); {len(manifest['actors'])} actors reported in; "
          f"rows {manifest['rows']} + dead letters {manifest['dead_letters']} = input {manifest['input_rows']}")


def test_when_the_restarts_are_used_up_the_run_stops_in_one_line_with_exit_3(ray_head, resume_dir):
    """An actor that dies with `workers.max_restarts: 0`: the driver sees Ray give up on it. An actor whose engine
    died ends its process (`os._exit`, test_engine_failures.py) and reaches the driver the same way as this
    SIGKILL does."""
    output = resume_dir / "out-used-up"
    config = config_for(resume_dir, str(output), simulated=SLOW_SIMULATION, **{"workers.max_restarts": 0})
    with running_driver(config, joining(ray_head)) as proc:
        wait_for(lambda: len(staged_units(output)) >= 1 and extraction_actor_pids(ray_head), proc)
        for pid in extraction_actor_pids(ray_head):
            os.kill(pid, signal.SIGKILL)
        out, _ = proc.communicate(timeout=600)
    assert proc.returncode == exit_codes.ENGINE, out[-4000:]
    errors = [line for line in out.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, out[-4000:]  # one line of ours, never a traceback
    assert errors[0].startswith("error: an extraction actor died and Ray's restarts (workers.max_restarts) are used up")
    assert "staged units are kept" in errors[0]
    assert staged_units(output)  # what was staged before the death is kept for a rerun
