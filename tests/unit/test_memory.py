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




# ---------------------------------------------------------------- sized from the job's prompts (issue 27)

from types import SimpleNamespace  # noqa: E402

from workers.memory import KvNeed, sample_document, sequence_tokens, sizes_itself  # noqa: E402

BLOCK = 128
INVOICE = KvNeed(prompt_tokens=1258, max_tokens=512, lookahead=8, source="test", shared_tokens=1014)


def test_a_sequence_is_its_prompt_max_tokens_and_lookahead_in_whole_blocks():
    assert sequence_tokens(INVOICE, 4096) == 14 * BLOCK  # 1778 tokens -> 14 blocks
    assert sequence_tokens(None, 4096) == 4096  # no figure: max_model_len, as before


def test_a_shared_prefix_s_whole_blocks_are_counted_once():
    # 1014 common tokens: 7 whole blocks (896) shared; each sequence holds the other 882 -> 7 blocks
    assert sequence_tokens(INVOICE, 4096, share_prefix=True) == 7 * BLOCK
    budget = kv_budget(SMOL, 4096, 64, free=64 * GIB, need=INVOICE, share_prefix=True)
    assert budget.need == (64 * 7 + 7 + 1) * BLOCK * SMOL.bytes_per_token  # + the shared blocks + the null block
    assert budget.shared_tokens == 7 * BLOCK and budget.source == "test"
    unshared = kv_budget(SMOL, 4096, 64, free=64 * GIB, need=INVOICE)
    assert unshared.need == (64 * 14 + 1) * BLOCK * SMOL.bytes_per_token and unshared.shared_tokens == 0


def test_the_job_s_need_is_far_below_max_model_len_times_the_sequences():
    old = kv_budget(SMOL, 4096, 64, free=64 * GIB)
    new = kv_budget(SMOL, 4096, 64, free=64 * GIB, need=INVOICE, share_prefix=True)
    assert old.bytes == 64 * 4096 * SMOL.bytes_per_token  # 5.6 GiB
    assert new.bytes < 1.3 * GIB and new.bytes < old.bytes / 4


def test_a_prompt_past_the_context_counts_max_model_len_not_more():
    long = KvNeed(prompt_tokens=9000, max_tokens=512)
    assert sequence_tokens(long, 4096) == 4096
    assert kv_budget(SMOL, 4096, 2, free=64 * GIB, need=long).need == (2 * 32 + 1) * BLOCK * SMOL.bytes_per_token


def test_never_below_one_max_model_len_request_and_the_null_block():
    tiny = KvNeed(prompt_tokens=100, max_tokens=32)
    budget = kv_budget(SMOL, 4096, 1, free=64 * GIB, need=tiny)
    assert budget.need == (2 + 1) * BLOCK * SMOL.bytes_per_token  # what the job needs (+ the null block)...
    assert budget.bytes == (32 + 1) * BLOCK * SMOL.bytes_per_token  # ...raised to what vLLM accepts


def test_the_job_s_need_is_still_capped_by_free_memory():
    budget = kv_budget(SMOL, 4096, 64, free=1 * GIB, need=INVOICE)
    assert budget.capped and budget.bytes == GIB // 2


def test_an_explicit_budget_still_wins_over_the_job_s_need():
    args = engine_arguments("m", 4096, 1, {"kv_cache_memory_bytes": 256 * MIB}, False, sequences=64,
                            free_memory=8 * GIB, kv_need=INVOICE)
    assert args["kv_cache_memory_bytes"] == 256 * MIB


def test_engine_arguments_add_the_drafts_lookahead(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"num_hidden_layers": 30, "num_attention_heads": 9,
                                                      "num_key_value_heads": 3, "hidden_size": 576}))
    need = KvNeed(prompt_tokens=120, max_tokens=128)  # 248 tokens: 2 blocks; + 4 drafts: 252, still 2
    speculating = engine_arguments(str(tmp_path), 256, 1, {}, False, sequences=8, free_memory=64 * GIB, kv_need=need)
    assert speculating["kv_cache_memory_bytes"] == (8 * 2 + 1) * BLOCK * SMOL.bytes_per_token
    need = KvNeed(prompt_tokens=130, max_tokens=126)  # 256 tokens, + 4 drafts: 3 blocks
    speculating = engine_arguments(str(tmp_path), 1024, 1, {}, False, sequences=8, free_memory=64 * GIB, kv_need=need)
    plain = engine_arguments(str(tmp_path), 1024, 1, {"speculative_config": None}, False, sequences=8,
                             free_memory=64 * GIB, kv_need=need)
    assert speculating["kv_cache_memory_bytes"] == (8 * 3 + 1) * BLOCK * SMOL.bytes_per_token
    assert plain["kv_cache_memory_bytes"] == (8 * 2 + 1) * BLOCK * SMOL.bytes_per_token


def test_the_sizing_document_is_the_percentile_of_the_sampled_lengths():
    texts = ["x" * n for n in range(1, 101)] + [None]
    sample = sample_document(texts)
    assert sample.chars == 96 and sample.rows == 100 and sample.longest_chars == 100 and sample.percentile == 95
    assert sample_document(texts, percentile=100).chars == 100
    assert sample_document([b"caf\xc3\xa9 " * 10], max_chars=8).document == "café caf"
    assert sample_document([None, None]) is None


def test_only_a_real_model_on_cpu_without_a_memory_key_of_its_own_is_sized_from_a_sample():
    spec = SimpleNamespace(model_path="bundled", schema_column=None, engine_kwargs={})
    assert sizes_itself(spec) and not sizes_itself(spec, cpu=False)
    assert not sizes_itself(SimpleNamespace(model_path="simulated", schema_column=None, engine_kwargs={}))
    assert not sizes_itself(SimpleNamespace(model_path="bundled", schema_column="s", engine_kwargs={}))
    assert not sizes_itself(SimpleNamespace(model_path="bundled", schema_column=None,
                                            engine_kwargs={"kv_cache_memory_bytes": 1 << 28}))
