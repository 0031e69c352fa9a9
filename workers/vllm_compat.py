"""The one door to vLLM's, XGrammar's and llguidance's internals.

Everything in this project that reaches past a public API of vLLM (or of the grammar libraries it drives) is
here, as a `Hook` with a line saying why it is needed. `check()` runs at every engine start (and in the
compile child): the installed vLLM must be the one the hooks were written for, and every hook's target must
exist. Otherwise the start fails with `VllmCompatError`, one line naming the hook: an upgrade is a reason
to read the hooks again, never something found out later from a count that silently stopped. There are no
`getattr` fallbacks here: a target that is gone raises.

Nothing here imports vLLM at import time (the driver sizes KV budgets without it); each hook imports its
target when used. `tests/unit/test_vllm_door.py` checks, by module prefix, that no other source file under
pipeline/, workers/ or schemas/ imports, reads or names a module of vLLM beyond `PUBLIC_API`, nor a private (`_`)
module of XGrammar or llguidance; and that none names the private attributes these hooks reach. (Ray's door is
`workers.ray_compat`.)
"""

from __future__ import annotations

import importlib
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

WRITTEN_FOR = "0.32.0"  # the vLLM every hook below was read against and tested on
# vLLM's public API this project uses anywhere (the engine, a request's parameters, a token prompt): a name under one
# of these is public; any other `vllm.` module is an internal, reached only from here.
PUBLIC_API = ("vllm.LLM", "vllm.SamplingParams", "vllm.sampling_params", "vllm.inputs")


class VllmCompatError(RuntimeError):
    """vLLM is not the version the hooks were written for, or a hook's target is gone. One line, shown as it is
    when an engine fails to start (`workers.engine.errors.explain_start_failure`)."""


@dataclass(frozen=True)
class Hook:
    name: str
    target: str  # "module:attribute.attribute"
    why: str

    def resolve(self) -> Any:
        module_name, _, path = self.target.partition(":")
        value: Any = importlib.import_module(module_name)
        for part in path.split("."):
            value = getattr(value, part)
        return value

    def replace(self, value: Any) -> None:
        """Put `value` where the target is (a module attribute)."""
        module_name, _, attr = self.target.partition(":")
        setattr(importlib.import_module(module_name), attr, value)

    def where(self) -> str:
        return self.target.replace(":", ".")


