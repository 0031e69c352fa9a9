"""Issue 26 item 1, issue 53 item 4: vLLM's, XGrammar's and llguidance's internals are reached through one door
(`workers.vllm_compat`), Ray's through another (`workers.ray_compat`), checked by module prefix: a private module
imported, read (`ray._private.worker`) or named in a string (`importlib.import_module("ray.data._internal...")`)
anywhere else under pipeline/, workers/ or schemas/ fails, naming file:line. The vLLM door refuses, in one line
naming a hook, a vLLM other than the one its hooks were written for; and "fatal" is decided by exception type."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from workers import ray_compat, vllm_compat
from workers.engine import EngineFatal, explain_start_failure, is_fatal

ROOT = Path(__file__).resolve().parents[2]
DOOR = ROOT / "workers" / "vllm_compat.py"
# Each library whose internals a door holds, and its door.
DOORS = {"vllm": "workers/vllm_compat.py", "xgrammar": "workers/vllm_compat.py",
         "llguidance": "workers/vllm_compat.py", "ray": "workers/ray_compat.py"}
_DOTTED = re.compile(rf"^(?:{'|'.join(DOORS)})(?:\.\w+)+(?::[\w.]+)?$")  # "vllm.v1.x", or "module:attribute"


def _under(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def is_private(name: str) -> bool:
    """Whether a dotted name (a module, or a module's attribute) is past its library's public API: a part that starts
    with `_` (not a dunder) in any of them; for vLLM anything not under the door's `PUBLIC_API`; for Ray, also its
    door's `PRIVATE_MODULES`."""
    parts = name.replace(":", ".").split(".")
    if parts[0] not in DOORS or len(parts) == 1:
        return False
    if any(p.startswith("_") and not (p.startswith("__") and p.endswith("__")) for p in parts[1:]):
        return True
    dotted = ".".join(parts)
    if parts[0] == "vllm":
        return not (parts[1].startswith("__") or any(_under(dotted, p) for p in vllm_compat.PUBLIC_API))
    if parts[0] == "ray":
        return any(_under(dotted, p) for p in ray_compat.PRIVATE_MODULES)
    return False


def _aliases(tree: ast.AST) -> dict[str, str]:
    """Local name → the dotted name an import binds it to (`import xgrammar as xgr`: xgr → xgrammar)."""
    bound = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                top = alias.name.split(".")[0]
                bound[alias.asname or top] = alias.name if alias.asname else top
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for alias in node.names:
                bound[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return bound


def reached(tree: ast.AST) -> set[tuple[str, int]]:
    """Every dotted name of a door's library the code reaches, with its line: what an import names, what an
    attribute chain reads from an imported name (through its alias), and a string that is a dotted module path."""
    aliases = _aliases(tree)
    inner = {id(node.value) for node in ast.walk(tree) if isinstance(node, ast.Attribute)}
    found: set[tuple[str, int]] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update((alias.name, node.lineno) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.add((node.module, node.lineno))
            found.update((f"{node.module}.{alias.name}", node.lineno) for alias in node.names)
        elif isinstance(node, ast.Attribute) and id(node) not in inner:
            chain = ast.unparse(node).split(".")
            if chain[0] in aliases and all(part.isidentifier() for part in chain):
                found.add((".".join([aliases[chain[0]], *chain[1:]]), node.lineno))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and _DOTTED.match(node.value):
            found.add((node.value, node.lineno))
    return found


def door_offenders(path: Path, where: str) -> list[str]:
    """`file:line name` for each private name of a library the file reaches without being that library's door."""
    return sorted({f"{where}:{line} {name}" for name, line in reached(ast.parse(path.read_text()))
                   if is_private(name) and DOORS[name.split(".")[0]] != where})


def test_privates_of_vllm_ray_and_the_grammar_libraries_are_reached_only_through_their_doors():
    offenders = [found for package in ("pipeline", "schemas", "workers")
                 for path in sorted((ROOT / package).rglob("*.py"))
                 for found in door_offenders(path, str(path.relative_to(ROOT)))]
    assert offenders == [], "through the door (workers/vllm_compat.py, workers/ray_compat.py):\n" + "\n".join(
        offenders)


def test_the_prefix_rule_catches_every_way_in_and_lets_the_public_api_pass(tmp_path):
    code = ("import ray\nimport xgrammar as xgr\nfrom vllm import LLM, SamplingParams\n"
            "from vllm.sampling_params import StructuredOutputsParams\nfrom vllm.inputs import TokensPrompt\n"
            "from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy\n"
            "def f():\n"
            "    from vllm.v1.structured_output.backend_xgrammar import validate_xgrammar_grammar\n"  # 8
            "    import ray._private.worker\n"  # 9
            "    node = getattr(ray._private.worker, '_global_node', None)\n"  # 10
            "    state = importlib.import_module('ray.data._internal.execution.streaming_executor_state')\n"  # 11
            "    from vllm.tokenizers import get_tokenizer\n"  # 12
            "    from ray.util.state import list_actors\n"  # 13
            "    return xgr._private_kernel, xgr.GrammarMatcher, ray.data.read_parquet, vllm.__version__\n")  # 14
    path = tmp_path / "m.py"
    path.write_text(code)
    lines = {int(found.split()[0].split(":")[1]) for found in door_offenders(path, "pipeline/m.py")}
    assert lines == {8, 9, 10, 11, 12, 13, 14}
    assert door_offenders(path, "workers/ray_compat.py") and all(  # the Ray door may reach Ray's, not vLLM's
        not found.split()[1].startswith("ray") for found in door_offenders(path, "workers/ray_compat.py"))
    assert not is_private("vllm.sampling_params.SamplingParams") and not is_private("ray.data.DataContext")
    assert is_private("vllm.engine.arg_utils.EngineArgs") and is_private("ray._raylet")
    assert is_private("vllm.v1.engine.core_client:InprocClient")  # a hook's target, as a string

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

    monkeypatch.setattr(vllm_compat, "_checked", set())
    monkeypatch.setattr(vllm, "__version__", "0.99.0")
    with pytest.raises(vllm_compat.VllmCompatError) as failed:
        vllm_compat.check()
    line = explain_start_failure(failed.value)  # what an engine that failed to start says
    assert "\n" not in line and "0.99.0" in line and vllm_compat.WRITTEN_FOR in line
    assert f"hook {vllm_compat.HOOKS[0].name!r}" in line


def test_the_compile_child_checks_its_own_hooks_and_each_once(monkeypatch):
    """`check(names=COMPILE_HOOKS)` resolves the compile child's hooks only (the engine's import vLLM's engine core
    and numba, modules the child never runs), each once per process; `check()` all."""
    resolved: list[str] = []
    monkeypatch.setattr(vllm_compat, "_checked", set())
    monkeypatch.setattr(vllm_compat, "hook", lambda name: resolved.append(name) or vllm_compat._BY_NAME[name].resolve())
    vllm_compat.check(names=vllm_compat.COMPILE_HOOKS)
    first = len(resolved)
    assert set(resolved) == set(vllm_compat.COMPILE_HOOKS) <= {h.name for h in vllm_compat.HOOKS}
    vllm_compat.check()
    rest = {h.name for h in vllm_compat.HOOKS} - set(vllm_compat.COMPILE_HOOKS)
    assert sorted(resolved[first:]) == sorted(rest)  # the rest, each once, and none of the child's again


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
