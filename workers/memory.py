"""The KV cache's memory on CPU: an explicit budget, sized from what the job needs.

vLLM's CPU worker, left to itself, sizes the KV cache as `gpu_memory_utilization` × the total memory of
NUMA node 0, minus what the process already holds. Node 0's total is not the machine's: a VM can report
3.7 GiB there while `free` says 23 GiB, and it grows as memory is hot-plugged. So the same share starts on
one machine and goes negative on the next. We give vLLM `kv_cache_memory_bytes` instead, sized from what
the job's sequences hold, not from `max_model_len` (issue 27: 64 × 4,096 tokens was 5.6 GiB for 600-token
invoices):

    per sequence = a long prompt of the job (`KvNeed.prompt_tokens`: template, examples and a document at a
                   percentile of the input's lengths) + max_tokens + the speculative lookahead,
                   at most max_model_len, in whole KV blocks, less the whole blocks of the prefix every
                   prompt shares (the examples: prefix caching holds them once)
    need   = sequences × per sequence + the shared blocks + vLLM's null block, where sequences are those in
             flight, at most the requests of the run (its documents, each once per window where documents
             are read in windows: as many as the sizing document needs) and the engine's `max_num_seqs`
    budget = min(need, half the memory free now), and at least one max_model_len sequence + the null block

where bytes per token = layers × KV heads × head dim × dtype size × 2 (keys and values). Without a `KvNeed`
(no sample of the input, a model whose tokenizer is not local) each sequence counts max_model_len tokens, as
before. "Free" is the smaller of what the kernel says is available and what vLLM will check the budget
against (node 0's free memory). If even one max_model_len sequence does not fit, the engine is not started:
`KvBudgetError` says why and which key to change (vLLM itself refuses a cache smaller than one max_model_len
request).

A document longer than the percentile is still correct: vLLM's scheduler schedules a waiting request only when
the blocks for its scheduled tokens are free (else it stays queued) and preempts (then recomputes) the newest
running request when a running one finds no free block, so a longer mix runs fewer sequences at once and never
fails; one max_model_len request always fits.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from workers.spec import ExtractionSpec

GIB = 1 << 30
MIB = 1 << 20
# Of the memory free when the engine starts, the share the KV cache may take: the weights, activations,
# compiled grammars and other processes on the node need the rest.
FREE_SHARE = 0.5
# When the model's shape cannot be read (a hub id not yet downloaded), the budget the job's need is capped at.
UNKNOWN_MODEL_BUDGET = 2 * GIB
# vLLM's KV block on CPU (`platforms/cpu.py`: 128 unless `block_size` is set); memory goes by whole blocks.
CPU_BLOCK_SIZE = 128
# The input's document lengths (characters) whose percentile sizes a sequence; rows the driver samples for it.
DOCUMENT_PERCENTILE = 95
SAMPLE_ROWS = 1000
_DTYPE_BYTES = {"float32": 4, "float": 4, "float16": 2, "half": 2, "bfloat16": 2, "fp8": 1, "float8": 1}


# The environment a CPU extraction actor's process starts with (`actor_memory_env`; glibc and vLLM read it when
# the process starts or the engine is built, so it goes in Ray's runtime_env, not os.environ of a running actor):
# - glibc gives each thread that allocates an arena of its own, up to 8 per core. An actor has some 50 threads
#   (the engine's, Ray Data's, XGrammar's compile pool, OpenMP), and what one arena frees another cannot reuse:
#   on the sample job 620 MiB was free but held by malloc when the documents were done. Two arenas: 250 MiB, and
#   the actor's peak RSS 0.35 GiB lower (docs/performance.md, "Actor memory on CPU").
# - vLLM keeps every compiled XGrammar grammar in an LRU cache bounded by bytes (`VLLM_XGRAMMAR_CACHE_MB`, its
#   default 512). Grounded decoding compiles one grammar per document, used only by that document's requests,
#   so on a long run the cache fills to its bound and the process's RSS grows by more than that: compiling 1,400
#   of the sample's grounded grammars (about 0.41 MiB each by XGrammar's count), RSS +1.14 GiB and still growing
#   at 512 MiB, +0.55 GiB and flat after about 1,100 at 64 (lab/README.md: grammar_cache). 64 MiB holds the
#   grammars of 64 sequences in flight twice over.
ACTOR_MALLOC_ARENAS = 2
ACTOR_GRAMMAR_CACHE_MB = 64
# How often a CPU actor gives malloc's free pages back to the kernel (`keep_trimmed`).
TRIM_SECONDS = 2.0


def actor_memory_env(cpu: bool = True) -> dict[str, str]:
    """Environment variables for an extraction actor's process on CPU (empty with an accelerator, where nothing
    was measured). A value already in the driver's environment is the user's and wins (the caller forwards it)."""
    if not cpu:
        return {}
    return {"MALLOC_ARENA_MAX": str(ACTOR_MALLOC_ARENAS), "VLLM_XGRAMMAR_CACHE_MB": str(ACTOR_GRAMMAR_CACHE_MB)}


def _malloc_trim() -> Any:
    """glibc's `malloc_trim`, or None where the C library is not glibc."""
    global _TRIM
    if _TRIM is None:
        try:
            import ctypes

            _TRIM = ctypes.CDLL("libc.so.6").malloc_trim
        except (OSError, AttributeError):
            _TRIM = False
    return _TRIM or None