HOOKS: tuple[Hook, ...] = (
    Hook("kernel_rebind_shield", "vllm.triton_utils.dispatcher:_rebind_kernels",
         "its start-up scan dies on module globals that raise on hasattr (Flask proxies); hidden while it runs"),
    Hook("kernel_scan_guard", "llvmlite.binding.ffi:_lib_wrapper",
         "the same scan reads vars() of llvmlite's ffi.lib, which answers with a C wrapper; a second engine fails"),
    Hook("drafter_kernel_cache", "vllm.v1.spec_decode.ngram_proposer:batch_propose_numba.enable_caching",
         "the ngram drafter's numba kernel recompiles in every process (1.2 s); numba's disk cache keeps it"),
    Hook("mask_kernel", "xgrammar:apply_token_bitmask_inplace",
         "XGrammar's CPU logits mask is half the constraint cost; vLLM looks it up per call, so it is swapped"),
    Hook("engine_dead", "vllm.v1.engine.core_client:BackgroundResources.engine_dead",
         "a dead engine core is flagged here, while the sync client's step() keeps waiting on its queue"),
    Hook("engine_dead_wake", "vllm.v1.engine.core_client:SyncMPClient.get_output",
         "get_output blocks on outputs_queue; EngineDeadError put there wakes step() so callers learn of it"),
    Hook("fatal_errors", "vllm.v1.engine.exceptions:EngineDeadError",
         "the one vLLM exception that means the engine is gone (Ray Data LLM decides fatal by it too)"),
    Hook("compile_grammar", "vllm.v1.structured_output.backend_types:StructuredOutputBackend.compile_grammar",
         "compiling a schema directly into the backend's cache, so a busy engine need not queue a warm-up"),
    Hook("inproc_core", "vllm.v1.engine.core_client:InprocClient",
         "only an in-process engine core has a structured-output manager this process can reach"),
    Hook("guidance_backend", "vllm.v1.structured_output.backend_guidance:GuidanceBackend",
         "the compile child asks vLLM's guidance backend which tokenizers it takes, as the engine would"),
    Hook("ll_tokenizer", "vllm.v1.structured_output.backend_guidance:GuidanceBackend._build_ll_tokenizer",
         "the compile child builds llguidance's tokenizer exactly as vLLM's guidance backend does"),
    Hook("xgrammar_compiler_settings", "vllm.v1.structured_output.backend_xgrammar:XgrammarBackend.__post_init__",
         "the compile child copies how vLLM builds its XGrammar compiler (max_threads=8)"),
    Hook("penalties", "vllm.v1.sample.ops.penalties:apply_penalties",
         "vLLM's penalties build int64 token counts and seven more logits-sized tensors per step, for every draft "
         "row; with only a presence penalty a mask and an indexed subtraction give the same logits"),
    Hook("logprob_ranks", "vllm.v1.sample.sampler:batched_count_greater_than",
         "the rank of each sampled token's log-probability, a torch.compile'd one-liner that every process compiles "
         "at its first log-probability request (every _confidence job); a numba kernel in numba's disk cache "
         "counts the same, and took the sample's warm-up from 4.4-4.7 s to 3.2-3.6 s"),
    Hook("tokenizer", "vllm.tokenizers:get_tokenizer",
         "the compile child loads the model's tokenizer as the engine does, without starting one"),
    Hook("validate_xgrammar", "vllm.v1.structured_output.backend_xgrammar:validate_xgrammar_grammar",
         "the compile child runs vLLM's own request validation for XGrammar, so it refuses what a request would"),
    Hook("validate_guidance", "vllm.v1.structured_output.backend_guidance:validate_guidance_grammar",
         "the compile child runs vLLM's own request validation for llguidance, so it refuses what a request would"),
    Hook("guidance_grammar", "vllm.v1.structured_output.backend_guidance:serialize_guidance_grammar",
         "the compile child serialises a schema into llguidance's grammar exactly as vLLM's guidance backend does"),
    Hook("structured_output_options", "vllm.v1.structured_output.backend_types:StructuredOutputOptions",
         "the kind of grammar (JSON) vLLM's backends compile, named as they name it"),
    Hook("node_free_memory", "vllm.utils.cpu_resource_utils:get_memory_node_info",
         "the CPU worker checks a KV budget against node 0's free memory; workers.memory mirrors its rule"),
)
_BY_NAME = {hook.name: hook for hook in HOOKS}


def _replace(name: str, value: Any) -> None:
    hook(name)
    _BY_NAME[name].replace(value)
_checked: set[str] = set()  # the hooks this process has checked (`check`)


def hook(name: str) -> Any:
    """The target of hook `name`; raises `VllmCompatError` naming it if the target is gone."""
    entry = _BY_NAME[name]
    try:
        return entry.resolve()
    except (ImportError, AttributeError) as exc:
        raise VllmCompatError(f"vLLM hook {entry.name!r}: its target {entry.where()} is missing ({exc}); "
                              f"the hooks in workers/vllm_compat.py were written for vLLM {WRITTEN_FOR}") from exc


def installed_version() -> str:
    import vllm

    return str(vllm.__version__)


# The hooks the compile child uses (`workers.compile_child`): the tokenizer and vLLM's structured-output backends.
# The child checks these alone, not the engine's, whose targets are modules it never runs (vLLM's engine core, the
# ngram drafter's numba kernel): about 1 of the 8-10 CPU s a compile child takes to start; its own hooks' modules
# import most of the rest.
COMPILE_HOOKS = ("tokenizer", "validate_xgrammar", "validate_guidance", "guidance_grammar", "guidance_backend",
                 "ll_tokenizer", "xgrammar_compiler_settings", "structured_output_options")


def check(version: str | None = None, names: tuple[str, ...] | None = None) -> None:
    """Fail loudly (`VllmCompatError`, one line naming a hook) unless the installed vLLM is the one the hooks
    were written for and every hook's target exists: of `names` (the hooks this process uses), else of all.
    Checks each hook once per process."""
    version = installed_version() if version is None else version
    wanted = [h for h in HOOKS if names is None or h.name in names]
    if version != WRITTEN_FOR:
        first = wanted[0]
        raise VllmCompatError(
            f"vLLM {version} is installed, but the vLLM hooks were written for {WRITTEN_FOR}: hook {first.name!r} "
            f"({first.where()}) and {len(wanted) - 1} more in workers/vllm_compat.py must be checked against it "
            f"first (or install vllm=={WRITTEN_FOR})")
    for entry in wanted:
        if entry.name in _checked:
            continue
        hook(entry.name)
        if entry.name == "xgrammar_compiler_settings":
            check_copied_settings()
        _checked.add(entry.name)


