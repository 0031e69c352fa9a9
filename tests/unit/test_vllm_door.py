"""Issue 26 item 1: vLLM's, XGrammar's and llguidance's internals are reached through one door
(`workers.vllm_compat`), which refuses, in one line naming a hook, a vLLM other than the one its hooks were
written for; and "fatal" is decided by exception type."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from workers import vllm_compat
from workers.engine import EngineFatal, explain_start_failure, is_fatal

ROOT = Path(__file__).resolve().parents[2]
DOOR = ROOT / "workers" / "vllm_compat.py"

# The privates the issue lists, by name: only the door may name them in code (identifiers, attributes, imports,
# or a string that is the bare name, as getattr would take it).
PRIVATE_NAMES = {
    "_rebind_kernels",  # vllm.triton_utils.dispatcher
    "_lib_wrapper",  # llvmlite.binding.ffi: the class swap
    "engine_dead",  # engine_core.resources.engine_dead
    "outputs_queue",  # EngineDeadError put on the sync client's queue
    "EngineDeadError",
    "structured_output_manager",
    "compile_grammar",
    "process_outputs",  # the old token-counting patch (gone: tokens come from DELTA outputs)
    "apply_token_bitmask_inplace",  # the xgrammar attribute swapped (bitmask.py's drop-in is named _cpu)
    "_build_ll_tokenizer",
    "GuidanceBackend",
    "XgrammarBackend",
    "cpu_resource_utils",
    "get_memory_node_info",
    "batch_propose_numba",
    "engine_core",  # the LLMEngine's client of its core (reached only to wake, close or compile)
}
# bitmask.py defines the drop-in kernel under XGrammar's own name, which is what makes it a drop-in; it does not
# reach into XGrammar for it.
DEFINED_HERE = {("workers/bitmask.py", "apply_token_bitmask_inplace")}


def _names(tree: ast.AST) -> set[tuple[str, int]]:
    found: set[tuple[str, int]] = set()
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
                  and node.body and isinstance(node.body[0], ast.Expr)
                  and isinstance(node.body[0].value, ast.Constant)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            found.add((node.id, node.lineno))
        elif isinstance(node, ast.Attribute):
            found.add((node.attr, node.lineno))
        elif isinstance(node, ast.alias):
            found.update((part, node.lineno) for part in node.name.split("."))
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.update((part, node.lineno) for part in node.module.split("."))
        elif isinstance(node, ast.FunctionDef | ast.ClassDef):
            found.add((node.name, node.lineno))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            found.add((node.value, node.lineno))
    return found


def test_the_privates_of_vllm_and_xgrammar_are_named_only_in_the_door():
    outside = []
    for package in ("pipeline", "schemas", "workers"):
        for path in sorted((ROOT / package).rglob("*.py")):
            if path == DOOR:
                continue
            where = str(path.relative_to(ROOT))
            for name, line in _names(ast.parse(path.read_text())):
                if name in PRIVATE_NAMES and (where, name) not in DEFINED_HERE:
                    outside.append(f"{where}:{line} {name}")
    assert sorted(outside) == []


def test_the_grep_finds_a_private_named_outside_the_door():
    code = "def f(llm):\n    return llm.llm_engine.engine_core.resources.engine_dead or getattr(x, 'outputs_queue')\n"
    names = {name for name, _ in _names(ast.parse(code))}
    assert {"engine_core", "engine_dead", "outputs_queue"} <= names & PRIVATE_NAMES
    assert "actor.engine_dead" not in PRIVATE_NAMES  # a log event's name is not the attribute


def test_the_door_names_each_hook_s_target_and_why():
    assert len({hook.name for hook in vllm_compat.HOOKS}) == len(vllm_compat.HOOKS)
    for hook in vllm_compat.HOOKS:
        module, _, attribute = hook.target.partition(":")
        assert module and attribute and hook.why and "\n" not in hook.why


def test_another_vllm_version_fails_in_one_line_naming_a_hook(monkeypatch):
    import vllm

    monkeypatch.setattr(vllm_compat, "_checked", None)
    monkeypatch.setattr(vllm, "__version__", "0.99.0")
    with pytest.raises(vllm_compat.VllmCompatError) as failed:
        vllm_compat.check()
    line = explain_start_failure(failed.value)  # what an engine that failed to start says
    assert "\n" not in line and "0.99.0" in line and vllm_compat.WRITTEN_FOR in line
    assert f"hook {vllm_compat.HOOKS[0].name!r}" in line


def test_a_missing_target_fails_naming_its_hook(monkeypatch):
    broken = vllm_compat.Hook("mask_kernel", "xgrammar:no_such_kernel", "test")
    monkeypatch.setitem(vllm_compat._BY_NAME, "mask_kernel", broken)
    with pytest.raises(vllm_compat.VllmCompatError, match=r"hook 'mask_kernel'.*xgrammar\.no_such_kernel"):
        vllm_compat.hook("mask_kernel")


def test_fatal_is_decided_by_type_not_by_message():
    torch = pytest.importorskip("torch")
    assert is_fatal(EngineFatal("x")) and is_fatal(MemoryError())
    assert is_fatal(torch.OutOfMemoryError("CPU ran out"))
    assert not is_fatal(RuntimeError("CUDA error: out of memory"))  # a message alone decides nothing
    wrapped = RuntimeError("step failed")
    wrapped.__cause__ = MemoryError()
    assert is_fatal(wrapped)


def test_vllm_s_engine_dead_error_is_fatal_as_ray_data_llm_decides_it():
    from vllm.v1.engine.exceptions import EngineDeadError

    assert is_fatal(EngineDeadError())
    assert not is_fatal(ValueError("The provided JSON schema contains features not supported by xgrammar."))
