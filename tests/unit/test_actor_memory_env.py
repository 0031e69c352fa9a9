"""A CPU extraction actor's process starts with glibc's arenas and vLLM's grammar cache bounded (issue 27)."""

from __future__ import annotations

import pytest

from pipeline.dataflow import actor_env
from workers.memory import ACTOR_GRAMMAR_CACHE_MB, ACTOR_MALLOC_ARENAS, actor_memory_env


def test_a_cpu_actor_gets_two_malloc_arenas_and_a_64_mib_grammar_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MALLOC_ARENA_MAX", raising=False)
    monkeypatch.delenv("VLLM_XGRAMMAR_CACHE_MB", raising=False)
    env = actor_env(0)
    assert env["MALLOC_ARENA_MAX"] == str(ACTOR_MALLOC_ARENAS) == "2"
    assert env["VLLM_XGRAMMAR_CACHE_MB"] == str(ACTOR_GRAMMAR_CACHE_MB) == "64"


def test_an_accelerator_actor_gets_neither() -> None:
    assert actor_memory_env(cpu=False) == {}
    env = actor_env(1)
    assert "MALLOC_ARENA_MAX" not in env and "VLLM_XGRAMMAR_CACHE_MB" not in env


def test_the_driver_s_own_value_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MALLOC_ARENA_MAX", "4")
    monkeypatch.setenv("VLLM_XGRAMMAR_CACHE_MB", "512")
    env = actor_env(0)
    assert env["MALLOC_ARENA_MAX"] == "4" and env["VLLM_XGRAMMAR_CACHE_MB"] == "512"
