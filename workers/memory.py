"""The KV cache's memory on CPU: an explicit budget, sized from what the job needs.

vLLM's CPU worker, left to itself, sizes the KV cache as `gpu_memory_utilization` × the total memory of
NUMA node 0, minus what the process already holds. Node 0's total is not the machine's: a VM can report
3.7 GiB there while `free` says 23 GiB, and it grows as memory is hot-plugged. So the same share starts on
one machine and goes negative on the next. We give vLLM `kv_cache_memory_bytes` instead:

    need   = sequences in flight × max_model_len × bytes per token
    budget = min(need, half the memory free now), and at least one whole sequence

where bytes per token = layers × KV heads × head dim × dtype size × 2 (keys and values). "Free" is the
smaller of what the kernel says is available and what vLLM will check the budget against (node 0's
free memory). If even one sequence does not fit, the engine is not started: `KvBudgetError` says why and
which key to change.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

GIB = 1 << 30
MIB = 1 << 20
# Of the memory free when the engine starts, the share the KV cache may take: the weights, activations,
# compiled grammars and other processes on the node need the rest.
FREE_SHARE = 0.5
# When the model's shape cannot be read (a hub id not yet downloaded), the budget the job's need is capped at.
UNKNOWN_MODEL_BUDGET = 2 * GIB
_DTYPE_BYTES = {"float32": 4, "float": 4, "float16": 2, "half": 2, "bfloat16": 2, "fp8": 1, "float8": 1}


class KvBudgetError(RuntimeError):
    """The KV cache the job needs does not fit in the memory that is free; the message is one line."""


@dataclass(frozen=True)
class KvShape:
    layers: int
    kv_heads: int
    head_dim: int
    dtype_bytes: int

    @property
    def bytes_per_token(self) -> int:
        return self.layers * self.kv_heads * self.head_dim * self.dtype_bytes * 2


@dataclass(frozen=True)
class KvBudget:
    bytes: int
    need: int  # what every sequence in flight at max_model_len would take
    free: int  # memory free when it was sized
    capped: bool  # the need did not fit and the budget was cut to the free share

    def describe(self) -> dict[str, Any]:
        return {"kv_cache_gib": round(self.bytes / GIB, 3), "kv_need_gib": round(self.need / GIB, 3),
                "free_gib": round(self.free / GIB, 2), "kv_capped": self.capped}


def kv_shape(model_path: str, dtype: str | None = None) -> KvShape | None:
    """The model's KV layout from its Hugging Face `config.json`, or None where there is no local folder."""
    config_file = Path(model_path) / "config.json"
    if not config_file.is_file():
        return None
    config = json.loads(config_file.read_text())
    config = config.get("text_config", config)  # multimodal configs nest the language model's
    heads = int(config["num_attention_heads"])
    head_dim = config.get("head_dim") or int(config["hidden_size"]) // heads
    name = str(dtype if dtype and dtype != "auto" else config.get("torch_dtype") or config.get("dtype") or "bfloat16")
    return KvShape(layers=int(config["num_hidden_layers"]), kv_heads=int(config.get("num_key_value_heads") or heads),
                   head_dim=int(head_dim), dtype_bytes=_DTYPE_BYTES.get(name.removeprefix("torch."), 2))


def free_memory() -> int:
    """Bytes free for the KV cache: the smaller of the kernel's MemAvailable and node 0's free memory as
    vLLM's CPU worker measures it (it refuses a budget larger than that)."""
    import psutil

    from workers.vllm_compat import node_free_memory  # vLLM's CPU worker's rule, mirrored in the one door

    free = psutil.virtual_memory().available
    node = node_free_memory(0)
    return int(min(free, node) if node is not None else free)


def kv_budget(shape: KvShape | None, max_model_len: int, sequences: int, free: int) -> KvBudget:
    """The KV cache to ask for; raises `KvBudgetError` when not even one full-length sequence fits."""
    cap = int(free * FREE_SHARE)
    if shape is None:
        need = UNKNOWN_MODEL_BUDGET
        one_sequence = 0
    else:
        one_sequence = shape.bytes_per_token * max_model_len
        need = one_sequence * max(1, sequences)
    if one_sequence > cap:
        raise KvBudgetError(
            f"the KV cache needs {one_sequence / GIB:.2f} GiB for one sequence of model.max_model_len="
            f"{max_model_len} tokens, but only {cap / GIB:.2f} GiB of the {free / GIB:.2f} GiB free on node 0 may "
            "be used: lower model.max_model_len, free memory, or set model.engine_kwargs.kv_cache_memory_bytes")
    budget = max(min(need, cap), one_sequence)
    return KvBudget(bytes=budget, need=need, free=free, capped=need > cap)


def check_explicit(kv_bytes: int, free: int) -> None:
    """A budget the user set: refuse it before vLLM loads when it is more than the free memory."""
    if kv_bytes > free:
        raise KvBudgetError(
            f"the KV cache needs {kv_bytes / GIB:.2f} GiB (model.engine_kwargs.kv_cache_memory_bytes), but only "
            f"{free / GIB:.2f} GiB is free on node 0: lower model.engine_kwargs.kv_cache_memory_bytes or free memory")


def cpu_kv_arguments(model_path: str, max_model_len: int, sequences: int, engine_kwargs: dict[str, Any],
                     free: int | None = None) -> tuple[dict[str, Any], KvBudget | None]:
    """The KV-cache keyword arguments for a CPU engine, and the budget they came from.

    A job's own `kv_cache_memory_bytes` or `gpu_memory_utilization` wins (the first is still checked against
    free memory); otherwise the budget is sized here. `VLLM_CPU_KVCACHE_SPACE` (GiB), vLLM's legacy setting,
    also wins: vLLM reads it itself."""
    if "gpu_memory_utilization" in engine_kwargs:
        return {}, None
    free = free_memory() if free is None else free
    if engine_kwargs.get("kv_cache_memory_bytes") is not None:
        check_explicit(int(engine_kwargs["kv_cache_memory_bytes"]), free)
        return {}, None
    if os.environ.get("VLLM_CPU_KVCACHE_SPACE"):
        return {}, None
    budget = kv_budget(kv_shape(model_path, engine_kwargs.get("kv_cache_dtype") or engine_kwargs.get("dtype")),
                       max_model_len, sequences, free)
    return {"kv_cache_memory_bytes": budget.bytes}, budget


def __getattr__(name: str) -> Any:
    """`node_free_memory`, vLLM's rule for a node's free memory, lives in `workers.vllm_compat` (the one door to
    vLLM's internals); importing it from here still works."""
    if name == "node_free_memory":
        from workers.vllm_compat import node_free_memory

        return node_free_memory
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
