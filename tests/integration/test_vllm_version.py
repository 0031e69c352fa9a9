"""Issue 26: with the installed vLLM's version faked to another one, a real run's engine fails at start: one line
naming a hook of the one door (`workers.vllm_compat`), exit 3. The fake is a `sitecustomize` on PYTHONPATH, so it
reaches every process of the run (the CLI, Ray's workers and the actor that starts the engine)."""

from __future__ import annotations

import os

import pytest

from pipeline import exit_codes
from tests.conftest import run_cli, write_config
from workers import vllm_compat

pytestmark = pytest.mark.engine

FAKE = "0.99.0"
SITECUSTOMIZE = f'''
import importlib.abc
import importlib.util
import sys


class _FakeVllmVersion(importlib.abc.MetaPathFinder):
    """Once `vllm` is imported, it says it is {FAKE}."""

    def find_spec(self, name, path, target=None):
        if name != "vllm":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec("vllm")
        run = spec.loader.exec_module

        def exec_module(module):
            run(module)
            module.__version__ = "{FAKE}"

        spec.loader.exec_module = exec_module
        return spec


sys.meta_path.insert(0, _FakeVllmVersion())
'''


def test_a_run_on_another_vllm_version_fails_at_engine_start_in_one_line_naming_the_hook(tmp_path, local_cli_env):
    # A local cluster of the run's own: its workers inherit the PYTHONPATH that carries the fake.
    fake = tmp_path / "fake_vllm"
    fake.mkdir()
    (fake / "sitecustomize.py").write_text(SITECUSTOMIZE)
    env = dict(local_cli_env, PYTHONPATH=os.pathsep.join(filter(None, [str(fake), local_cli_env.get("PYTHONPATH")])))
    config = write_config(tmp_path, **{"input.limit": 2})
    result = run_cli(["run", str(config)], env)
    assert result.returncode == exit_codes.ENGINE, result.stderr[-3000:]
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith(f"error: the engine could not start: vLLM {FAKE} is installed"), last
    assert f"hook {vllm_compat.HOOKS[0].name!r}" in last and vllm_compat.WRITTEN_FOR in last, last
    assert not any((tmp_path / "out").rglob("*.parquet"))  # nothing written
