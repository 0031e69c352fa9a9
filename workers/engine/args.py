"""The engine's `LLM(...)` arguments: our defaults (prompt-lookup speculation and a KV budget on CPU), then
the job's `engine_kwargs`."""

from __future__ import annotations

import dataclasses
import os
from typing import Any

import structlog

from workers.engine.imports import collector_paused
from workers.engine.precision import cpu_dtype
from workers.memory import KvNeed, cpu_kv_arguments

log = structlog.get_logger("workers.engine")

# Prompt-lookup speculation (vLLM's `ngram` method), our default on CPU. An extraction copies its values out
# of the document, and a small model's runaway repeats copy themselves: both are drafts the prompt and the
# output already hold. Each draft token must pass the grammar before the model verifies it, and the model
# keeps only the tokens it would have chosen itself, so the output is the model's (at temperature 0, its
# greedy choice; CPU numerics aside). Measured on 100 synthetic invoices, 2 cores: 25-27 s per constrained
# generation against 32-34 s without (README, "Speculation from the document"). Not a GPU default, as it is
# unmeasured there: verifying drafts the model rejects spends compute a large batch may not have spare.
# `engine_kwargs: {speculative_config: null}` turns it off.
# Four drafts a step since 2026-12-03 (eight before): each draft is one more row of every logits-sized tensor
# of a step (logits, masks, penalties, log-probabilities), and with four the sample job's actor peaked at
# 1.98 GiB against 2.08-2.09 with eight, its generation 76.6 and 82.9 s against 75.9 and 91.7 s (interleaved,
# 16 sequences a step, one quiet machine whose speed drifted between runs; docs/performance.md).
PROMPT_LOOKUP: dict[str, Any] = {"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_min": 3,
                                 "prompt_lookup_max": 5}

# The sequences a CPU engine runs in one step, per thread of the engine (our default `max_num_seqs` on CPU; a
# job's `engine_kwargs.max_num_seqs` wins). vLLM's own CPU default is 256, so the engine ran every request the
# actor had in flight (64 for the sample job) at once. Measured on the sample job, 2 cores, a quiet machine,
# `extract eval` (docs/performance.md, "Actor memory on CPU", third pass): generation 63.1 s at 64 sequences,
# 61.9 s at 32, 54.1 and 49.9 s at 16, 76.2 s at 8; the actor's peak RSS 3.05, 2.47, 2.16 and 2.10, 1.82 GiB, as
# the KV cache is sized for the sequences a step runs and each step's logits-sized transients scale with them;
# F1 0.723-0.734 at every size. Per thread because a step's model work grows with its sequences and more threads
# need more of it to stay busy; measured on 2 cores only. Not a GPU default: nothing was measured there.
CPU_SEQUENCES_PER_THREAD = 8


def speculates(llm_args: dict[str, Any]) -> bool:
    return bool(llm_args.get("speculative_config"))


def speculation_method(llm_args: dict[str, Any]) -> str | None:
    return (llm_args.get("speculative_config") or {}).get("method")


def has_accelerator() -> bool:
    try:
        with collector_paused():  # the first torch import of an actor (workers.engine.imports)
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
    kv_need: KvNeed | None = None,
) -> dict[str, Any]:
    """vLLM `LLM(...)` keyword arguments: our defaults, overridden by the user's `engine_kwargs`.

    An engine holds one structured-output backend (vLLM V1), so `backend` is per engine: a job whose
    schemas XGrammar cannot compile runs them on an actor pool whose engines use `guidance`.

    On CPU the KV cache gets an explicit budget for `sequences` in flight (`workers.memory`), never a share
    of the machine, each sequence sized from `kv_need` (the job's prompt + max_tokens) or else max_model_len;
    `free_memory` (bytes) is measured when not given. Raises `KvBudgetError` when the
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
    check_speculative_config(engine_kwargs.get("speculative_config"))
    if not accelerator:
        engine_kwargs = {"max_num_seqs": cpu_sequences(), **cpu_dtype(model_path, engine_kwargs, free_memory),
                         **engine_kwargs}
        if kv_need is not None:  # the drafts' slots: vLLM allocates them ahead of each decode step
            drafts = engine_kwargs.get("speculative_config", PROMPT_LOOKUP) or {}
            kv_need = dataclasses.replace(kv_need, lookahead=int(drafts.get("num_speculative_tokens") or 0))
        kv_args, budget = cpu_kv_arguments(model_path, max_model_len, sequences, engine_kwargs, free_memory, kv_need,
                                           share_prefix=bool(engine_kwargs.get("enable_prefix_caching", True)))
        args.update(kv_args)
        if budget is not None:
            log.info("engine.kv_budget", sequences=sequences, max_num_seqs=engine_kwargs.get("max_num_seqs"),
                     max_model_len=max_model_len, **budget.describe())
        args["speculative_config"] = dict(PROMPT_LOOKUP)
    user = dict(engine_kwargs)
    so_user = user.pop("structured_outputs_config", None)
    if so_user:
        args["structured_outputs_config"] = {**args["structured_outputs_config"], **so_user}
    args.update(user)
    return args


def check_speculative_config(drafts: Any) -> None:
    """A job's `speculative_config` is a mapping or null; anything else is named before vLLM sees it."""
    if drafts is not None and not isinstance(drafts, dict):
        raise ValueError(f"model.engine_kwargs.speculative_config must be a mapping (for example {{method: ngram, "
                         f"num_speculative_tokens: 4}}) or null, not {type(drafts).__name__} {str(drafts)[:60]!r}")


def cpu_sequences(threads: int | None = None) -> int:
    """Our default `max_num_seqs` on CPU: `CPU_SEQUENCES_PER_THREAD` per thread the engine computes with
    (`threads`, else the process's OMP_NUM_THREADS, which Ray sets to an actor's CPUs, else the CPUs this process
    may run on)."""
    if threads is None:
        omp = os.environ.get("OMP_NUM_THREADS", "")
        threads = int(omp) if omp.isdigit() and int(omp) > 0 else usable_cores()
    return CPU_SEQUENCES_PER_THREAD * max(1, threads)


def usable_cores() -> int:
    """The CPUs this process may run on (its affinity where the OS has one, else the machine's)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def unknown_engine_kwargs(engine_kwargs: dict[str, Any]) -> list[str]:
    """The keys of a job's `engine_kwargs` that the installed vLLM's `EngineArgs` does not have (`LLM(...)`
    passes every keyword on to it). For `extract validate`, not for a run's driver."""
    from workers.vllm_compat import engine_arg_names  # the installed vLLM's EngineArgs, through the door

    return sorted(set(engine_kwargs) - engine_arg_names())
