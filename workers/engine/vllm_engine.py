"""`VllmEngine`: one vLLM `LLM`, generating under a JSON Schema grammar (XGrammar backend by default).

The rest of the project talks to it (or to `EngineThread`, which drives one from a thread of its own) only:
token counting for the context check, one warm-up per schema, and batched constrained generation."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import Any

import structlog

from workers import vllm_compat
from workers.engine.args import has_accelerator, speculation_method
from workers.engine.contract import Engine, GrammarBounds
from workers.engine.cpu import cpu_patches
from workers.engine.imports import collector_paused
from workers.engine.outputs import Generation, generations, longest_token_chars, structured_params
from workers.engine.requests import run_to_completion

log = structlog.get_logger("workers.engine")

# A run's sampling: `model.sampling`'s extra `SamplingParams` and the grammar-only bounds (`use_sampling`).
Sampling = tuple[dict[str, Any], GrammarBounds]


def chat_token_ids(tokenizer: Any, prompt: Any) -> list[int]:
    """The chat-formatted prompt as token ids: one user message (text), or a `Chat` (system, few-shot turns,
    document) under its own chat template, else the tokenizer's, else as a plain transcript."""
    from workers.chat_tokens import chat_tokens
    from workers.prompt import plain_transcript

    if isinstance(prompt, str):
        messages, template = [{"role": "user", "content": prompt}], None
    else:
        messages, template = list(prompt.messages), prompt.chat_template
    template = template or getattr(tokenizer, "chat_template", None)  # a tokenizer's attribute, None when unset
    if template:  # the part before the document tokenized once (workers.chat_tokens): the same ids
        return chat_tokens.ids(tokenizer, messages, template)
    return list(tokenizer.encode(plain_transcript(messages)))