def check_copied_settings() -> None:
    """The settings the compile child copies from vLLM's XGrammar backend are still vLLM's."""
    import inspect

    source = inspect.getsource(hook("xgrammar_compiler_settings"))
    if f"max_threads={XGRAMMAR_MAX_THREADS}" not in source:
        raise VllmCompatError(f"vLLM hook 'xgrammar_compiler_settings': XgrammarBackend no longer builds its "
                              f"compiler with max_threads={XGRAMMAR_MAX_THREADS}; update workers/vllm_compat.py")


# -- the engine core -----------------------------------------------------------------------------------


def core_client(llm: Any) -> Any:
    """The `LLMEngine`'s client of its engine core (in process, or a child process's)."""
    return llm.llm_engine.engine_core


def check_engine(llm: Any) -> None:
    """The instance attributes the hooks use exist on this engine (they cannot be checked on classes)."""
    client = core_client(llm)
    if in_process(client):
        wanted = {"compile_grammar": ("engine_core", "structured_output_manager")}
    else:
        wanted = {"engine_dead": ("resources", "engine_dead"), "engine_dead_wake": ("outputs_queue",)}
    for name, path in wanted.items():
        value = client
        for part in path:
            if not hasattr(value, part):
                raise VllmCompatError(f"vLLM hook {name!r}: the engine core client has no {'.'.join(path)}; the hooks "
                                      f"in workers/vllm_compat.py were written for vLLM {WRITTEN_FOR}")
            value = getattr(value, part)


def in_process(client: Any) -> bool:
    return isinstance(client, hook("inproc_core"))


def wake_if_core_died(llm: Any) -> bool:
    """Whether the engine core (a child process, with V1 multiprocessing) has died; if so, wake `step()`.

    vLLM's sync client marks the core dead but leaves `step()` waiting on its output queue forever (vLLM 0.32),
    so the death is put on that queue, and `step()` raises `EngineDeadError`."""
    client = core_client(llm)
    if in_process(client) or not client.resources.engine_dead:
        return False
    client.outputs_queue.put_nowait(hook("fatal_errors")())
    return True


def shutdown(llm: Any) -> None:
    """Stop the engine core now (with V1 multiprocessing it is a child process holding its memory)."""
    core_client(llm).shutdown()


def grammar_backend(llm: Any) -> Any:
    """The in-process engine core's structured-output backend, or None: no backend yet (vLLM makes it with the
    first grammar) or an engine core in another process."""
    client = core_client(llm)
    if not in_process(client):
        return None
    return client.engine_core.structured_output_manager.backend


def compile_json(backend: Any, schema_text: str) -> None:
    """Compile a JSON Schema into `backend`'s cache, under the key a request with the same text uses."""
    hook("compile_grammar")  # the method a backend implements, as vLLM's abstract base names it
    backend.compile_grammar(hook("structured_output_options").JSON, schema_text)


def compile_grammar_text(backend: Any, grammar: str) -> None:
    """Compile a grammar (XGrammar EBNF) into `backend`'s cache, under the key a request with the same text uses."""
    hook("compile_grammar")
    backend.compile_grammar(hook("structured_output_options").GRAMMAR, grammar)


def fatal_types() -> tuple[type[BaseException], ...]:
    """The exception types that mean the engine is gone: vLLM's `EngineDeadError` (where vLLM is loaded in this
    process: elsewhere none can be raised), and torch's out-of-memory and accelerator errors."""
    types: list[type[BaseException]] = [MemoryError]
    if "vllm.v1.engine.exceptions" in sys.modules:
        types.append(hook("fatal_errors"))
    torch = sys.modules.get("torch")
    if torch is not None:
        types += [torch.OutOfMemoryError, torch.AcceleratorError]
    return tuple(types)


# -- CPU start-up patches ------------------------------------------------------------------------------


