"""A quiet terminal: a real run (engine, Ray) prints our own log lines and the summary, and none of the lines
Ray, vLLM and torch printed on every run before (the list below is what a user saw, written out here, not
taken from the filter it checks). The console run is on vLLM, whose lines are the ones to keep out; the JSON run is
on the simulated engine (the subject is that every stderr line Ray and we print is JSON).

The console run is docs/first-job.md's first `extract run` (the session's `first_job_page`, also test_first_job.py's
subject): a user's job on the bundled model, in a user's environment, joining the session's cluster as a run
submitted to a cluster does (Ray's lines on connecting are part of what it checks). The JSON run starts a local
cluster of its own, so Ray's start-up lines of a local cluster are checked there."""

from __future__ import annotations

import json
import re

import pyarrow.parquet as pq
import pytest

from tests.conftest import SAMPLE, run_cli, write_config, write_docs

KNOWN_NOISE = [
    "LD_PRELOAD",  # vLLM CPU: libtcmalloc / libiomp advice, ×3
    "doesn't allow to use `torch.set_num_threads`",  # ×4
    "FutureWarning",
    "DeprecationWarning",
    "has constructor arguments in the object store",  # Ray's core worker, error level
    "enable_progress_bars",  # Ray Data telling how to turn its bars back on
    "Progress bars disabled",
    "Token authentication is enabled",
    "Starting execution of Dataset",
    "Triton is installed",
    "Loading safetensors checkpoint shards",
    "NUMA binding",
    "Autoscaler status",
    "WARNING 1",  # vLLM's own format: "WARNING 12-01 02:32:52 [file.py:N] ..."
]
CONSOLE_LINE = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+Z \[\w+\s*\] ")


@pytest.fixture(scope="module")
def small_simulated_job(tmp_path_factory):
    folder = tmp_path_factory.mktemp("noise-sim")
    table = pq.read_table(SAMPLE).slice(0, 4)
    write_docs(folder / "docs.parquet", table.column("doc_id").to_pylist(), table.column("text").to_pylist())
    return write_config(folder, {"answers": "valid"}, **{
        "input.uri": str(folder / "docs.parquet"), "model.max_tokens": 64, "examples": False})


def _env() -> dict[str, str]:
    import os

    env = dict(os.environ)
    for key in ("RAY_ADDRESS", "EXTRACT_VERBOSE", "EXTRACT_LOG_FORMAT", "VLLM_LOGGING_LEVEL"):
        env.pop(key, None)
    return env


@pytest.mark.engine
def test_a_run_prints_our_lines_and_the_summary_only(first_job_page):
    done = next((r for command, r in first_job_page.runs if command.startswith("extract run ")), None)
    assert done is not None, [command for command, _ in first_job_page.runs]  # the page stopped before its run
    assert done.returncode in (0, 4), done.stderr[-3000:]
    lines = (done.stdout + done.stderr).splitlines()
    noisy = [line for line in lines for noise in KNOWN_NOISE if noise in line]
    assert noisy == [], "\n".join(noisy)
    foreign = [line for line in done.stderr.splitlines() if line.strip() and not CONSOLE_LINE.match(line)]
    assert foreign == [], "\n".join(foreign)  # every stderr line is one of ours
    assert done.stdout.startswith("run ") and "  query      extract query" in done.stdout
    events = " ".join(done.stderr.splitlines())
    for stage in ("starting Ray", "loading model", "generating"):
        assert f"stage='{stage}'" in events or f"stage={stage}" in events


@pytest.mark.engine
def test_log_json_makes_every_stderr_line_json(small_simulated_job):
    done = run_cli(["run", str(small_simulated_job), "--log-json"], _env())
    assert done.returncode in (0, 4), done.stderr[-3000:]
    events = [json.loads(line) for line in done.stderr.splitlines() if line.strip()]  # raises on any other line
    names = {e.get("event") for e in events}
    assert {"stage", "progress", "run.done"} <= names
    assert not [e for e in events for noise in KNOWN_NOISE if noise in json.dumps(e)]
