"""The engine adapter's arguments: our defaults, the user's overrides, CPU vs GPU."""



from pipeline.dataflow import actor_env
from workers.engine import engine_arguments


def test_defaults_constrain_whitespace_and_cache_prefixes():
    args = engine_arguments("m", 2048, 1, {}, accelerator=False, free_memory=8 << 30)
    assert args["structured_outputs_config"] == {"backend": "xgrammar", "disable_any_whitespace": True}
    assert args["enable_prefix_caching"] is True
    assert args["max_model_len"] == 2048
    # On CPU an explicit KV budget, never a share of the machine (vLLM's share is of NUMA node 0's total)
    assert "gpu_memory_utilization" not in args and args["kv_cache_memory_bytes"] > 0


def test_gpu_arguments_keep_vllm_memory_default_and_set_tensor_parallelism():
    args = engine_arguments("m", 2048, 4, {}, accelerator=True)
    assert "gpu_memory_utilization" not in args and "kv_cache_memory_bytes" not in args
    assert args["tensor_parallel_size"] == 4


def test_user_engine_kwargs_override_and_merge():
    args = engine_arguments("m", 2048, 1, {"enforce_eager": True, "gpu_memory_utilization": 0.1,
                                            "structured_outputs_config": {"backend": "guidance"}}, False)
    assert args["enforce_eager"] is True and args["gpu_memory_utilization"] == 0.1
    assert args["structured_outputs_config"] == {"backend": "guidance", "disable_any_whitespace": True}


def test_cpu_actors_run_the_engine_in_process_and_gpu_actors_do_not():
    assert actor_env(0)["VLLM_ENABLE_V1_MULTIPROCESSING"] == "0"
    assert "VLLM_ENABLE_V1_MULTIPROCESSING" not in actor_env(1)


def test_cpu_engines_speculate_from_the_prompt_unless_the_job_says_null():
    from workers.engine import PROMPT_LOOKUP, speculates

    cpu = engine_arguments("m", 2048, 1, {}, accelerator=False)
    assert cpu["speculative_config"] == PROMPT_LOOKUP and speculates(cpu)
    assert cpu["speculative_config"] is not PROMPT_LOOKUP  # a copy: a caller's edit cannot leak into the next
    assert not speculates(engine_arguments("m", 2048, 1, {"speculative_config": None}, accelerator=False))
    assert not speculates(engine_arguments("m", 2048, 1, {}, accelerator=True))


def test_the_kernel_scan_guard_gives_llvmlite_an_empty_namespace():
    """vLLM's CPU start-up reads `vars(value).get("kernel")` on every module global; once numba (vLLM's
    ngram drafter) has loaded llvmlite, its `ffi.lib` answered that with a C-function wrapper and the
    second engine of a process failed to start."""
    import numba
    from llvmlite.binding import ffi

    from workers.engine import _guard_kernel_scan

    _guard_kernel_scan()
    _guard_kernel_scan()  # idempotent
    assert vars(ffi.lib) == {}
    assert numba.njit(lambda x: x + 1)(1) == 2  # llvmlite still works behind it


def test_a_cpu_engine_runs_eight_sequences_a_step_per_thread_unless_the_job_says_otherwise(monkeypatch):
    from workers.engine.args import cpu_sequences, usable_cores

    monkeypatch.setenv("OMP_NUM_THREADS", "2")  # Ray sets it to an actor's CPUs
    assert cpu_sequences() == 16 and cpu_sequences(threads=6) == 48
    monkeypatch.setenv("OMP_NUM_THREADS", "not a number")
    assert cpu_sequences() == 8 * usable_cores()
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    assert engine_arguments("m", 2048, 1, {}, accelerator=False, free_memory=8 << 30)["max_num_seqs"] == 16
    assert engine_arguments("m", 2048, 1, {"max_num_seqs": 64}, False, free_memory=8 << 30)["max_num_seqs"] == 64
    assert "max_num_seqs" not in engine_arguments("m", 2048, 4, {}, accelerator=True)  # vLLM's own on a GPU


def test_the_cpu_kv_cache_is_sized_for_the_sequences_a_step_runs(monkeypatch, tmp_path):
    import json

    from workers.memory import KvNeed

    (tmp_path / "config.json").write_text(json.dumps({"num_hidden_layers": 30, "num_attention_heads": 9,
                                                      "num_key_value_heads": 3, "hidden_size": 576,
                                                      "torch_dtype": "bfloat16"}))
    need = KvNeed(prompt_tokens=300, max_tokens=200, source="test")
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    eight = engine_arguments(str(tmp_path), 4096, 1, {}, False, sequences=64, free_memory=64 << 30, kv_need=need)
    monkeypatch.setenv("OMP_NUM_THREADS", "4")
    thirty_two = engine_arguments(str(tmp_path), 4096, 1, {}, False, sequences=64, free_memory=64 << 30,
                                  kv_need=need)
    every = engine_arguments(str(tmp_path), 4096, 1, {"max_num_seqs": 64}, False, sequences=64,
                             free_memory=64 << 30, kv_need=need)
    assert eight["kv_cache_memory_bytes"] < thirty_two["kv_cache_memory_bytes"] < every["kv_cache_memory_bytes"]


def test_a_speculative_config_that_is_not_a_mapping_is_named():
    import pytest

    with pytest.raises(ValueError, match="speculative_config must be a mapping .* not str '{method: ngram"):
        engine_arguments("m", 2048, 1, {"speculative_config": "{method: ngram}"}, accelerator=False)