def guard_kernel_scan() -> None:
    """Let a second engine start in a process where the first one speculated.

    vLLM's CPU worker, at start-up, scans every loaded module for objects that hold a kernel it overrides,
    reading `vars(value).get("kernel")`. Its `ngram` drafter imports numba, which loads llvmlite; llvmlite's
    `binding.ffi.lib` answers any attribute, `__dict__` included, with a C-function wrapper, and the scan
    fails on it with "'_lib_fn_wrapper' object has no attribute 'get'". An empty `__dict__` on that one
    class gives the scan nothing to find there, which is the truth. Nothing to do before llvmlite is loaded."""
    if "llvmlite.binding.ffi" not in sys.modules:
        return
    wrapper = hook("kernel_scan_guard")
    lib = sys.modules["llvmlite.binding.ffi"].lib
    if type(lib) is not wrapper:
        return  # guarded already

    class _ScannableLib(wrapper):  # type: ignore[misc,valid-type]
        __slots__ = ()
        __dict__ = property(lambda self: {})  # type: ignore[assignment]

    lib.__class__ = _ScannableLib


def shield_kernel_rebind() -> bool:
    """Let an engine start in a process that has loaded Flask (moto's S3 server does, and so may a user's app).

    The same start-up scan (`_rebind_kernels`, vLLM 0.32) asks every module global `hasattr(value,
    "__dict__")`. A werkzeug context proxy such as `flask.current_app` answers that with `RuntimeError:
    Working outside of application context`, which `hasattr` does not catch, and the engine fails to start.
    The shield hides, for the length of the scan only, the globals that raise when read that way (nothing the
    scan could rebind), then puts them back. Returns whether it is in place."""
    original = hook("kernel_rebind_shield")
    if getattr(original, "_extract_shielded", False):
        return True

    def rebind(overrides: Any) -> None:
        hidden = _hide_unreadable_globals()
        try:
            original(overrides)
        finally:
            for namespace, attr, value in hidden:
                namespace[attr] = value

    rebind._extract_shielded = True  # type: ignore[attr-defined]
    _replace("kernel_rebind_shield", rebind)
    return True


def _hide_unreadable_globals() -> list[tuple[dict[str, Any], str, Any]]:
    hidden = []
    for module in list(sys.modules.values()):
        namespace = getattr(module, "__dict__", None)
        if not isinstance(namespace, dict):
            continue
        for attr, value in list(namespace.items()):
            try:
                if hasattr(value, "__dict__"):
                    vars(value).get("kernel")
            except Exception:  # noqa: BLE001 - whatever it raises, the scan would raise it too
                hidden.append((namespace, attr, value))
                del namespace[attr]
    return hidden


def cache_drafter_kernel() -> bool:
    """Keep the prompt-lookup drafter's compiled numba kernel in numba's on-disk cache; False where numba finds
    no folder it can write one to (the kernel then compiles in each process, as without this)."""
    enable = hook("drafter_kernel_cache")  # a missing hook still fails loudly, naming it
    try:
        enable()
    except RuntimeError:  # numba: "cannot cache function ...: no locator available for file ..."
        return False
    return True


# -- the logits mask -----------------------------------------------------------------------------------

_swapped: dict[str, Any] = {}  # hook name -> the original its target held before we put ours there


def _install(name: str, replacement: Any) -> Any:
    """Put `replacement` where hook `name`'s target is (idempotent); returns the original."""
    if name not in _swapped:
        _swapped[name] = hook(name)
        _replace(name, replacement)
    return _swapped[name]


def _restore(name: str) -> None:
    """Give hook `name`'s target back its original, if ours is in place."""
    if name in _swapped:
        _replace(name, _swapped.pop(name))


# The grammar libraries that fill the token bitmask vLLM masks the logits with (XGrammar's matchers, or llguidance's
# for the guidance backend), and the versions whose layout `workers.bitmask`'s kernel was written for and checked
# against (tests/unit/test_bitmask.py, bit for bit): int32 words, bit j of word w allowing token 32*w + j. vLLM
# 0.32 pins these ranges itself.
BITMASK_LAYOUT_VERSIONS = {"xgrammar": (">=0.2.8,<0.3", "0.2.8"), "llguidance": (">=1.7.0,<1.8", "1.7.6")}


