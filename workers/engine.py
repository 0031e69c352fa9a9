"""The engine adapter: one vLLM `LLM`, generating under a JSON Schema grammar (XGrammar backend).

The rest of the project talks to `VllmEngine` only: token counting for the context check, one
warm-up per schema, and batched constrained generation. vLLM is imported only under `workers/`
(`tests/unit/test_architecture.py` checks it).
"""

from __future__ import annotations

import itertools
import json
import os
import queue
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import structlog

from workers.memory import cpu_kv_arguments

log = structlog.get_logger(__name__)


@dataclass(frozen=True)
class Generation:
    text: str
    finish_reason: str | None  # vLLM's ("stop", "length", "error"), or "refused": the engine would not take it
    prompt_tokens: int
    output_tokens: int
    error: str | None = None  # why a request was refused or failed (finish_reason "refused" or "error")
    # With SamplingParams.logprobs (output.confidence): each sampled token's text and log-probability.
    token_pieces: tuple[str, ...] = ()
    token_logprobs: tuple[float, ...] = ()


REFUSED = "refused"
ERROR_MESSAGE = ("the engine ended this request with an error (vLLM finish_reason 'error'; under a grammar, "
                 "the grammar failed to compile)")


class EngineStartError(RuntimeError):
    """The engine could not start. The message is one line: the cause and the key to change."""


class EngineFatal(RuntimeError):
    """The engine itself failed (its core or thread died, out of memory, a device error): no request in it can
    finish. Callers must not dead-letter their documents for it; the actor exits so that Ray restarts it and
    redoes its batches on a fresh engine."""


_FATAL_NAMES = ("EngineDeadError", "OutOfMemoryError", "AcceleratorError")
_FATAL_TEXT = ("CUDA error", "out of memory", "CUBLAS_STATUS", "device-side assert")


def is_fatal(exc: BaseException) -> bool:
    """Whether `exc` means the engine is gone, as opposed to one request or one batch being refused."""
    if isinstance(exc, EngineFatal | MemoryError):
        return True
    if any(type(e).__name__ in _FATAL_NAMES for e in (exc, exc.__cause__, exc.__context__) if e is not None):
        return True
    return any(text in str(exc) for text in _FATAL_TEXT)


def explain_start_failure(exc: BaseException) -> str:
    """One line for an engine that failed to start: the cause, and the key to change."""
    from workers.memory import KvBudgetError

    if isinstance(exc, EngineStartError | KvBudgetError):
        return str(exc)
    text = str(exc).strip()
    first = text.splitlines()[0] if text else type(exc).__name__
    if "memory" in text and ("kv cache" in text.lower() or "KV cache" in text):
        return (f"vLLM could not reserve the KV cache: {first} — set model.engine_kwargs.kv_cache_memory_bytes "
                "lower, or lower model.max_model_len")
    if isinstance(exc, TypeError) and "unexpected keyword argument" in text:
        return f"model.engine_kwargs: vLLM does not accept it: {first}"
    if is_fatal(exc):
        return f"the engine ran out of memory or lost its device while starting: {first}"
    return (f"{type(exc).__name__}: {first} (check model.path and model.engine_kwargs; run with -v for the "
            "engine's own log)")


def start_failure_in(exc: BaseException) -> str | None:
    """The one-line reason of an `EngineStartError` raised in an actor, found in what Ray hands the driver
    (an `ActorDiedError` or task error whose text holds the actor's traceback), or None."""
    marker = f"{EngineStartError.__name__}: "
    seen: set[int] = set()
    error: BaseException | None = exc
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        text = str(error)
        if isinstance(error, EngineStartError):
            return text
        at = text.rfind(marker)
        if at >= 0:
            return text[at + len(marker):].splitlines()[0].strip()
        error = error.__cause__ or error.__context__
    return None


@dataclass(frozen=True)
class _Refused:
    """A request the engine would not add (e.g. a JSON Schema feature its grammar backend refuses)."""

    message: str


