"""The CPU engine's dtype where the job sets none (`workers.engine.precision`): float32 on a CPU without native
arithmetic in the model's half type, unless the job names a dtype or float32 weights would not fit."""

from __future__ import annotations

import json

import pytest

from workers.engine import engine_arguments
from workers.engine.precision import cpu_dtype, cpu_flags, model_dtype
from workers.memory import GIB

AVX2 = frozenset({"fpu", "sse2", "avx", "avx2", "fma"})
SAPPHIRE = AVX2 | {"avx512f", "avx512_bf16", "amx_bf16", "amx_tile", "avx512_fp16"}
GRAVITON3 = frozenset({"fp", "asimd", "sve", "bf16", "fphp", "asimdhp"})


def folder(tmp_path, dtype="bfloat16", weights=1000, key="torch_dtype"):
    (tmp_path / "config.json").write_text(json.dumps({"num_hidden_layers": 2, "num_attention_heads": 2,
                                                      "hidden_size": 64, key: dtype}))
    (tmp_path / "model.safetensors").write_bytes(b"\0" * weights)
    (tmp_path / "tokenizer.json").write_bytes(b"\0" * 10**6)  # not a weight
    return str(tmp_path)


def test_cpu_flags_read_x86_and_aarch64_cpuinfo():
    assert cpu_flags("processor\t: 0\nmodel name\t: AMD EPYC\nflags\t\t: fpu avx2 fma\n") == {"fpu", "avx2", "fma"}
    assert "bf16" in cpu_flags("processor\t: 0\nFeatures\t: fp asimd bf16\nCPU part\t: 0xd40\n")
    assert cpu_flags("processor\t: 0\n") == frozenset()


def test_a_bfloat16_model_runs_in_float32_only_where_the_cpu_has_no_native_bfloat16(tmp_path):
    model = folder(tmp_path)
    assert cpu_dtype(model, {}, free=8 * GIB, flags=AVX2) == {"dtype": "float32"}
    assert cpu_dtype(model, {}, free=8 * GIB, flags=AVX2 | {"avx512f", "avx512bw"}) == {"dtype": "float32"}
    assert cpu_dtype(model, {}, free=8 * GIB, flags=SAPPHIRE) == {}
    assert cpu_dtype(model, {}, free=8 * GIB, flags=GRAVITON3) == {}
    assert cpu_dtype(model, {}, free=8 * GIB, flags=frozenset()) == {}  # a CPU we cannot read: vLLM's choice


def test_float16_models_need_native_float16(tmp_path):
    model = folder(tmp_path, "float16", key="dtype")
    assert model_dtype(model) == "float16"
    assert cpu_dtype(model, {}, free=8 * GIB, flags=AVX2 | {"avx512_bf16"}) == {"dtype": "float32"}
    assert cpu_dtype(model, {}, free=8 * GIB, flags=SAPPHIRE) == {}


@pytest.mark.parametrize("kwargs", [{"dtype": "bfloat16"}, {"dtype": "auto"}, {"dtype": "float16"}])
def test_the_jobs_own_dtype_wins(tmp_path, kwargs):
    assert cpu_dtype(folder(tmp_path), kwargs, free=8 * GIB, flags=AVX2) == {}


def test_float32_models_and_models_without_a_local_config_are_left_alone(tmp_path):
    assert cpu_dtype(folder(tmp_path, "float32"), {}, free=8 * GIB, flags=AVX2) == {}
    assert cpu_dtype("HuggingFaceTB/SmolLM2-135M-Instruct", {}, free=8 * GIB, flags=AVX2) == {}


def test_a_model_whose_float32_weights_would_take_over_half_of_free_memory_keeps_its_dtype(tmp_path):
    model = folder(tmp_path, weights=1000)  # 2,000 bytes in float32; the tokenizer's megabyte is not counted
    assert cpu_dtype(model, {}, free=4000, flags=AVX2) == {"dtype": "float32"}
    assert cpu_dtype(model, {}, free=3999, flags=AVX2) == {}


def test_engine_arguments_size_the_kv_cache_at_four_bytes_a_value_in_float32(tmp_path, monkeypatch):
    model = folder(tmp_path)
    native = engine_arguments(model, 2048, 1, {}, False, sequences=4, free_memory=64 * GIB)
    monkeypatch.setattr("workers.engine.precision.cpu_flags", lambda text=None: AVX2)
    widened = engine_arguments(model, 2048, 1, {}, False, sequences=4, free_memory=64 * GIB)
    kept = engine_arguments(model, 2048, 1, {"dtype": "bfloat16"}, False, sequences=4, free_memory=64 * GIB)
    assert "dtype" not in native and widened["dtype"] == "float32" and kept["dtype"] == "bfloat16"
    assert widened["kv_cache_memory_bytes"] == 2 * native["kv_cache_memory_bytes"] == 2 * kept["kv_cache_memory_bytes"]
    assert "dtype" not in engine_arguments(model, 2048, 1, {}, True)  # accelerators: vLLM's choice