def installed_package(name: str) -> str | None:
    """The installed version of distribution `name`, or None where it is not installed."""
    from importlib import metadata

    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def check_bitmask_layout(version_of: Any = None) -> None:
    """Raise `VllmCompatError`, one line naming the package and the range, if an installed grammar library is a
    version whose token bitmask layout the fast mask kernel was not checked against (`version_of(name)`: its
    version, None where it is not installed: a library that is absent fills no bitmask)."""
    from packaging.specifiers import SpecifierSet

    for name, (supported, tested) in BITMASK_LAYOUT_VERSIONS.items():
        version = (version_of or installed_package)(name)
        if version is not None and version not in SpecifierSet(supported):
            raise VllmCompatError(
                f"{name} {version} is installed, but the fast mask kernel (workers/bitmask.py) reads the token bitmask "
                f"layout of {name}{supported} (tested on {tested}): install {name}=={tested}, or set "
                f"EXTRACT_MASK_KERNEL=xgrammar, or check the layout and widen BITMASK_LAYOUT_VERSIONS in "
                f"workers/vllm_compat.py")


def install_mask_kernel(kernel: Any) -> Any:
    """Put `kernel` in place of XGrammar's `apply_token_bitmask_inplace` in this process (idempotent); returns
    XGrammar's own kernel, which `kernel` hands what it does not handle. The grammar libraries installed must be
    ones whose bitmask layout the kernel was written for (`check_bitmask_layout`), or nothing is swapped."""
    if "mask_kernel" not in _swapped:
        check_bitmask_layout()
    return _install("mask_kernel", kernel)


def restore_mask_kernel() -> None:
    """Give XGrammar's `apply_token_bitmask_inplace` back its own kernel."""
    _restore("mask_kernel")


def original_mask_kernel() -> Any:
    return _swapped.get("mask_kernel")


# -- the sampling penalties ----------------------------------------------------------------------------


def install_penalties(kernel: Any) -> None:
    """Put `kernel` in place of vLLM's `apply_penalties` where its V1 samplers call it (idempotent)."""
    _install("penalties", kernel)


def restore_penalties() -> None:
    """Give vLLM's samplers back vLLM's own `apply_penalties`."""
    _restore("penalties")


def original_penalties() -> Any:
    """vLLM's own `apply_penalties` (the one in place now, when nothing was installed)."""
    return _swapped["penalties"] if "penalties" in _swapped else hook("penalties")


# -- the ranks of sampled tokens' log-probabilities ----------------------------------------------------


def install_logprob_ranks(counter: Any) -> None:
    """Put `counter` in place of vLLM's compiled `batched_count_greater_than` where its V1 sampler calls it
    (idempotent)."""
    _install("logprob_ranks", counter)


def restore_logprob_ranks() -> None:
    """Give vLLM's sampler back its compiled `batched_count_greater_than`."""
    _restore("logprob_ranks")


def original_logprob_ranks() -> Any:
    """vLLM's own (compiled) `batched_count_greater_than`."""
    return _swapped["logprob_ranks"] if "logprob_ranks" in _swapped else hook("logprob_ranks")


# -- the compile child ---------------------------------------------------------------------------------

XGRAMMAR_MAX_THREADS = 8  # as vLLM's XgrammarBackend builds its compiler (checked by check_copied_settings)


def xgrammar_compiler(tokenizer: Any, vocab_size: int) -> Any:
    """An XGrammar compiler built as vLLM's XgrammarBackend builds it, without the cache so each compile is
    timed in full."""
    import xgrammar as xgr

    info = xgr.TokenizerInfo.from_huggingface(tokenizer, vocab_size=vocab_size)
    return xgr.GrammarCompiler(info, max_threads=XGRAMMAR_MAX_THREADS, cache_enabled=False)


def load_tokenizer(model_path: str) -> Any:
    """The model's tokenizer as vLLM loads it for an engine (`vllm.tokenizers.get_tokenizer`)."""
    return hook("tokenizer")(model_path)


def check_json_nesting(schema_text: str) -> None:
    """vLLM's own nesting bound on a request's JSON Schema text; raises past it."""
    from vllm.sampling_params import check_json_nesting as check

    check(schema_text)


def validate_request(backend: str, schema_text: str) -> None:
    """vLLM's request-time validation of a JSON Schema on `backend` (what `SamplingParams` runs when the engine is
    configured with it: `validate_xgrammar_grammar`, `validate_guidance_grammar`); raises if vLLM rejects it."""
    from vllm.sampling_params import SamplingParams, StructuredOutputsParams

    params = SamplingParams(structured_outputs=StructuredOutputsParams(json=schema_text))
    if backend == "xgrammar":
        hook("validate_xgrammar")(params)
    else:
        hook("validate_guidance")(params, tokenizer=None)