def generations(prompts: list[list[int]], outputs: list[Any]) -> list[Generation]:
    """vLLM `RequestOutput`s (one completion each) as `Generation`s, in prompt order."""
    result = []
    for ids, o in zip(prompts, outputs, strict=True):
        if isinstance(o, _Refused):
            result.append(Generation("", REFUSED, len(ids), 0, o.message))
            continue
        c = o.outputs[0]
        pieces, logprobs = _sampled(c)
        result.append(Generation(text=c.text, finish_reason=c.finish_reason, prompt_tokens=len(ids),
                                 output_tokens=len(c.token_ids),
                                 error=ERROR_MESSAGE if c.finish_reason == "error" else None,
                                 token_pieces=pieces, token_logprobs=logprobs))
    return result


def _sampled(completion: Any) -> tuple[tuple[str, ...], tuple[float, ...]]:
    """Each sampled token's decoded text and log-probability, where the request asked for them (else empty)."""
    entries = getattr(completion, "logprobs", None)
    if not entries:
        return (), ()
    pieces, logprobs = [], []
    for token_id, entry in zip(completion.token_ids, entries, strict=False):
        chosen = entry.get(token_id) if entry else None
        if chosen is None:
            return (), ()
        pieces.append(chosen.decoded_token or "")
        logprobs.append(float(chosen.logprob))
    return tuple(pieces), tuple(logprobs)


def structured_params(json_schema: dict[str, Any], backend: str) -> Any:
    """A request's `StructuredOutputsParams`: the JSON Schema, or, where grounding gave a long document's field
    a substring grammar (schemas.substring), the whole schema as XGrammar EBNF with that field's rules; a
    backend other than XGrammar gets the field as a plain string instead."""
    from vllm.sampling_params import StructuredOutputsParams

    from schemas.substring import has_substring, to_ebnf, without_substrings

    if has_substring(json_schema):
        if backend == "xgrammar":
            try:
                return StructuredOutputsParams(grammar=to_ebnf(json_schema))
            except Exception as exc:  # noqa: BLE001 - a narrowing of the grammar only: decode the field as a string
                log.warning("engine.substring_grammar_failed", error=f"{type(exc).__name__}: {exc}",
                            action="the field decodes as a plain string")
        json_schema = without_substrings(json_schema)
    return StructuredOutputsParams(json=grammar_spec(json_schema))


def grammar_spec(json_schema: dict[str, Any]) -> str:
    """The schema text a request carries. vLLM caches compiled grammars under it, so `VllmEngine.compile`
    must produce the very same text for a request to find its grammar ready."""
    return json.dumps(json_schema)


# Prompt-lookup speculation (vLLM's `ngram` method), our default on CPU. An extraction copies its values out
# of the document, and a small model's runaway repeats copy themselves: both are drafts the prompt and the
# output already hold. Each draft token must pass the grammar before the model verifies it, and the model
# keeps only the tokens it would have chosen itself, so the output is the model's (at temperature 0, its
# greedy choice; CPU numerics aside). Measured on 100 synthetic invoices, 2 cores: 25-27 s per constrained
# generation against 32-34 s without (README, "Speculation from the document"). Not a GPU default, as it is
# unmeasured there: verifying drafts the model rejects spends compute a large batch may not have spare.
# `engine_kwargs: {speculative_config: null}` turns it off.
PROMPT_LOOKUP: dict[str, Any] = {"method": "ngram", "num_speculative_tokens": 8, "prompt_lookup_min": 3,
                                 "prompt_lookup_max": 5}


def speculates(llm_args: dict[str, Any]) -> bool:
    return bool(llm_args.get("speculative_config"))


def speculation_method(llm_args: dict[str, Any]) -> str | None:
    return (llm_args.get("speculative_config") or {}).get("method")


def has_accelerator() -> bool:
    try:
        import torch

        return bool(torch.cuda.is_available())
    except Exception:  # noqa: BLE001 - no torch or a broken driver both mean "no accelerator"
        return False


