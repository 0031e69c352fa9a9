"""The bench arm `naive`: what a user writes with vLLM alone, next to the pipeline (issue 27).

vLLM's own defaults for everything the pipeline tunes: no prompt-lookup speculation, no
`disable_any_whitespace`, XGrammar's own logits mask, no presence penalty and no log-probabilities, vLLM's
`max_num_seqs`, `max_num_batched_tokens` and prefix caching, its engine core in a process of its own. The
user's prompt (`cfg.prompt`, rendered as the `engine` arm renders it: no few-shot examples, no grounding),
the plain JSON Schema grammar, one `generate` call over every document, classified with the job's contract.

Two things are not vLLM's defaults: on CPU the KV cache is a fixed byte budget sized as the `engine` arm's
(`workers.memory.cpu_kv_arguments`), never a share of the machine; and the job's own `engine_kwargs` are kept
(`enforce_eager`, a test's `kv_cache_memory_bytes`), except the keys that are the pipeline's levers (`LEVERS`).

Its records are scored as every arm's are (`pipeline.tools.bench_scoring`)."""

from __future__ import annotations

import os
import time
from typing import Any

from pipeline.config import LoadedConfig

ARM = "naive"
# The engine_kwargs keys that are the pipeline's levers: the naive arm leaves them at vLLM's defaults.
LEVERS = ("speculative_config", "structured_outputs_config", "max_num_seqs", "max_num_batched_tokens",
          "enable_prefix_caching")
# XGrammar's own mask kernel (workers.bitmask), vLLM's own penalties (workers.penalties), and vLLM's engine core
# in its own process, as vLLM starts it.
NAIVE_ENV = {"EXTRACT_MASK_KERNEL": "xgrammar", "EXTRACT_PENALTY_KERNEL": "vllm", "TOKENIZERS_PARALLELISM": "false"}


def naive_engine_arguments(model_path: str, max_model_len: int, engine_kwargs: dict[str, Any], sequences: int,
                           accelerator: bool, free: int | None = None) -> dict[str, Any]:
    """`LLM(...)` keyword arguments: the model, its context, the job's engine_kwargs without `LEVERS`, and on
    CPU a KV budget in bytes for `sequences` of max_model_len (the job's own `kv_cache_memory_bytes` wins)."""
    from workers.memory import cpu_kv_arguments

    kept = {k: v for k, v in engine_kwargs.items() if k not in LEVERS}
    args: dict[str, Any] = {"model": model_path, "max_model_len": max_model_len, **kept}
    if not accelerator and "gpu_memory_utilization" not in kept:
        kv_args, _ = cpu_kv_arguments(model_path, max_model_len, sequences, kept, free, None, share_prefix=True)
        args.update(kv_args)
    return args


def naive_ratios(arms: dict[str, dict[str, Any]]) -> dict[str, float | None]:
    """The pipeline over the naive arm, in docs/s and in correct leaves/s (None without either arm, or at 0)."""
    pipeline, naive = arms.get("pipeline", {}), arms.get(ARM, {})

    def div(key: str) -> float | None:
        a, b = pipeline.get(key), naive.get(key)
        return round(a / b, 3) if a and b else None

    return {"pipeline_over_naive": div("docs_per_s"),
            "pipeline_over_naive_correct_leaves": div("correct_leaves_per_s")}


def naive_arm(loaded: LoadedConfig, texts: list[str]) -> dict[str, Any]:
    """Run the arm in this process (a child of the bench's: `bench._in_child`, env `NAIVE_ENV`). Returns the
    generations, the timed seconds (render + generate), the max_tokens=1 seconds (render + prefill + one
    step), the contract's records, and what else the report shows."""
    import json

    from workers.bundled_model import resolve_model_path
    from workers.classify import classify
    from workers.engine import VllmEngine, has_accelerator
    from workers.prompt import render_prompt

    for key, value in NAIVE_ENV.items():
        os.environ.setdefault(key, value)
    cfg, contract = loaded.config, loaded.contract
    schema = contract.json_schema
    accelerator = has_accelerator()
    llm_args = naive_engine_arguments(resolve_model_path(loaded.model_path), cfg.model.max_model_len,
                                      dict(cfg.model.engine_kwargs), len(texts), accelerator)
    engine = VllmEngine(accelerator=accelerator, **llm_args)
    try:
        compile_s = engine.warm(schema)
        started = time.perf_counter()
        prompts = [engine.prompt_token_ids(render_prompt(cfg.prompt, t, json.dumps(schema, ensure_ascii=False)))
                   for t in texts]
        render_s = time.perf_counter() - started
        max_tokens, temperature = cfg.model.max_tokens, cfg.model.temperature
        engine.reset_prefix_cache()
        started = time.perf_counter()
        engine.generate(prompts, schema, 1, temperature)
        prefill_s = time.perf_counter() - started
        engine.reset_prefix_cache()
        started = time.perf_counter()
        gens = engine.generate(prompts, schema, max_tokens, temperature)
        seconds = time.perf_counter() - started
        outcomes = [classify(g, contract, {"document": t}) for g, t in zip(gens, texts, strict=True)]
    finally:
        engine.close()
    return {"generations": gens, "seconds": seconds + render_s, "prefill_plus_one_s": prefill_s + render_s,
            "records": [o.record for o in outcomes], "truncated": sum(o.reason == "truncated" for o in outcomes),
            "render_s": round(render_s, 3), "engine_init_s": round(engine.init_seconds, 3),
            "schema_compile_s": round(compile_s, 3),
            "engine_kwargs": {k: v for k, v in llm_args.items() if k != "model"}}
