"""`extract validate` checks `model.engine_kwargs` against vLLM's `EngineArgs` fields read from its source file, so
that it does not import vLLM (torch, transformers: most of its time). The names are compared with the imported
dataclass's in tests/integration/test_pins.py."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from workers.engine.args import unknown_engine_kwargs
from workers.vllm_compat import dataclass_fields_in_source, engine_arg_names

ROOT = Path(__file__).resolve().parents[2]

SOURCE = '''
from dataclasses import dataclass
from typing import ClassVar


class Other:
    x: int = 1


@dataclass
class EngineArgs:
    """Doc."""
    model: str = "m"
    enforce_eager: bool = False
    kv_cache_memory_bytes: int | None = None
    registry: ClassVar[dict] = {}
    plain = 3

    def method(self) -> None:
        inner: int = 2


@dataclass
class AsyncEngineArgs(EngineArgs):
    extra: bool = True
'''


def test_the_fields_are_the_annotated_assignments_of_the_class(tmp_path: Path):
    path = tmp_path / "arg_utils.py"
    path.write_text(SOURCE)
    assert dataclass_fields_in_source(path, "EngineArgs") == {"model", "enforce_eager", "kv_cache_memory_bytes"}


def test_a_class_with_bases_or_without_the_decorator_is_left_to_the_import(tmp_path: Path):
    path = tmp_path / "arg_utils.py"
    path.write_text(SOURCE)
    assert dataclass_fields_in_source(path, "AsyncEngineArgs") is None  # inherited fields
    assert dataclass_fields_in_source(path, "Other") is None  # not a dataclass
    assert dataclass_fields_in_source(path, "Missing") is None


def test_the_installed_vllm_is_read_without_importing_it():
    # In a fresh interpreter: in `make test` the integration tests have imported vLLM into this one already.
    probe = ("import sys; from workers.vllm_compat import engine_arg_names; names = engine_arg_names(); "
             "print(sorted(m for m in sys.modules if m == 'vllm' or m.startswith('vllm.'))); print(len(names))")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    imported, count = done.stdout.splitlines()[-2:]
    assert imported == "[]" and int(count) > 100
    names = engine_arg_names()
    assert {"model", "enforce_eager", "kv_cache_memory_bytes", "speculative_config"} <= names
    assert unknown_engine_kwargs({"enforce_eager": True, "kv_cache_memory_bytes": 1, "dtype": "float32"}) == []
    assert unknown_engine_kwargs({"enforce_eager": True, "enforce_eagre": True}) == ["enforce_eagre"]