def engine_arguments(
    model_path: str,
    max_model_len: int,
    tensor_parallel_size: int,
    engine_kwargs: dict[str, Any],
    accelerator: bool,
    backend: str = "xgrammar",
    sequences: int = 1,
    free_memory: int | None = None,
) -> dict[str, Any]:
    """vLLM `LLM(...)` keyword arguments: our defaults, overridden by the user's `engine_kwargs`.

    An engine holds one structured-output backend (vLLM V1), so `backend` is per engine: a job whose
    schemas XGrammar cannot compile runs them on an actor pool whose engines use `guidance`.

    On CPU the KV cache gets an explicit budget for `sequences` in flight (`workers.memory`), never a share
    of the machine; `free_memory` (bytes) is measured when not given. Raises `KvBudgetError` when the
    job's KV cache cannot fit."""
    args: dict[str, Any] = {
        "model": model_path,
        "max_model_len": max_model_len,
        "tensor_parallel_size": tensor_parallel_size,
        "enable_prefix_caching": True,
        "seed": 0,
        # Compact JSON: no free whitespace, so the model cannot loop on blanks and spends no tokens on them.
        "structured_outputs_config": {"backend": backend, "disable_any_whitespace": True},
    }
    if not accelerator:
        kv_args, budget = cpu_kv_arguments(model_path, max_model_len, sequences, engine_kwargs, free_memory)
        args.update(kv_args)
        if budget is not None:
            log.info("engine.kv_budget", sequences=sequences, max_model_len=max_model_len, **budget.describe())
        args["speculative_config"] = dict(PROMPT_LOOKUP)
    user = dict(engine_kwargs)
    so_user = user.pop("structured_outputs_config", None)
    if so_user:
        args["structured_outputs_config"] = {**args["structured_outputs_config"], **so_user}
    args.update(user)
    return args


def unknown_engine_kwargs(engine_kwargs: dict[str, Any]) -> list[str]:
    """The keys of a job's `engine_kwargs` that the installed vLLM's `EngineArgs` does not have (`LLM(...)`
    passes every keyword on to it). Imports vLLM: for `extract validate`, not for a run's driver."""
    import dataclasses

    from vllm.engine.arg_utils import EngineArgs

    return sorted(set(engine_kwargs) - {f.name for f in dataclasses.fields(EngineArgs)})


def _guard_kernel_scan() -> None:
    """Let a second engine start in a process where the first one speculated.

    vLLM's CPU worker, at start-up, scans every loaded module for objects that hold a kernel it overrides,
    reading `vars(value).get("kernel")`. Its `ngram` drafter imports numba, which loads llvmlite; llvmlite's
    `binding.ffi.lib` answers any attribute, `__dict__` included, with a C-function wrapper, and the scan
    fails on it with "'_lib_fn_wrapper' object has no attribute 'get'". An empty `__dict__` on that one
    class gives the scan nothing to find there, which is the truth."""
    ffi = sys.modules.get("llvmlite.binding.ffi")
    lib = getattr(ffi, "lib", None)
    if lib is None or type(lib).__name__ != "_lib_wrapper":
        return

    class _ScannableLib(type(lib)):  # type: ignore[misc]
        __slots__ = ()
        __dict__ = property(lambda self: {})  # type: ignore[assignment]

    lib.__class__ = _ScannableLib


def _shield_kernel_rebind() -> bool:
    """Let an engine start in a process that has loaded Flask (moto's S3 server does, and so may a user's app).

    The same start-up scan (`vllm.triton_utils.dispatcher._rebind_kernels`, vLLM 0.32) asks every module
    global `hasattr(value, "__dict__")`. A werkzeug context proxy such as `flask.current_app` answers that
    with `RuntimeError: Working outside of application context`, which `hasattr` does not catch, and the
    engine fails to start. The shield hides, for the length of the scan only, the globals that raise when
    read that way (nothing the scan could rebind), then puts them back. Returns whether it is in place."""
    try:
        from vllm.triton_utils import dispatcher
    except ImportError:
        return False
    original = getattr(dispatcher, "_rebind_kernels", None)
    if original is None or getattr(original, "_extract_shielded", False):
        return original is not None

    def rebind(overrides: Any) -> None:
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
        try:
            original(overrides)
        finally:
            for namespace, attr, value in hidden:
                namespace[attr] = value

    rebind._extract_shielded = True  # type: ignore[attr-defined]
    dispatcher._rebind_kernels = rebind
    return True