_TRIM: Any = None  # glibc's malloc_trim once looked up; False where there is none


def release_free_memory() -> bool:
    """glibc's `malloc_trim(0)`: give the kernel back the whole pages malloc holds free in every arena. Returns
    whether anything was released; False (nothing done) where the C library is not glibc."""
    trim = _malloc_trim()
    return bool(trim(0)) if trim is not None else False


def keep_trimmed(interval: float = TRIM_SECONDS) -> threading.Thread | None:
    """A daemon thread that calls `release_free_memory` every `interval` s for the life of the process, or None
    where there is no glibc (or `interval` is 0). Between engine steps malloc holds what the step freed; without it
    the next step's transients (logits, probabilities, log-probabilities over the vocabulary) come on top."""
    if interval <= 0 or _malloc_trim() is None:
        return None

    def trim() -> None:
        while True:
            time.sleep(interval)
            release_free_memory()

    thread = threading.Thread(target=trim, name="malloc-trim", daemon=True)
    thread.start()
    return thread


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
class KvSample:
    """The driver's sample of the input for sizing: the document at `percentile` of `rows` sampled lengths
    (its text, cut to `max_chars`), which the actor renders into a prompt and counts with the tokenizer."""

    document: str
    chars: int  # its length before any cut
    percentile: int
    rows: int
    longest_chars: int  # the longest sampled document, for the log
    documents: int | None = None  # the documents the run will process (its units' rows), where known


@dataclass(frozen=True)
class KvNeed:
    """What one sequence of the job holds, in tokens, and where the figure came from."""

    prompt_tokens: int  # the sizing prompt: template, examples and the sample document, chat-formatted
    max_tokens: int
    lookahead: int = 0  # speculative tokens vLLM reserves slots for
    source: str = ""
    shared_tokens: int = 0  # the leading tokens every prompt of the job has (system, examples): with prefix
    # caching, their whole blocks are held once for all sequences
    documents: int | None = None  # the documents the run will process: no more sequences than that are in flight
    # (times `windows`)
    windows: int = 1  # requests a document may make: a long document read in windows is one request per window