class VllmEngine(Engine):
    """One vLLM engine; `generate` takes token-id prompts and returns one `Generation` per prompt."""

    backend = "xgrammar"  # the structured-output backend (the engine's `structured_outputs_config`)

    def __init__(self, accelerator: bool | None = None, **llm_args: Any) -> None:
        with collector_paused():  # some 2-3 s less of every engine start (workers.engine.imports)
            from vllm import LLM

        vllm_compat.check()  # the installed vLLM is the one the hooks were written for, or one line naming a hook
        patches = cpu_patches(llm_args, has_accelerator() if accelerator is None else accelerator)
        self.mask_kernel, self.penalty_kernel = patches["mask_kernel"], patches["penalty_kernel"]
        self.logprob_ranks = patches["logprob_ranks"]
        started = time.perf_counter()
        self.llm = LLM(**llm_args)
        self.init_seconds = time.perf_counter() - started
        vllm_compat.check_engine(self.llm)
        self.tokenizer = self.llm.get_tokenizer()
        self.max_model_len = int(self.llm.llm_engine.model_config.max_model_len)
        self.max_chars_per_token = longest_token_chars(self.tokenizer)
        self.backend = (llm_args.get("structured_outputs_config") or {}).get("backend", "xgrammar")
        kv_bytes = llm_args.get("kv_cache_memory_bytes")
        log.info("engine.ready", model=llm_args.get("model"), seconds=round(self.init_seconds, 2),
                 kv_cache_gib=round(kv_bytes / (1 << 30), 3) if kv_bytes else None,
                 dtype=llm_args.get("dtype", "model's"))  # float32 where the CPU lacks native half types
        # How the engine runs inside (EXTRACT_LOG_LEVEL=debug shows it): not a setting of the job.
        log.debug("engine.internals", mask_kernel=self.mask_kernel, penalty_kernel=self.penalty_kernel,
                  logprob_ranks=self.logprob_ranks, speculation=speculation_method(llm_args))

    def prompt_token_ids(self, prompt: Any) -> list[int]:
        """The chat-formatted prompt as token ids (`chat_token_ids` with the engine's tokenizer)."""
        return chat_token_ids(self.tokenizer, prompt)

    def document_counter(self, render: Any) -> Any:
        from workers.chat_tokens import document_counter

        return document_counter(self.tokenizer, render)

    def _sampling(self, json_schema: dict[str, Any] | None, max_tokens: int, temperature: float,
                  min_tokens: int = 0, seed: int | None = None, using: Sampling | None = None) -> Any:
        """Sampling parameters. The schema keeps its key order: the grammar emits properties in that order,
        so reasoning fields declared before answers are generated before them. `using`: the caller's own
        (options, grammar bounds) instead of `use_sampling`'s (a shared engine host serves runs that differ)."""
        from vllm import SamplingParams

        from schemas.bounds import grammar_schema

        options, bounds = using if using is not None else (self.sampling_options, self.grammar_bounds)
        structured = None
        if json_schema is not None:
            bounded = grammar_schema(json_schema, *bounds, max_tokens=max_tokens)
            structured = structured_params(bounded, self.backend)
        extra = dict(options)
        if seed is not None:  # this request's own seed (a resampling attempt), over model.sampling.seed
            extra["seed"] = seed
        return SamplingParams(max_tokens=max_tokens, temperature=temperature, structured_outputs=structured,
                              min_tokens=min_tokens, **extra)

    def sampling_for(self, n: int, json_schema: dict[str, Any] | None | Sequence[dict[str, Any] | None],
                     max_tokens: int, temperature: float, seeds: Sequence[int | None] | None = None,
                     using: Sampling | None = None) -> list[Any]:
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
                by_text[key] = self._sampling(schema, max_tokens, temperature, seed=seed, using=using)
            params.append(by_text[key])
        return params

    def wake_if_core_died(self) -> bool:
        """Whether the engine core (a child process, with V1 multiprocessing) has died; if so, `step()` is woken
        to raise `EngineDeadError` (`workers.vllm_compat.wake_if_core_died`)."""
        return vllm_compat.wake_if_core_died(self.llm)

    def close(self) -> None:
        """Stop the engine core now (with V1 multiprocessing it is a child process holding its memory)."""
        vllm_compat.shutdown(self.llm)

    def generate_exact(self, prompts: list[list[int]], lengths: list[int], temperature: float) -> list[Generation]:
        """Free text of exactly `lengths[i]` tokens per prompt (benchmarks: equal output lengths across arms)."""
        params = [self._sampling(None, max(n, 1), temperature, min_tokens=max(n, 1)) for n in lengths]
        return generations(prompts, run_to_completion(self.llm.llm_engine, prompts, params))

    def reset_prefix_cache(self) -> None:
        """Forget cached prompt prefixes (benchmarks time each arm from a cold cache)."""
        self.llm.reset_prefix_cache()

    def warm(self, json_schema: dict[str, Any]) -> float:
        """Compile `json_schema`'s grammar with a one-token request; returns the seconds it took. A schema the
        engine refuses is not raised: its requests come back "refused", as `EngineThread.warm`'s do."""
        started = time.perf_counter()
        self.generate([self.prompt_token_ids("{}")], json_schema, 1, 0.0)
        return time.perf_counter() - started

    def compile(self, json_schema: dict[str, Any]) -> float | None:
        """Compile `json_schema`'s grammar without a request, on the calling thread; returns the seconds it
        took, or None where it cannot (no structured-output backend yet, or an engine core in another
        process). Raises if the backend cannot compile it.

        The compiled grammar lands in the backend's cache under the same key a request with this schema
        uses, so that request finds it ready. Unlike `warm`, nothing queues behind the documents a busy
        engine is decoding."""
        backend = vllm_compat.grammar_backend(self.llm)
        if backend is None:
            return None
        started = time.perf_counter()
        structured = structured_params(json_schema, self.backend)  # the text, and kind, a request would carry
        if structured.grammar is not None:
            vllm_compat.compile_grammar_text(backend, structured.grammar)
        else:
            vllm_compat.compile_json(backend, structured.json)
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
        if given, one sampling seed per prompt. A request the engine refuses comes back as a `Generation` with
        finish_reason "refused" and the others go on, as with `EngineThread` (`workers.engine.requests`)."""
        if not prompts:
            return []
        params = self.sampling_for(len(prompts), json_schema, max_tokens, temperature, seeds)
        return generations(prompts, run_to_completion(self.llm.llm_engine, prompts, params))