def _cache_drafter_kernel(llm_args: dict[str, Any]) -> bool:
    """Keep the prompt-lookup drafter's compiled kernel on disk.

    vLLM's `ngram` drafter runs a numba kernel (`parallel=True`) that numba compiles on the first draft of
    every new process: 1.2 s here, paid by each actor, bench arm and test engine, inside the schema warm-up.
    With numba's own on-disk cache the next process loads it in 0.1 s. A vLLM without that kernel keeps
    its own behaviour."""
    if speculation_method(llm_args) != "ngram":
        return False
    try:
        from vllm.v1.spec_decode import ngram_proposer

        ngram_proposer.batch_propose_numba.enable_caching()
    except (ImportError, AttributeError) as exc:
        log.debug("engine.drafter_cache_unavailable", error=str(exc))
        return False
    return True


def cpu_patches(llm_args: dict[str, Any], accelerator: bool) -> dict[str, Any]:
    """Apply the patches that exist for vLLM's CPU backend, and only without an accelerator; returns what was
    applied. Each was measured on CPU only, and on a GPU vLLM masks logits on the device and its start-up
    scan and drafter differ, so there they would change what nobody measured.

    - the logits mask: our vectorised kernel unless EXTRACT_MASK_KERNEL=xgrammar (workers/bitmask.py);
    - the prompt-lookup drafter's kernel in numba's disk cache (imports numba, hence llvmlite: first);
    - the kernel-scan guard that lets a second engine start in a process where the first speculated, and
      the shield that lets one start where Flask is loaded."""
    if accelerator:
        return {"mask_kernel": "device", "drafter_cache": False, "kernel_scan_guard": False}
    from workers import bitmask

    mask_kernel = bitmask.use(os.environ.get("EXTRACT_MASK_KERNEL", "fast"))
    cached = _cache_drafter_kernel(llm_args)
    _guard_kernel_scan()
    _shield_kernel_rebind()
    return {"mask_kernel": mask_kernel, "drafter_cache": cached, "kernel_scan_guard": True}


def longest_token_chars(tokenizer: Any) -> int | None:
    """The most characters of text one token of `tokenizer` can stand for, from its whole vocabulary (None if it
    cannot be read). A text of more than `n` × this characters has more than `n` tokens, so it can be refused
    without tokenizing it. Each token counts as the longer of its vocabulary string and its decoded text: a
    byte-level token's string has one character per byte, a SentencePiece token's its `▁`; either is at least
    the characters of text it covers. Special tokens are included (a text may spell one), which only loosens
    the bound."""
    try:
        ids = [[i] for i in range(len(tokenizer))]
        decoded = tokenizer.batch_decode(ids, skip_special_tokens=False)
        pieces = tokenizer.convert_ids_to_tokens(list(range(len(tokenizer))))
        longest = max(max((len(t) for t in decoded), default=0),
                      max((len(p) for p in pieces if isinstance(p, str)), default=0))
    except Exception as exc:  # noqa: BLE001 - a tokenizer without a readable vocabulary: documents are tokenized
        log.warning("engine.no_token_bound", error=f"{type(exc).__name__}: {exc}")
        return None
    return max(1, longest)