@dataclass(frozen=True)
class KvBudget:
    bytes: int
    need: int  # what every sequence in flight would take (at max_model_len without a KvNeed)
    free: int  # memory free when it was sized
    capped: bool  # the need did not fit and the budget was cut to the free share
    tokens_per_sequence: int = 0
    source: str = "max_model_len"
    shared_tokens: int = 0  # the common prefix's whole blocks, held once (prefix caching), in tokens
    sequences: int = 0  # the sequences it was sized for: those in flight, at most the run's documents

    def describe(self) -> dict[str, Any]:
        return {"kv_cache_gib": round(self.bytes / GIB, 3), "kv_need_gib": round(self.need / GIB, 3),
                "free_gib": round(self.free / GIB, 2), "kv_capped": self.capped,
                "kv_tokens_per_sequence": self.tokens_per_sequence, "kv_shared_tokens": self.shared_tokens,
                "kv_sequences": self.sequences, "kv_source": self.source}


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


def _blocks(tokens: int, block_size: int) -> int:
    return -(-tokens // block_size)


def shared_blocks(need: KvNeed | None, share_prefix: bool, block_size: int = CPU_BLOCK_SIZE) -> int:
    """The whole blocks of the common prefix, held once for every sequence when prefix caching shares them."""
    return need.shared_tokens // block_size if need is not None and share_prefix else 0


def sequence_tokens(need: KvNeed | None, max_model_len: int, block_size: int = CPU_BLOCK_SIZE,
                    share_prefix: bool = False) -> int:
    """The KV tokens one sequence is sized for, in whole blocks: the job's prompt + max_tokens + lookahead (at
    most max_model_len), less the shared prefix's whole blocks; max_model_len without a `KvNeed`."""
    if need is None:
        return max_model_len
    tokens = min(need.prompt_tokens + need.max_tokens + need.lookahead, max_model_len)
    tokens -= shared_blocks(need, share_prefix, block_size) * block_size
    return _blocks(max(tokens, 1), block_size) * block_size


def sequences_sized(sequences: int, need: KvNeed | None) -> int:
    """The sequences the cache is sized for: those in flight (`workers.batch_size` × `batches_in_flight`), but
    no more than the requests the run makes (an actor never holds more sequences than there are requests: the
    sample's 52 documents against 64). A document read in windows is a request per window, so the run's
    documents count `need.windows` times each (the sampled document's windows)."""
    sequences = max(1, sequences)
    if need is not None and need.documents:
        return max(1, min(sequences, need.documents * max(1, need.windows)))
    return sequences


def kv_budget(shape: KvShape | None, max_model_len: int, sequences: int, free: int, need: KvNeed | None = None,
              block_size: int = CPU_BLOCK_SIZE, share_prefix: bool = False) -> KvBudget:
    """The KV cache to ask for; raises `KvBudgetError` when not even one full-length sequence fits."""
    cap = int(free * FREE_SHARE)
    sequences = sequences_sized(sequences, need)
    per_sequence = sequence_tokens(need, max_model_len, block_size, share_prefix)
    if shape is None:
        need_bytes = UNKNOWN_MODEL_BUDGET
        one_sequence = 0
    else:
        # vLLM's floor (`kv_cache_utils._check_enough_kv_cache_memory`): one max_model_len request in whole
        # blocks, after the null block its block pool holds back.
        one_sequence = (_blocks(max_model_len, block_size) + 1) * block_size * shape.bytes_per_token
        need_bytes = shape.bytes_per_token * per_sequence * sequences
        if need is not None:  # + the shared prefix, once, and the null block
            need_bytes += (shared_blocks(need, share_prefix, block_size) + 1) * block_size * shape.bytes_per_token
    if one_sequence > cap:
        raise KvBudgetError(
            f"the KV cache needs {one_sequence / GIB:.2f} GiB for one sequence of model.max_model_len="
            f"{max_model_len} tokens, but only {cap / GIB:.2f} GiB of the {free / GIB:.2f} GiB free on node 0 may "
            "be used: lower model.max_model_len, free memory, or set model.engine_kwargs.kv_cache_memory_bytes")
    budget = max(min(need_bytes, cap), one_sequence)
    return KvBudget(bytes=budget, need=need_bytes, free=free, capped=need_bytes > cap, tokens_per_sequence=per_sequence,
                    source=need.source if need is not None else "max_model_len",
                    shared_tokens=shared_blocks(need, share_prefix, block_size) * block_size, sequences=sequences)


def check_explicit(kv_bytes: int, free: int) -> None:
    """A budget the user set: refuse it before vLLM loads when it is more than the free memory."""
    if kv_bytes > free:
        raise KvBudgetError(
            f"the KV cache needs {kv_bytes / GIB:.2f} GiB (model.engine_kwargs.kv_cache_memory_bytes), but only "
            f"{free / GIB:.2f} GiB is free on node 0: lower model.engine_kwargs.kv_cache_memory_bytes or free memory")


def cpu_kv_arguments(model_path: str, max_model_len: int, sequences: int, engine_kwargs: dict[str, Any],
                     free: int | None = None, need: KvNeed | None = None, share_prefix: bool = False
                     ) -> tuple[dict[str, Any], KvBudget | None]:
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
    if engine_kwargs.get("max_num_seqs"):  # the engine runs no more at once, whatever is queued
        sequences = min(sequences, int(engine_kwargs["max_num_seqs"]))
    budget = kv_budget(kv_shape(model_path, engine_kwargs.get("kv_cache_dtype") or engine_kwargs.get("dtype")),
                       max_model_len, sequences, free, need, int(engine_kwargs.get("block_size") or CPU_BLOCK_SIZE),
                       share_prefix)
    return {"kv_cache_memory_bytes": budget.bytes}, budget


def sample_document(texts: list[Any], percentile: int = DOCUMENT_PERCENTILE, max_chars: int | None = None,
                    documents: int | None = None) -> KvSample | None:
    """The document at `percentile` of the lengths of `texts` (str or bytes; None skipped), cut to `max_chars`;
    `documents`: how many the run processes, where known."""
    found = sorted((len(t), i) for i, t in enumerate(texts) if t is not None)
    if not found:
        return None
    chars, index = found[min(len(found) - 1, len(found) * percentile // 100)]
    text = texts[index]
    text = text.decode("utf-8", "replace") if isinstance(text, bytes) else str(text)
    return KvSample(document=text[:max_chars] if max_chars else text, chars=chars, percentile=percentile,
                    rows=len(found), longest_chars=found[-1][0], documents=documents)


def documents_of(units: list[Any]) -> int | None:
    """The documents (rows) of the run's units, or None where a unit does not say how many it has."""
    counts = [getattr(unit, "rows", None) for unit in units]
    return sum(counts) if counts and all(isinstance(c, int) for c in counts) else None


def sizes_itself(spec: Any, cpu: bool = True) -> bool:
    """Whether the actors size their own CPU KV cache (`cpu_kv_arguments`) and can use a `KvSample`: a real
    model on CPU, one job schema, no memory key of the job's own."""
    keys = ("kv_cache_memory_bytes", "gpu_memory_utilization")
    return (cpu and spec.model_path != "simulated" and spec.schema_column is None
            and not any(spec.engine_kwargs.get(k) is not None for k in keys)
            and not os.environ.get("VLLM_CPU_KVCACHE_SPACE"))


def read_sample(storage: Any, units: list[Any], spec: Any, cpu: bool = True, rows: int = SAMPLE_ROWS
                ) -> KvSample | None:
    """The driver's `KvSample`: `spec.text_column` of up to `rows` rows from the row groups of the first units
    to process (one column, one batch per row group), or None when the actors do not size their cache or
    nothing could be read. The document is cut at 16 characters per token of max_model_len (no prompt longer
    than that fits the context anyway). It also carries the number of documents of all `units`."""
    import pyarrow.parquet as pq

    if not sizes_itself(spec, cpu):
        return None
    text_column, max_chars = spec.text_column, 16 * spec.max_model_len
    texts: list[Any] = []
    seen: set[tuple[str, int]] = set()
    try:
        for unit in units:
            if len(texts) >= rows:
                break
            if (unit.path, unit.row_group) in seen:
                continue
            seen.add((unit.path, unit.row_group))
            parquet = pq.ParquetFile(storage.arrow_path(unit.path), filesystem=storage.arrow_fs())
            for batch in parquet.iter_batches(batch_size=rows - len(texts), row_groups=[unit.row_group],
                                              columns=[text_column]):
                texts.extend(batch.column(0).to_pylist())
                break
    except Exception as exc:  # noqa: BLE001 - sizing is an estimate: the actor falls back to max_model_len
        import structlog

        structlog.get_logger("workers.memory").warning("kv_sample.unread", error=f"{type(exc).__name__}: {exc}")
        return None
    return sample_document(texts, max_chars=max_chars, documents=documents_of(units))


def measure_need(spec: ExtractionSpec, model_path: str, token_ids: Callable[[Any, Any], list[int]]) -> KvNeed | None:
    """The actor's `KvNeed`: `spec.kv_sample`'s document rendered as the job's prompt (template, system prompt,
    examples, chat template) and counted as the engine will count it (`token_ids(tokenizer, prompt)`:
    `workers.engine.vllm_engine.chat_token_ids`, what the engine's `prompt_token_ids` calls, here on the model's
    tokenizer before the engine exists), + `max_tokens`. None (max_model_len sizing) without a sample or a local
    tokenizer, or for per-row schemas."""
    sample: KvSample | None = spec.kv_sample
    if sample is None or not sizes_itself(spec) or not (Path(model_path) / "config.json").is_file():
        return None
    try:
        from workers.engine.imports import model_tokenizer
        from workers.prompt import prompt_for

        tokenizer = model_tokenizer(model_path)
        contract = spec.contract
        schema_json = json.dumps(contract.json_schema, ensure_ascii=False)
        ids = token_ids(tokenizer, prompt_for(spec.prompt, sample.document, contract.json_schema, schema_json))
        other = token_ids(tokenizer, prompt_for(spec.prompt, "", contract.json_schema, schema_json))
        shared = next((i for i, (a, b) in enumerate(zip(ids, other, strict=False)) if a != b),
                      min(len(ids), len(other)))
    except Exception as exc:  # noqa: BLE001 - sizing is an estimate: fall back to max_model_len
        import structlog

        structlog.get_logger("workers.memory").warning("kv_need.unmeasured", error=f"{type(exc).__name__}: {exc}")
        return None
    source = (f"prompt of the p{sample.percentile} document ({sample.chars} chars) of {sample.rows} sampled rows "
              f"(longest {sample.longest_chars} chars), counted with the model's tokenizer + max_tokens")
    windows = 1
    if spec.long_documents == "windows":  # read in windows of at most window_tokens: no prompt is longer
        policy = spec.windows
        room = spec.max_model_len - spec.max_tokens - len(other)  # the document tokens one prompt holds
        window = min(room, policy.window_tokens) if policy is not None and policy.window_tokens else room
        windows = windows_of(len(ids) - len(other), window, policy.overlap if policy is not None else 0.0)
        ids = ids[:len(other) + max(window, 0)]
    return KvNeed(prompt_tokens=len(ids), max_tokens=spec.max_tokens, source=source, shared_tokens=shared,
                  documents=sample.documents, windows=windows)


def windows_of(document_tokens: int, window: int, overlap: float) -> int:
    """About how many windows of `window` document tokens, each starting with `overlap` of the last one, a
    document of `document_tokens` is read in (1 where it fits one window): the requests it makes. An estimate
    for sizing (windows end at paragraphs, so the real count may be a little higher)."""
    if window <= 0 or document_tokens <= window:
        return 1
    step = max(1, int(window * (1 - overlap)))
    return 1 + -(-(document_tokens - window) // step)


def __getattr__(name: str) -> Any:
    """`node_free_memory`, vLLM's rule for a node's free memory, lives in `workers.vllm_compat` (the one door to
    vLLM's internals); importing it from here still works."""
    if name == "node_free_memory":
        from workers.vllm_compat import node_free_memory

        return node_free_memory
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
