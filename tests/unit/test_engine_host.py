"""`workers.engine.host`: which runs share an engine host (its name), and how the mode is read."""

from __future__ import annotations

import pytest

from workers.engine import EngineStartError
from workers.engine.host import MODE_ENV, engine_env, host_name, shared_mode

ARGS = {"model": "/models/m", "max_model_len": 4096, "kv_cache_memory_bytes": 1 << 28}


def test_the_same_engine_on_the_same_node_has_one_name_whatever_the_key_order():
    one = host_name(ARGS, {"VLLM_X": "1"}, "node-a")
    other = host_name(dict(reversed(ARGS.items())), {"VLLM_X": "1"}, "node-a")
    assert one == other and one.startswith("engine-")


@pytest.mark.parametrize("change", [
    {"llm_args": {**ARGS, "kv_cache_memory_bytes": 1 << 29}},  # a bigger KV cache: another engine
    {"llm_args": {**ARGS, "max_model_len": 2048}},
    {"env": {"VLLM_X": "2"}},  # what the engine reads at its start
    {"node": "node-b"},  # a host serves the actors of its own node
])
def test_anything_the_engine_is_started_with_gives_another_host(change):
    base = {"llm_args": ARGS, "env": {"VLLM_X": "1"}, "node": "node-a"}
    assert host_name(**base) != host_name(**{**base, **change})


def test_runs_that_differ_only_in_sampling_share_a_host_and_each_call_carries_its_own():
    """Sampling and grammar bounds are per request in vLLM: not in the name, sent with every call instead."""
    import inspect

    from workers.engine.host import EngineHost, HostedEngine

    assert list(inspect.signature(host_name).parameters) == ["llm_args", "env", "node"]
    assert "using" in inspect.signature(EngineHost.generate).parameters
    assert "using" in inspect.signature(EngineHost.warm).parameters
    hosted = HostedEngine.__new__(HostedEngine)  # no cluster: only what use_sampling keeps
    hosted.use_sampling({"presence_penalty": 1.0, "logprobs": 0}, [200, None])
    assert hosted.using == ({"presence_penalty": 1.0, "logprobs": 0}, (200, None))


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