class VllmEngine:
    """One vLLM engine; `generate` takes token-id prompts and returns one `Generation` per prompt."""

    def __init__(self, accelerator: bool | None = None, **llm_args: Any) -> None:
        from vllm import LLM

        patches = cpu_patches(llm_args, has_accelerator() if accelerator is None else accelerator)
        self.mask_kernel = patches["mask_kernel"]
        started = time.perf_counter()
        self.llm = LLM(**llm_args)
        self.init_seconds = time.perf_counter() - started
        self.tokenizer = self.llm.get_tokenizer()
        self.max_model_len = int(self.llm.llm_engine.model_config.max_model_len)
        self.max_chars_per_token = longest_token_chars(self.tokenizer)
        self.backend = (llm_args.get("structured_outputs_config") or {}).get("backend", "xgrammar")
        kv_bytes = llm_args.get("kv_cache_memory_bytes")
        log.info("engine.ready", model=llm_args.get("model"), seconds=round(self.init_seconds, 2),
                 kv_cache_gib=round(kv_bytes / (1 << 30), 3) if kv_bytes else None)
        # How the engine runs inside (EXTRACT_LOG_LEVEL=debug shows it): not a setting of the job.
        log.debug("engine.internals", mask_kernel=self.mask_kernel, speculation=speculation_method(llm_args))

    def prompt_token_ids(self, prompt: Any) -> list[int]:
        """The chat-formatted prompt as token ids: one user message (text), or a `Chat` (system, few-shot
        turns, document) under its own chat template, else the tokenizer's, else as a plain transcript."""
        from workers.prompt import plain_transcript

        if isinstance(prompt, str):
            messages, template = [{"role": "user", "content": prompt}], None
        else:
            messages, template = list(prompt.messages), prompt.chat_template
        template = template or getattr(self.tokenizer, "chat_template", None)
        if template:
            ids = self.tokenizer.apply_chat_template(messages, chat_template=template, tokenize=True,
                                                     add_generation_prompt=True)
            if isinstance(ids, dict) or hasattr(ids, "input_ids"):
                ids = ids["input_ids"]
            return list(ids)
        return list(self.tokenizer.encode(plain_transcript(messages)))

    def use_sampling(self, options: dict[str, Any],
                     grammar_bounds: tuple[int | str | None, int | str | None] = (None, None)) -> None:
        """Extra `SamplingParams` (model.sampling: repetition_penalty, top_p, seed, stop, ...) for every request,
        and the grammar-only string/array bounds (schema_policy.max_string_length / max_array_items)."""
        self.sampling_options = dict(options)
        self.grammar_bounds = grammar_bounds

    def _sampling(self, json_schema: dict[str, Any] | None, max_tokens: int, temperature: float,
                  min_tokens: int = 0, seed: int | None = None) -> Any:
        """Sampling parameters. The schema keeps its key order: the grammar emits properties in that order,
        so reasoning fields declared before answers are generated before them."""
        from vllm import SamplingParams

        from schemas.bounds import grammar_schema

        structured = None
        if json_schema is not None:
            bounds = getattr(self, "grammar_bounds", (None, None))
            bounded = grammar_schema(json_schema, *bounds, max_tokens=max_tokens)
            structured = structured_params(bounded, getattr(self, "backend", "xgrammar"))
        extra = dict(getattr(self, "sampling_options", {}))
        if seed is not None:  # this request's own seed (a resampling attempt), over model.sampling.seed
            extra["seed"] = seed
        return SamplingParams(max_tokens=max_tokens, temperature=temperature, structured_outputs=structured,
                              min_tokens=min_tokens, **extra)

    def sampling_for(self, n: int, json_schema: dict[str, Any] | None | Sequence[dict[str, Any] | None],
                     max_tokens: int, temperature: float, seeds: Sequence[int | None] | None = None) -> list[Any]:
        """One `SamplingParams` per prompt; prompts with the same schema (and seed) share one."""
        schemas = list(json_schema) if isinstance(json_schema, list | tuple) else [json_schema] * n
        seeds = list(seeds) if seeds is not None else [None] * n
        if len(schemas) != n or len(seeds) != n:
            raise ValueError(f"{len(schemas)} schemas and {len(seeds)} seeds for {n} prompts")
        by_text: dict[str, Any] = {}
        params = []
        for schema, seed in zip(schemas, seeds, strict=True):
            key = json.dumps([schema, seed])
            if key not in by_text:
                by_text[key] = self._sampling(schema, max_tokens, temperature, seed=seed)
            params.append(by_text[key])
        return params

    def wake_if_core_died(self) -> bool:
        """Whether the engine core (a child process, with V1 multiprocessing) has died. If it has, wake the
        engine thread: vLLM's sync client marks the core dead but leaves `step()` waiting on its output queue
        forever (vLLM 0.32), so the death is put on that queue, and `step()` raises `EngineDeadError`."""
        core = getattr(getattr(self.llm, "llm_engine", None), "engine_core", None)
        resources = getattr(core, "resources", None)
        if not getattr(resources, "engine_dead", False):
            return False
        outputs = getattr(core, "outputs_queue", None)
        if outputs is not None:
            from vllm.v1.engine.exceptions import EngineDeadError

            outputs.put_nowait(EngineDeadError())
        return True

    def close(self) -> None:
        """Stop the engine core now (with V1 multiprocessing it is a child process holding its memory)."""
        core = getattr(getattr(self.llm, "llm_engine", None), "engine_core", None)
        if core is not None and hasattr(core, "shutdown"):
            core.shutdown()

    def generate_exact(self, prompts: list[list[int]], lengths: list[int], temperature: float) -> list[Generation]:
        """Free text of exactly `lengths[i]` tokens per prompt (benchmarks: equal output lengths across arms)."""
        from vllm.inputs import TokensPrompt

        params = [self._sampling(None, max(n, 1), temperature, min_tokens=max(n, 1)) for n in lengths]
        outputs = self.llm.generate([TokensPrompt(prompt_token_ids=ids) for ids in prompts], params, use_tqdm=False)
        return generations(prompts, outputs)

    def reset_prefix_cache(self) -> None:
        """Forget cached prompt prefixes (benchmarks time each arm from a cold cache)."""
        self.llm.reset_prefix_cache()

    def warm(self, json_schema: dict[str, Any]) -> float:
        """Compile `json_schema`'s grammar with a one-token request; returns the seconds it took."""
        from vllm.inputs import TokensPrompt

        started = time.perf_counter()
        prompt = TokensPrompt(prompt_token_ids=self.prompt_token_ids("{}"))
        self.llm.generate([prompt], self._sampling(json_schema, 1, 0.0), use_tqdm=False)
        return time.perf_counter() - started

    def compile(self, json_schema: dict[str, Any]) -> float | None:
        """Compile `json_schema`'s grammar without a request, on the calling thread; returns the seconds it
        took, or None where it cannot (no structured-output backend yet, or an engine core in another
        process). Raises if the backend cannot compile it.

        The compiled grammar lands in the backend's cache under the same key a request with this schema
        uses, so that request finds it ready. Unlike `warm`, nothing queues behind the documents a busy
        engine is decoding."""
        from vllm.v1.structured_output.backend_types import StructuredOutputOptions

        core = getattr(getattr(self.llm.llm_engine, "engine_core", None), "engine_core", None)
        backend = getattr(getattr(core, "structured_output_manager", None), "backend", None)
        if backend is None:
            return None
        started = time.perf_counter()
        backend.compile_grammar(StructuredOutputOptions.JSON, grammar_spec(json_schema))
        return time.perf_counter() - started

    def generate(
        self,
        prompts: list[list[int]],
        json_schema: dict[str, Any] | None | Sequence[dict[str, Any] | None],
        max_tokens: int,
        temperature: float,
        seeds: Sequence[int | None] | None = None,
    ) -> list[Generation]:
        """One `Generation` per prompt; under a JSON Schema's grammar, or free text where it is None.

        `json_schema` is one schema for every prompt, or a list of one per prompt (per-row schemas); `seeds`,
        if given, one sampling seed per prompt."""
        from vllm.inputs import TokensPrompt

        if not prompts:
            return []
        params = self.sampling_for(len(prompts), json_schema, max_tokens, temperature, seeds)
        outputs = self.llm.generate(
            [TokensPrompt(prompt_token_ids=ids) for ids in prompts], params, use_tqdm=False
        )
        return generations(prompts, outputs)


