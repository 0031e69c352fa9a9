"""The CPU KV-cache budget: sized from the job's need, capped by free memory, refused in one line."""

from __future__ import annotations

import json

import pytest

from workers.engine import engine_arguments
from workers.memory import GIB, MIB, KvBudgetError, KvShape, cpu_kv_arguments, kv_budget, kv_shape

SMOL = KvShape(layers=30, kv_heads=3, head_dim=64, dtype_bytes=2)


def test_bytes_per_token_is_layers_heads_dim_dtype_keys_and_values():
    assert SMOL.bytes_per_token == 30 * 3 * 64 * 2 * 2


def test_the_budget_is_what_the_sequences_in_flight_need_when_it_fits():
    budget = kv_budget(SMOL, 4096, 8, free=64 * GIB)
    assert budget.bytes == budget.need == SMOL.bytes_per_token * 4096 * 8
    assert not budget.capped


def test_the_budget_is_capped_at_half_the_free_memory():
    budget = kv_budget(SMOL, 4096, 64, free=2 * GIB)
    assert budget.capped and budget.bytes == 1 * GIB and budget.need > budget.bytes


def test_one_sequence_that_cannot_fit_is_one_line_naming_the_key():
    with pytest.raises(KvBudgetError) as error:
        kv_budget(SMOL, 4096, 1, free=100 * MIB)
    message = str(error.value)
    assert "\\n" not in message and "model.max_model_len" in message and "GiB free on node 0" in message


def test_the_shape_comes_from_the_model_config(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"num_hidden_layers": 30, "num_attention_heads": 9,
                                                      "num_key_value_heads": 3, "hidden_size": 576,
                                                      "torch_dtype": "bfloat16"}))
    assert kv_shape(str(tmp_path)) == SMOL
    assert kv_shape(str(tmp_path), dtype="float32").dtype_bytes == 4
    assert kv_shape(str(tmp_path / "missing")) is None


def test_a_job_s_own_memory_keys_win():
    assert cpu_kv_arguments("m", 2048, 4, {"gpu_memory_utilization": 0.5}, free=1 * GIB) == ({}, None)
    assert cpu_kv_arguments("m", 2048, 4, {"kv_cache_memory_bytes": 256 * MIB}, free=1 * GIB) == ({}, None)
    args = engine_arguments("m", 2048, 1, {"kv_cache_memory_bytes": 256 * MIB}, False, free_memory=1 * GIB)
    assert args["kv_cache_memory_bytes"] == 256 * MIB


def test_a_job_s_own_budget_larger_than_free_memory_is_refused_before_vllm_loads():
    with pytest.raises(KvBudgetError, match="kv_cache_memory_bytes"):
        cpu_kv_arguments("m", 2048, 4, {"kv_cache_memory_bytes": 8 * GIB}, free=1 * GIB)


def test_an_unknown_model_gets_a_bounded_budget():
    budget = kv_budget(None, 4096, 64, free=64 * GIB)
    assert 0 < budget.bytes <= 2 * GIB


def test_node_free_memory_counts_what_vllm_counts(tmp_path):
    from workers.memory import node_free_memory

    (tmp_path / "node0").mkdir()
    (tmp_path / "node0" / "meminfo").write_text(
        "Node 0 MemTotal:        3762392 kB\nNode 0 MemFree:         1000 kB\nNode 0 Active(file):     200 kB\n"
        "Node 0 Inactive(file):   30 kB\nNode 0 SReclaimable:      4 kB\n")
    assert node_free_memory(0, tmp_path) == (1000 + 200 + 30 + 4) * 1024
    assert node_free_memory(1, tmp_path) is None


