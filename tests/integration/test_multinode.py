"""Scale-out: a two-node Ray cluster on this machine (two raylets), one extraction actor per node.
The accounting must hold and every input document id must come out exactly once."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import duckdb
import pytest

from tests.conftest import ROOT, start_ray_head, stop_ray_head, write_config, write_docs

pytestmark = pytest.mark.engine


@pytest.fixture(scope="module")
def two_nodes():
    # One CPU per node. An actor takes 0.75 of it, so two actors cannot share a node.
    head = start_ray_head(cpus=1, worker_nodes=1, worker_cpus=1)
    yield head
    stop_ray_head(head)


def test_one_actor_per_node_and_every_id_once(two_nodes, tmp_path):
    docs = {f"m-{i:02d}": f"From user{i}@example.com: the {['Kettle', 'Lamp', 'Router'][i % 3]} is broken ({i})."
            for i in range(16)}
    write_docs(tmp_path / "docs.parquet", list(docs), list(docs.values()))
    shutil.copy(ROOT / "tests" / "fixtures" / "models.py", tmp_path / "ticket_models.py")
    output = tmp_path / "out"
    config = write_config(
        tmp_path, name="multinode", schema="ticket_models:Ticket",
        prompt="Extract the support ticket from this message.\n{document}",
        **{"input.uri": "docs.parquet", "output.uri": str(output), "output.checkpoint_rows": 4,
           "model.max_tokens": 160, "model.max_model_len": 1024,
           "model.engine_kwargs": {"enforce_eager": True, "kv_cache_memory_bytes": 256 << 20},
           "workers.actors": 2, "workers.cpus_per_actor": 0.75, "workers.batch_size": 4},
    )
    env = dict(os.environ, RAY_ADDRESS=two_nodes["address"], RAY_AUTH_MODE="token")
    result = subprocess.run([sys.executable, "-m", "pipeline", "run", str(config)], env=env, cwd=ROOT,
                            capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stderr[-3000:]
    manifest = json.loads(next((output / "_runs").glob("*.json")).read_text())
    assert len({a["node"] for a in manifest["actors"]}) == 2, manifest["actors"]
    assert manifest["input_rows"] == 16 == manifest["rows"] + manifest["dead_letters"]
    ids = [r[0] for r in duckdb.connect().execute(
        f"SELECT doc_id FROM read_parquet('{output}/rows/*.parquet') UNION ALL "
        f"SELECT doc_id FROM read_parquet('{output}/dead_letters/*.parquet')").fetchall()]
    assert sorted(ids) == sorted(docs)