def guidance_grammar(schema_text: str, disable_any_whitespace: bool) -> Any:
    """The llguidance grammar vLLM's guidance backend serialises for a JSON Schema request."""
    json_option = hook("structured_output_options").JSON
    return hook("guidance_grammar")(json_option, schema_text, disable_any_whitespace, False)


def guidance_supports(tokenizer: Any) -> bool:
    """Whether vLLM's guidance backend takes this tokenizer (fast Hugging Face tokenizers only)."""
    return bool(hook("guidance_backend").is_tokenizer_supported(tokenizer))


def ll_tokenizer(tokenizer: Any, vocab_size: int) -> Any:
    """llguidance's tokenizer, built as vLLM's guidance backend builds it."""
    return hook("ll_tokenizer")(tokenizer, vocab_size)


# -- the CPU worker's free-memory rule -----------------------------------------------------------------


def node_free_memory(node: int, root: Path = Path("/sys/devices/system/node")) -> int | None:
    """A NUMA node's free memory as vLLM's CPU worker counts it (`get_memory_node_info`, 0.32): MemFree +
    Active(file) + Inactive(file) + SReclaimable of the node. Read here rather than imported, so that sizing
    a budget does not import vLLM (`check` verifies the rule's home still exists). None where the node
    reports nothing."""
    try:
        lines = (root / f"node{node}" / "meminfo").read_text().splitlines()
    except OSError:
        return None
    meminfo = {}
    for line in lines:  # "Node 0 MemFree:   3646380 kB"
        parts = line.split()
        if len(parts) >= 4:
            meminfo[parts[2].rstrip(":")] = int(parts[3]) * 1024
    try:
        return meminfo["MemFree"] + meminfo["Active(file)"] + meminfo["Inactive(file)"] + meminfo["SReclaimable"]
    except KeyError:
        return None


# -- the engine's arguments ----------------------------------------------------------------------------


def engine_arg_names() -> frozenset[str]:
    """The fields of the installed vLLM's `EngineArgs` dataclass, read from its source file without importing
    vLLM: the import (torch, transformers) was nearly all of `extract validate`'s time, for a set of names (the
    sample job on 2 cores: 24.1 s with it, 1.9 s without; docs/testing.md).
    Where the source does not declare them as plain annotated fields of `class EngineArgs`, the dataclass is
    imported and asked instead (`tests/integration/test_pins.py` checks that both give the same names). Here, in
    the door: where the file sits inside vLLM and the class's shape are vLLM's internals."""
    import importlib.util

    spec = importlib.util.find_spec("vllm")  # a top-level find_spec locates the package without running it
    names = None
    if spec is not None and spec.submodule_search_locations:
        source = Path(list(spec.submodule_search_locations)[0]) / "engine" / "arg_utils.py"
        names = dataclass_fields_in_source(source, "EngineArgs") if source.is_file() else None
    if names:
        return names
    return imported_engine_arg_names()


def imported_engine_arg_names() -> frozenset[str]:
    import dataclasses

    from vllm.engine.arg_utils import EngineArgs
    return frozenset(f.name for f in dataclasses.fields(EngineArgs))


def dataclass_fields_in_source(path: Path, class_name: str) -> frozenset[str] | None:
    """The field names of the top-level `@dataclass class <class_name>` (no base classes) in the Python file
    `path`: its annotated assignments, `ClassVar`s left out. None when the file has no such class."""
    import ast

    source = path.read_text(encoding="utf-8")
    for _ in range(3):
        try:
            tree = ast.parse(source)
            break
        except SystemError:
            # CPython 3.11 before 3.11.8 raises "AST constructor recursion depth mismatch" now and then in a
            # process with other threads (python/cpython#106905; seen once in a clean-clone run beside Ray's
            # threads). The parse is pure: try again, and else let the caller import the dataclass.
            continue
    else:
        return None
    for node in tree.body:
        if not (isinstance(node, ast.ClassDef) and node.name == class_name):
            continue
        decorated = any("dataclass" in ast.unparse(d) for d in node.decorator_list)
        if not decorated or node.bases:
            return None  # inherited or generated fields: only the import knows them
        return frozenset(
            stmt.target.id for stmt in node.body
            if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)
            and "ClassVar" not in ast.unparse(stmt.annotation))
    return None
