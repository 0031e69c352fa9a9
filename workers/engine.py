"""The engine adapter: one vLLM `LLM`, generating under a JSON Schema grammar (XGrammar backend).

The rest of the project talks to `VllmEngine` only: token counting for the context check, one
warm-up per schema, and batched constrained generation. vLLM is imported here and nowhere else.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import structlog

log = structlog.get_logger(__name__)


@dataclass(frozen=True)
class Generation:
    text: str
    finish_reason: str | None
    prompt_tokens: int
    output_tokens: int


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
) -> dict[str, Any]:
    """vLLM `LLM(...)` keyword arguments: our defaults, overridden by the user's `engine_kwargs`.

    An engine holds one structured-output backend (vLLM V1), so `backend` is per engine: a job whose
    schemas XGrammar cannot compile runs them on an actor pool whose engines use `guidance`."""
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
        # On CPU this is the share of RAM reserved for weights and KV cache.
        args["gpu_memory_utilization"] = 0.25
    user = dict(engine_kwargs)
    so_user = user.pop("structured_outputs_config", None)
    if so_user:
        args["structured_outputs_config"] = {**args["structured_outputs_config"], **so_user}
    args.update(user)
    return args


class VllmEngine:
    """One vLLM engine; `generate` takes token-id prompts and returns one `Generation` per prompt."""

    def __init__(self, **llm_args: Any) -> None:
        from vllm import LLM

        started = time.perf_counter()
        self.llm = LLM(**llm_args)
        self.init_seconds = time.perf_counter() - started
        self.tokenizer = self.llm.get_tokenizer()
        self.max_model_len = int(self.llm.llm_engine.model_config.max_model_len)
        log.info("engine.ready", model=llm_args.get("model"), seconds=round(self.init_seconds, 2))

    def prompt_token_ids(self, text: str) -> list[int]:
        """The chat-formatted prompt for one user message, as token ids."""
        messages = [{"role": "user", "content": text}]
        if getattr(self.tokenizer, "chat_template", None):
            ids = self.tokenizer.apply_chat_template(messages, tokenize=True, add_generation_prompt=True)
            if isinstance(ids, dict) or hasattr(ids, "input_ids"):
                ids = ids["input_ids"]
            return list(ids)
        return list(self.tokenizer.encode(text))

    def _sampling(self, json_schema: dict[str, Any] | None, max_tokens: int, temperature: float,
                  min_tokens: int = 0) -> Any:
        """Sampling parameters. The schema keeps its key order: the grammar emits properties in that order,
        so reasoning fields declared before answers are generated before them."""
        from vllm import SamplingParams
        from vllm.sampling_params import StructuredOutputsParams

        structured = None
        if json_schema is not None:
            structured = StructuredOutputsParams(json=json.dumps(json_schema))
        return SamplingParams(max_tokens=max_tokens, temperature=temperature, structured_outputs=structured,
                              min_tokens=min_tokens)

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
        return [Generation(text=o.outputs[0].text, finish_reason=o.outputs[0].finish_reason, prompt_tokens=len(ids),
                           output_tokens=len(o.outputs[0].token_ids)) for ids, o in zip(prompts, outputs, strict=True)]

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

    def generate(
        self,
        prompts: list[list[int]],
        json_schema: dict[str, Any] | None | Sequence[dict[str, Any] | None],
        max_tokens: int,
        temperature: float,
    ) -> list[Generation]:
        """One `Generation` per prompt; under a JSON Schema's grammar, or free text where it is None.

        `json_schema` is one schema for every prompt, or a list of one per prompt (per-row schemas)."""
        from vllm.inputs import TokensPrompt

        if not prompts:
            return []
        if isinstance(json_schema, list | tuple):
            if len(json_schema) != len(prompts):
                raise ValueError(f"{len(json_schema)} schemas for {len(prompts)} prompts")
            by_text: dict[str, Any] = {}
            params: Any = []
            for schema in json_schema:
                key = json.dumps(schema)
                if key not in by_text:
                    by_text[key] = self._sampling(schema, max_tokens, temperature)
                params.append(by_text[key])
        else:
            params = self._sampling(json_schema, max_tokens, temperature)
        outputs = self.llm.generate(
            [TokensPrompt(prompt_token_ids=ids) for ids in prompts], params, use_tqdm=False
        )
        results = []
        for ids, out in zip(prompts, outputs, strict=True):
            completion = out.outputs[0]
            results.append(
                Generation(
                    text=completion.text,
                    finish_reason=completion.finish_reason,
                    prompt_tokens=len(ids),
                    output_tokens=len(completion.token_ids),
                )
            )
        return results
