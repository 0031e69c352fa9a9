"""One vLLM release on CPU and GPU, and the CPU-only patches inert where there is an accelerator."""

from __future__ import annotations

import pytest

from workers import bitmask
from workers.engine import cpu_patches, engine_arguments


@pytest.mark.slow  # imports vLLM
def test_a_gpu_job_s_arguments_are_accepted_by_the_pinned_vllm_engine_args():
    from vllm.engine.arg_utils import EngineArgs

    args = engine_arguments("some/model", 4096, 2, {"enforce_eager": True}, accelerator=True)
    engine_args = EngineArgs(**args)
    assert engine_args.tensor_parallel_size == 2 and engine_args.enable_prefix_caching is True
    assert engine_args.kv_cache_memory_bytes is None and engine_args.speculative_config is None


@pytest.mark.slow  # imports vLLM
def test_a_cpu_job_s_arguments_are_accepted_by_the_pinned_vllm_engine_args():
    from vllm.engine.arg_utils import EngineArgs

    args = engine_arguments("some/model", 4096, 1, {}, accelerator=False, sequences=4, free_memory=8 << 30)
    assert EngineArgs(**args).kv_cache_memory_bytes == args["kv_cache_memory_bytes"]


@pytest.fixture
def clean_patches():
    bitmask.uninstall()
    yield
    bitmask.uninstall()


@pytest.mark.slow  # imports XGrammar and torch
def test_the_mask_kernel_is_not_replaced_where_there_is_an_accelerator(clean_patches):
    import xgrammar

    original = xgrammar.apply_token_bitmask_inplace
    applied = cpu_patches(engine_arguments("m", 2048, 1, {}, accelerator=True), accelerator=True)
    assert applied["mask_kernel"] == "device" and xgrammar.apply_token_bitmask_inplace is original
    applied = cpu_patches(engine_arguments("m", 2048, 1, {}, accelerator=False, free_memory=8 << 30), False)
    assert applied["mask_kernel"] == "fast" and xgrammar.apply_token_bitmask_inplace is not original


@pytest.mark.slow  # imports vLLM
def test_the_drafter_cache_is_not_turned_on_where_there_is_an_accelerator(clean_patches):
    from vllm.v1.spec_decode import ngram_proposer

    kernel = ngram_proposer.batch_propose_numba
    before = kernel._cache.__class__.__name__
    # A GPU job that asks for prompt lookup itself: still no CPU patch.
    gpu_args = engine_arguments("m", 2048, 1, {"speculative_config": {"method": "ngram"}}, accelerator=True)
    assert cpu_patches(gpu_args, accelerator=True)["drafter_cache"] is False
    assert kernel._cache.__class__.__name__ == before


@pytest.mark.slow  # imports vLLM
def test_engine_arg_names_read_from_the_source_are_the_dataclass_fields():
    """`extract validate` reads EngineArgs' fields from vLLM's source without importing it: the same names as the
    imported dataclass has, on the pinned vLLM."""
    from workers.vllm_compat import engine_arg_names, imported_engine_arg_names

    static = engine_arg_names()
    assert static == imported_engine_arg_names()
    assert {"enforce_eager", "kv_cache_memory_bytes", "speculative_config"} <= static


