"""Engine failures on real components: a start failure is one line and exit 3; an engine that dies mid-run is
replaced and its batches redone, never dead-lettered. (Restarts used up: test_cluster.py.)"""

from __future__ import annotations

import re
import subprocess
import sys
import threading

import psutil
import pyarrow.parquet as pq
import pytest

from pipeline import exit_codes
from tests.conftest import ROOT, SAMPLE, descendants_named, run_cli, write_config

pytestmark = pytest.mark.engine

ACTOR = re.compile(r"\bactor=[^\s:]+:(\d+)")  # `actor.warm actor=HOST:PID`: the actor's process


def test_a_kv_budget_larger_than_free_memory_is_one_line_and_exit_3(tmp_path, cli_env):
    config = write_config(tmp_path, **{"input.limit": 2, "model.engine_kwargs": {"kv_cache_memory_bytes": 1 << 50}})
    result = run_cli(["run", str(config)], cli_env)
    assert result.returncode == exit_codes.ENGINE, result.stderr[-3000:]
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("error: the engine could not start: the KV cache needs 1048576.00 GiB"), last
    assert "model.engine_kwargs.kv_cache_memory_bytes" in last


def _engine_cores(warm_line: str) -> list[psutil.Process]:
    """The vLLM engine-core processes (they name themselves VLLM::EngineCore) of the actor that wrote `warm_line`
    (its `actor.warm` line names it `host:pid`): its children, so another run's on the same cluster are not."""
    found = ACTOR.search(warm_line)
    return descendants_named(int(found.group(1)), "EngineCore") if found else []


def _run_killing_the_engine_once(config, env) -> tuple[int, str, list[int]]:
    """Run the job; once its actor is warm, SIGKILL its engine core as a crash would."""
    env = dict(env, VLLM_ENABLE_V1_MULTIPROCESSING="1", EXTRACT_VERBOSE="1")
    proc = subprocess.Popen([sys.executable, "-m", "pipeline", "run", str(config)], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines: list[str] = []
    killed: list[int] = []

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line)
            if "actor.warm" in line and not killed:
                for core in _engine_cores(line):
                    core.kill()
                    killed.append(core.pid)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        proc.wait(timeout=900)
    finally:
        if proc.poll() is None:
            proc.kill()
    reader.join(timeout=10)
    return proc.returncode, "".join(lines), killed


def test_a_dead_engine_is_replaced_and_its_batch_redone_without_engine_errors(tmp_path, cli_env):
    """The engine core runs in its own process here (V1 multiprocessing), so the test can kill it as a crash
    would. The actor's next step fails as fatal, the actor exits, Ray restarts it and redoes its batches on a
    fresh engine."""
    docs = 4
    config = write_config(tmp_path, **{"input.limit": docs, "model.max_tokens": 32, "workers.batch_size": 2,
                                       "workers.batches_in_flight": 2, "workers.max_restarts": 2})
    returncode, output, killed = _run_killing_the_engine_once(config, cli_env)
    assert killed, "no engine core was found to kill:\n" + output[-3000:]
    assert returncode == 0, output[-4000:]
    assert "actor.engine_dead" in output  # the actor saw its engine die and exited for a restart
    seen = _committed(config, "SELECT doc_id FROM rows UNION ALL SELECT doc_id FROM dead_letters")
    reasons = _committed(config, "SELECT reason FROM dead_letters")
    assert "engine_error" not in reasons
    ids = pq.read_table(SAMPLE).column("doc_id").to_pylist()[:docs]
    assert sorted(seen) == sorted(ids)  # every document once: nothing lost, nothing doubled by the redo


def _committed(config, sql: str) -> list:
    """The first column of `sql` over the committed output, read in this process (the CLI's `extract query` has
    tests of its own)."""
    from pipeline.config import load_config
    from pipeline.output.query import run_query

    return [row[0] for row in run_query(load_config(config), sql).fetchall()]


# The run's one line when the restarts are used up (exit 3) is test_cluster.py's, on the simulated engine: an
# actor whose engine died ends its process (`actor.engine_dead`, above), and Ray reports it to the driver as any
# actor death, so the driver's path is the same.
