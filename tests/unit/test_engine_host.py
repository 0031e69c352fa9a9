"""`workers.engine.host`: which runs share an engine host (its name), and how the mode is read."""

from __future__ import annotations

import pytest

from workers.engine import EngineStartError
from workers.engine.host import MODE_ENV, engine_env, host_name, shared_mode

ARGS = {"model": "/models/m", "max_model_len": 4096, "kv_cache_memory_bytes": 1 << 28}


def test_the_same_engine_on_the_same_node_has_one_name_whatever_the_key_order():
    one = host_name(ARGS, {"presence_penalty": 1.0, "logprobs": 0}, (None, None), {"VLLM_X": "1"}, "node-a")
    other = host_name(dict(reversed(ARGS.items())), {"logprobs": 0, "presence_penalty": 1.0}, [None, None],
                      {"VLLM_X": "1"}, "node-a")
    assert one == other and one.startswith("engine-")


@pytest.mark.parametrize("change", [
    {"llm_args": {**ARGS, "kv_cache_memory_bytes": 1 << 29}},  # a bigger KV cache: another engine
    {"sampling": {"presence_penalty": 1.0}},  # sampling is engine-wide state: another host
    {"bounds": (200, None)},  # grammar bounds too
    {"env": {"VLLM_X": "2"}},  # what the engine reads at its start
    {"node": "node-b"},  # a host serves the actors of its own node
])
def test_anything_the_engine_is_started_or_sampled_with_gives_another_host(change):
    base = {"llm_args": ARGS, "sampling": {"presence_penalty": 1.0, "logprobs": 0}, "bounds": (None, None),
            "env": {"VLLM_X": "1"}, "node": "node-a"}
    assert host_name(**base) != host_name(**{**base, **change})


def test_the_mode_is_own_unless_shared_is_asked_and_a_typo_is_one_line(monkeypatch):
    monkeypatch.delenv(MODE_ENV, raising=False)
    assert shared_mode() is False
    monkeypatch.setenv(MODE_ENV, "Shared")
    assert shared_mode() is True
    monkeypatch.setenv(MODE_ENV, "own")
    assert shared_mode() is False
    monkeypatch.setenv(MODE_ENV, "shard")
    with pytest.raises(EngineStartError, match="EXTRACT_ENGINE_HOST='shard'"):
        shared_mode()


def test_the_engine_environment_is_what_vllm_and_the_mask_read_and_not_the_rest(monkeypatch):
    monkeypatch.setenv("VLLM_CPU_OMP_THREADS_BIND", "0-1")
    monkeypatch.setenv("EXTRACT_MASK_KERNEL", "fast")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "not-an-engine-setting")
    env = engine_env()
    assert env["VLLM_CPU_OMP_THREADS_BIND"] == "0-1" and env["EXTRACT_MASK_KERNEL"] == "fast"
    assert "AWS_SECRET_ACCESS_KEY" not in env and MODE_ENV not in env
