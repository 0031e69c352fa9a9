"""The engine adapter's arguments: our defaults, the user's overrides, CPU vs GPU."""

import sys

import pytest

from pipeline.plan import actor_env
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


@pytest.mark.slow  # imports vLLM's drafter
def test_the_prompt_lookup_drafter_kernel_is_cached_on_disk_only_when_the_engine_drafts(monkeypatch):
    from numba.core.caching import NullCache
    from vllm.v1.spec_decode import ngram_proposer

    from workers.engine import _cache_drafter_kernel

    kernel = ngram_proposer.batch_propose_numba
    enable = kernel.enable_caching
    calls = []
    monkeypatch.setattr(kernel, "enable_caching", lambda: calls.append("enabled"))
    _cache_drafter_kernel(engine_arguments("m", 2048, 1, {"speculative_config": None}, accelerator=False))
    assert calls == []  # no speculation: vLLM's kernel is left as it ships
    _cache_drafter_kernel(engine_arguments("m", 2048, 1, {}, accelerator=False))
    assert calls == ["enabled"]
    monkeypatch.undo()
    assert kernel.enable_caching == enable
    _cache_drafter_kernel(engine_arguments("m", 2048, 1, {}, accelerator=False))
    assert not isinstance(kernel._cache, NullCache)  # numba keeps the compiled kernel on disk


@pytest.mark.slow  # imports vLLM
def test_the_kernel_rebind_scan_survives_flask_and_puts_every_global_back():
    """vLLM's start-up scan reads `hasattr(value, "__dict__")` of every module global; flask's `current_app`
    raises RuntimeError there (moto's server loads Flask), and the engine failed to start."""
    import flask  # noqa: F401 - its context proxies are module globals now
    from vllm.triton_utils import dispatcher

    from workers.engine import _shield_kernel_rebind

    assert _shield_kernel_rebind() and dispatcher._rebind_kernels._extract_shielded
    assert _shield_kernel_rebind()  # idempotent
    proxy = sys.modules["flask"].current_app
    dispatcher._rebind_kernels([])  # the scan runs over every module and finds nothing to rebind
    assert sys.modules["flask"].current_app is proxy
    with pytest.raises(RuntimeError, match="application context"):
        hasattr(proxy, "__dict__")  # what the unshielded scan met