class _Job:
    """One caller's prompts in the engine thread: filled in as its requests finish."""

    def __init__(self, prompts: list[list[int]], params: list[Any]) -> None:
        self.prompts = prompts
        self.params = params
        self.outputs: list[Any] = [None] * len(prompts)
        self.left = len(prompts)
        self.done = threading.Event()
        self.error: BaseException | None = None

    def fail(self, error: BaseException) -> None:
        self.error = error
        self.done.set()


class EngineThread:
    """One vLLM engine driven by one thread of its own, shared by callers on other threads.

    Each caller's `generate` adds its requests to the running engine and waits for its own outputs. The
    thread keeps stepping while any request is unfinished, so a batch that arrives joins the sequences
    already decoding (continuous batching across Ray Data batches) instead of waiting for the engine to
    drain; with several batches in flight per actor the engine's queue never empties between them.

    Everything that touches the engine, its construction included, runs on this one thread. vLLM's CPU
    backend binds its OpenMP threads to cores from the thread that built the engine: Ray Data calls an
    actor's UDF on a thread of its own, and there the same 30 documents took 21.9 s instead of 17.0 s.
    """

    def __init__(self, **llm_args: Any) -> None:
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._ready = threading.Event()
        self._startup_error: BaseException | None = None
        self._failure: str | None = None  # why the engine thread stopped, once it has
        self._engine: VllmEngine | None = None
        self._ids = itertools.count()
        self.on_request_done: Callable[[Any], None] | None = None  # called on the engine thread per finished request
        self.on_tokens: Callable[[int], None] | None = None  # called on the engine thread per step: tokens it made
        self._thread = threading.Thread(target=self._run, args=(llm_args,), name="vllm-engine", daemon=True)
        self._thread.start()
        self._ready.wait()
        if self._startup_error is not None:
            raise EngineStartError(explain_start_failure(self._startup_error)) from self._startup_error
        assert self._engine is not None
        self.init_seconds = self._engine.init_seconds
        self.max_model_len = self._engine.max_model_len
        self.max_chars_per_token = self._engine.max_chars_per_token

    # -- the caller's side ---------------------------------------------------------------------------

    def prompt_token_ids(self, prompt: Any) -> list[int]:
        assert self._engine is not None
        return self._engine.prompt_token_ids(prompt)

    def use_sampling(self, options: dict[str, Any],
                     grammar_bounds: tuple[int | str | None, int | str | None] = (None, None)) -> None:
        assert self._engine is not None
        self._engine.use_sampling(options, grammar_bounds)

    def warm(self, json_schema: dict[str, Any]) -> float:
        """Compile `json_schema`'s grammar with a one-token request; returns the seconds it took."""
        started = time.perf_counter()
        self.generate([self.prompt_token_ids("{}")], json_schema, 1, 0.0)
        return time.perf_counter() - started

    def compile(self, json_schema: dict[str, Any]) -> float | None:
        """As `VllmEngine.compile`, on the calling thread: the engine thread keeps decoding meanwhile."""
        assert self._engine is not None
        return self._engine.compile(json_schema)

    def generate(self, prompts: list[list[int]], json_schema: dict[str, Any] | None | Sequence[dict[str, Any] | None],
                 max_tokens: int, temperature: float, seeds: Sequence[int | None] | None = None) -> list[Generation]:
        """As `VllmEngine.generate`; safe to call from several threads at once. A request the engine refuses
        comes back as a `Generation` with finish_reason "refused"; the others in the call go on."""
        if not prompts:
            return []
        assert self._engine is not None
        if not self._thread.is_alive():
            raise EngineFatal(f"the engine thread has stopped: {self._failure or 'closed'}")
        job = _Job(prompts, self._engine.sampling_for(len(prompts), json_schema, max_tokens, temperature, seeds))
        self._jobs.put(job)
        while not job.done.wait(5.0):
            self._engine.wake_if_core_died()
            if not self._thread.is_alive() and not job.done.is_set():  # closed or crashed after we looked
                raise EngineFatal(f"the engine thread has stopped: {self._failure or 'closed'}")
        if job.error is not None:
            raise job.error
        return generations(prompts, job.outputs)

    def close(self) -> None:
        if self._thread.is_alive():
            self._jobs.put(None)
            self._thread.join(timeout=60)

    # -- the engine thread ---------------------------------------------------------------------------

    def _run(self, llm_args: dict[str, Any]) -> None:
        try:
            self._engine = VllmEngine(**llm_args)
        except BaseException as exc:  # noqa: BLE001 - handed to the constructor's caller
            self._startup_error = exc
            return
        finally:
            self._ready.set()
        owner: dict[str, tuple[_Job, int, str]] = {}  # request id → its job, its position, vLLM's internal id
        try:
            self._count_tokens(self._engine.llm.llm_engine)
            self._serve(self._engine.llm.llm_engine, owner)
        except BaseException as exc:  # noqa: BLE001 - a bug here must not leave callers waiting forever
            self._failure = f"{type(exc).__name__}: {exc}"
            log.error("engine.thread_failed", error=repr(exc), requests=len(owner))
            fatal = exc if isinstance(exc, EngineFatal) else EngineFatal(self._failure)
            self._abort_all(owner, fatal)

    def _serve(self, engine: Any, owner: dict[str, tuple[_Job, int, str]]) -> None:
        while True:
            # Wait for work when idle; otherwise take whatever arrived since the last step, without waiting.
            while True:
                try:
                    job = self._jobs.get(block=not owner)
                except queue.Empty:
                    break
                if job is None:
                    self._abort_all(owner, RuntimeError("the engine was closed"))
                    self._engine.close()
                    return
                try:
                    self._add(engine, job, owner)
                except EngineFatal as exc:
                    job.fail(exc)
                    raise
            if not owner:
                continue
            try:
                finished = [o for o in engine.step() if o.finished]
            except Exception as exc:  # a failed step leaves the engine in no known state
                # Per-request failures come back as finish_reason "error"; a step that raises means the engine
                # itself broke (its core died, memory ran out). Every caller is told it is fatal and the thread
                # ends: the actor exits, and Ray redoes the batches on a fresh engine.
                raise EngineFatal(f"the engine failed a step: {type(exc).__name__}: {exc}") from exc
            for output in finished:
                entry = owner.pop(output.request_id, None)
                if entry is None:
                    continue
                job, index, _ = entry
                job.outputs[index] = output
                job.left -= 1
                if job.left == 0:
                    job.done.set()
                self._request_done(output)

    def _count_tokens(self, engine: Any) -> None:
        """Count the tokens each step makes, for the live display (`on_tokens`), before any request finishes.

        Requests are added with `FINAL_ONLY`, so `step()` returns nothing until a request is done: with a
        few dozen documents decoding together, the first can take a minute on CPU. The tokens are counted
        where vLLM's `LLMEngine.step` hands the core's outputs to its output processor (vLLM 0.32); where that
        hook is missing, only finished requests are counted."""
        processor = getattr(engine, "output_processor", None)
        process = getattr(processor, "process_outputs", None)
        if process is None:
            return

        def counting(outputs: Any, *args: Any, **kwargs: Any) -> Any:
            hook = self.on_tokens
            if hook is not None and outputs:
                try:
                    hook(sum(len(getattr(o, "new_token_ids", None) or ()) for o in outputs))
                except Exception:  # noqa: BLE001 - the display is best effort; serving must go on
                    pass
            return process(outputs, *args, **kwargs)

        processor.process_outputs = counting

    def _request_done(self, output: Any) -> None:
        """The optional per-request hook (the actor's live counts): it only adds to counters under a lock."""
        hook = self.on_request_done
        if hook is not None:
            try:
                hook(output)
            except Exception:  # noqa: BLE001 - the display is best effort; serving must go on
                pass

    def _add(self, engine: Any, job: _Job, owner: dict[str, tuple[_Job, int, str]]) -> None:
        from vllm.inputs import TokensPrompt
        from vllm.sampling_params import RequestOutputKind

        for index, (ids, params) in enumerate(zip(job.prompts, job.params, strict=True)):
            params.output_kind = RequestOutputKind.FINAL_ONLY
            request_id = f"x{next(self._ids)}"
            try:
                owner[request_id] = (job, index, engine.add_request(request_id, TokensPrompt(prompt_token_ids=ids),
                                                                    params))
            except Exception as exc:  # e.g. a grammar the backend refuses: this request only
                if is_fatal(exc):
                    raise EngineFatal(f"the engine failed to take a request: {type(exc).__name__}: {exc}") from exc
                job.outputs[index] = _Refused(f"{type(exc).__name__}: {exc}")
                job.left -= 1
        if job.left == 0:  # every request was refused
            job.done.set()

    def _abort_all(self, owner: dict[str, tuple[_Job, int, str]], error: BaseException) -> None:
        for job in {id(j): j for j, _, _ in owner.values()}.values():
            job.fail(error)
        owner.clear()
