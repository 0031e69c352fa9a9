"""Shared engine hosts (`EXTRACT_ENGINE_HOST=shared`, `workers.engine.host`) on the session's real Ray cluster: a
second run of the same job attaches to the engine the first one left, and a host killed with a call of that run
in it is started anew."""

from __future__ import annotations

import json

import pytest

from tests.conftest import run_cli

pytestmark = pytest.mark.engine

NAMESPACE = "extract-engines"


def hosts() -> dict[str, int]:
    """Every engine host on the cluster: its name → its process id."""
    import ray

    names = [a["name"] for a in ray.util.list_named_actors(all_namespaces=True) if a["namespace"] == NAMESPACE]
    found = {}
    for name in names:
        try:
            found[name] = ray.get(ray.get_actor(name, namespace=NAMESPACE).info.remote(), timeout=120)["pid"]
        except Exception:  # noqa: BLE001 - a host exiting as we look (idle): not one of ours
            continue
    return found


# Both runs: two documents, one a batch, so two calls are in flight at once (a moment to kill a host in). The host's
# name is the engine's arguments, which the documents (the KV budget) and the batches (the sequences) set: the runs
# differ only in their sampling, which is per request.
SAME_ENGINE = ("--limit", "2", "--set", "workers.batch_size=1")


def run_sample(tmp_path, env, name: str) -> dict:
    out = tmp_path / name
    result = run_cli(["run", "jobs/extract.yaml", *SAME_ENGINE, "--set", f"output.uri={out}"],
                     dict(env, EXTRACT_ENGINE_HOST="shared", EXTRACT_ENGINE_HOST_IDLE_S="60"))
    assert result.returncode == 0, result.stderr[-3000:]
    manifest = json.loads(next((out / "_runs").glob("*.json")).read_text())
    assert manifest["status"] == "committed" and manifest["rows"] + manifest["dead_letters"] == 2, manifest
    return manifest


def test_a_second_run_attaches_to_the_first_runs_engine_and_a_host_killed_mid_run_is_replaced(tmp_path, cli_env,
                                                                                                   ray_cluster):
    """Two runs of the sample job, the second with another sampling (no presence penalty: per request in vLLM, so
    the same engine serves it). The second run attaches to the host the first one left: while a call of it is in
    the host, the cluster has the same hosts in the same processes (no engine started). The host then dies with
    that call in it: the actor attaches to a new host and sends the call again (a second death would make it exit,
    for Ray to restart it); nothing is lost, duplicated or dead-lettered. The new host has the killed one's name
    (the same engine) and another process. One run fewer than the two tests this was (an attaching run, then a
    killed one): the killed run is the attaching run."""
    import subprocess
    import sys

    from tests.conftest import ROOT

    first = run_sample(tmp_path, cli_env, "first")
    after_first = hosts()
    assert after_first, "the run left no engine host on the cluster"
    out = tmp_path / "second"
    proc = subprocess.Popen([sys.executable, "-m", "pipeline", "run", "jobs/extract.yaml", *SAME_ENGINE,
                             "--set", f"output.uri={out}", "--set", "model.sampling.presence_penalty=0.0"],
                            cwd=ROOT, env=dict(cli_env, EXTRACT_ENGINE_HOST="shared", EXTRACT_ENGINE_HOST_IDLE_S="60"),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    killed, seen, output = kill_a_host_mid_call(proc)
    assert killed, "the run had no request in a host to kill:\n" + output[-3000:]
    assert seen == after_first  # the same host, the same process: the second run started no engine
    assert proc.returncode == 0, output[-3000:]
    second = json.loads(next((out / "_runs").glob("*.json")).read_text())
    assert second["status"] == "committed" and second["config_hash"] != first["config_hash"], second
    ids, reasons = committed_ids_and_reasons(out)
    assert len(ids) == len(set(ids)) == 2
    assert "engine_error" not in reasons
    name, pid = killed
    replaced = hosts()
    assert name in replaced and replaced[name] != pid, (killed, replaced)  # the same name, in a new process


def kill_a_host_mid_call(proc) -> tuple[tuple[str, int] | None, dict[str, int] | None, str]:
    """While the run `proc` goes: the first host seen with a call in it is killed. Returns that host's (name, pid),
    the hosts seen at that moment, and the run's output once it has ended."""
    import time

    import ray

    killed, seen = None, None
    try:
        deadline = time.monotonic() + 900
        while killed is None and proc.poll() is None and time.monotonic() < deadline:
            found = hosts()
            for name in found:
                handle = ray.get_actor(name, namespace=NAMESPACE)
                info = ray.get(handle.info.remote(), timeout=60)
                if info["in_flight"]:
                    seen = found
                    ray.kill(handle)
                    killed = (name, info["pid"])
                    break
            time.sleep(0.5)
        output, _ = proc.communicate(timeout=1200)
    finally:
        if proc.poll() is None:
            proc.kill()
    return killed, seen, output


def committed_ids_and_reasons(out) -> tuple[list[str], set[str]]:
    """The document ids of the rows and dead letters under `out`, and the dead letters' reasons."""
    import duckdb

    rows, dead = sorted(out.glob("rows/**/*.parquet")), sorted(out.glob("dead_letters/**/*.parquet"))
    ids = [r[0] for f in rows + dead for r in duckdb.sql(f"SELECT doc_id FROM read_parquet('{f}')").fetchall()]
    reasons = {r[0] for f in dead for r in duckdb.sql(f"SELECT reason FROM read_parquet('{f}')").fetchall()}
    return ids, reasons
