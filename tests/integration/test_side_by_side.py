"""Two jobs side by side on one machine (issue 27 item 6): each actor's CPU KV cache is sized from its job's need,
not from `max_model_len` × the sequences in flight, so two engines fit where one used to take 5.6 GiB of cache.

Two `extract run` processes start at once on the session's Ray cluster, each its own actor (one CPU of the two)
and vLLM engine on the bundled model, on the first four sample invoices at `max_tokens` 32. Job A's budget is sized
by the rule (`workers.memory`: its input's p95 document rendered as its prompt, counted with the tokenizer,
+ max_tokens, the examples' prefix once); job B carries the same rule's figure as an explicit
`model.engine_kwargs.kv_cache_memory_bytes`, computed here before either starts. Both budgets are explicit
numbers of 70-140 MiB whatever the machine's RAM (bfloat16 or float32, `workers.engine.precision`): the test
asserts A's logged budget is that figure, and that both runs commit every document (no actor OOM-killed, no
engine refused)."""

from __future__ import annotations

import dataclasses
import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from pipeline.config import load_config
from pipeline.dataflow import build_spec
from pipeline.output.manifest import committed
from pipeline.stage_config import ActorConfig
from pipeline.storage import storage_for
from tests.conftest import ROOT, SAMPLE, write_config
from workers.bundled_model import resolve_model_path
from workers.engine.precision import cpu_dtype
from workers.engine.vllm_engine import chat_token_ids
from workers.memory import GIB, kv_budget, kv_shape, measure_need, read_sample

pytestmark = pytest.mark.engine

DOCS = 4
# One CPU each, so the two actors run at once on the session's two-CPU cluster (the sample job's actor takes both).
SETTINGS = {"input.limit": DOCS, "model.max_tokens": 32, "model.max_model_len": 2048, "workers.batch_size": 4,
            "workers.batches_in_flight": 1, "workers.cpus_per_actor": 1}


def _job(folder: Path, kv_bytes: int | None) -> Path:
    """The sample job in `folder` with SETTINGS; its KV budget `kv_bytes`, or none (sized by the rule)."""
    folder.mkdir()
    config = write_config(folder, **SETTINGS)
    raw = yaml.safe_load(config.read_text())
    raw["model"]["engine_kwargs"].pop("kv_cache_memory_bytes")  # write_config's test default
    if kv_bytes is not None:
        raw["model"]["engine_kwargs"]["kv_cache_memory_bytes"] = kv_bytes
    config.write_text(yaml.safe_dump(raw, sort_keys=False))
    return config


def _rule_budget(config) -> tuple[int, int]:
    """What the sizing rule gives job A (free memory taken as unbounded: the figure is the job's need), and the
    old rule's (max_model_len for each of the 4 sequences), both in the dtype the engine will run in
    (`workers.engine.precision`: float32 on a CPU without native bfloat16)."""
    loaded = load_config(config)
    spec = build_spec(ActorConfig.of(loaded), "side-by-side")
    spec = dataclasses.replace(spec, kv_sample=read_sample(storage_for(str(SAMPLE)),
                                                           [SimpleNamespace(path=str(SAMPLE), row_group=0)], spec))
    path = resolve_model_path(spec.model_path)
    need = measure_need(spec, path, chat_token_ids)
    assert need is not None and need.prompt_tokens > 1000  # the three examples and a document
    need = dataclasses.replace(need, lookahead=8)  # the prompt-lookup drafts, as engine_arguments adds them
    shape = kv_shape(path, cpu_dtype(path, {}).get("dtype"))
    return (kv_budget(shape, spec.max_model_len, spec.sequences_in_flight, 1 << 50, need, share_prefix=True).bytes,
            4 * 2048 * shape.bytes_per_token)


def test_two_sample_jobs_with_small_budgets_run_side_by_side_and_commit_every_document(tmp_path, cli_env):
    a = _job(tmp_path / "a", None)
    budget, old_rule = _rule_budget(a)
    assert budget < 0.7 * old_rule  # the old rule: 4 × 2048 tokens (180 MiB in bfloat16); the sample's need is less
    b = _job(tmp_path / "b", budget)
    env = dict(cli_env, EXTRACT_VERBOSE="1")  # both on the session's cluster: no local cluster started and stopped
    runs = [subprocess.Popen([sys.executable, "-m", "pipeline", "run", str(c)], cwd=ROOT, env=env, text=True,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT) for c in (a, b)]
    try:
        logs = [run.communicate(timeout=600)[0] for run in runs]
    finally:
        for run in runs:
            if run.poll() is None:
                run.kill()
    for run, log in zip(runs, logs, strict=True):
        assert run.returncode == 0, log[-3000:]
        assert "OOM" not in log and "out of memory" not in log.lower(), log[-3000:]
    for config in (a, b):
        output = str(config.parent / "out")
        (manifest,) = committed(storage_for(output), output)
        assert manifest.rows + manifest.dead_letters == DOCS
    (line,) = [line for line in logs[0].splitlines() if "engine.kv_budget" in line] or [logs[0][-3000:]]
    sized = re.search(r"kv_cache_gib\W+([\d.]+)", line)
    assert sized and float(sized.group(1)) == round(budget / GIB, 3) and "p95 document" in line, line
    assert "engine.kv_budget" not in logs[1]  # B's own key wins: nothing sized for it
