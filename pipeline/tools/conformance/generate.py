"""Generation for the benchmark: one vLLM engine per backend, a prompt cut to fit, refused requests rerouted."""

from __future__ import annotations

import gc
import os
import pickle
import time
from dataclasses import dataclass, field
from typing import Any

import structlog

from pipeline.tools.conformance.corpora import Options
from pipeline.tools.conformance.judge import compact_json
from workers.compiler import BACKENDS
from workers.engine import REFUSED, Generation

log = structlog.get_logger(__name__)


PROMPT = "Generate a JSON object that conforms to this JSON Schema:\n{schema}"
PROMPT_CAP_MARKER = "\n... (schema truncated)"
MIN_SCHEMA_TOKENS = 64  # below this much of the schema in the prompt, the request is not attempted


@dataclass
class Job:
    key: str
    schema: Any
    backends: list[str]  # the backends that compiled it, in fallback order
    prompt_capped: bool = False
    prompt_ids: list[int] = field(default_factory=list)
    grammar: Any = None  # the schema the grammar is compiled from (None: `schema`)


def fit_prompt(engine: Any, schema: Any, max_tokens: int, max_model_len: int) -> tuple[list[int] | None, bool]:
    """The prompt's token ids, with the schema's text cut to fit the context; (None, _) if it cannot."""
    text = compact_json(schema)
    ids = engine.prompt_token_ids(PROMPT.format(schema=text))
    if len(ids) + max_tokens <= max_model_len:
        return ids, False
    overhead = len(engine.prompt_token_ids(PROMPT.format(schema=PROMPT_CAP_MARKER)))
    budget = max_model_len - max_tokens - overhead - 8  # re-tokenizing a cut can merge or split a few tokens
    if budget < MIN_SCHEMA_TOKENS:
        return None, True
    schema_ids = engine.tokenizer.encode(text, add_special_tokens=False)
    capped = engine.tokenizer.decode(schema_ids[:budget]) + PROMPT_CAP_MARKER
    ids = engine.prompt_token_ids(PROMPT.format(schema=capped))
    return (ids, True) if len(ids) + max_tokens <= max_model_len else (None, True)


TEST_KV_CACHE_BYTES = 256 << 20  # a fixed KV budget: one conformance prompt at a time, whatever the machine


def make_engine(backend: str, model_path: str, max_model_len: int) -> Any:
    """A vLLM engine (no Ray) holding one structured-output backend, its core in this process.

    `generate_all` runs each backend's engine in a child process of its own (`run_backend_in_child`), so a
    second engine never finds less memory than the first: a deleted in-process engine does not give its memory
    back, and the child's exit does. Before, the core ran in vLLM's own child (V1 multiprocessing), which on CPU
    spawns two processes, each importing vLLM again (about 16 s to start against 2-3 s in-process), and runs the
    model on the cores it does not reserve for its scheduler (one of 2).
    """
    from workers.engine import VllmEngine, engine_arguments, has_accelerator

    os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
    os.environ.setdefault("VLLM_LOGGING_STREAM", "ext://sys.stderr")  # stdout carries the report
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    kwargs = {"kv_cache_memory_bytes": TEST_KV_CACHE_BYTES, "enforce_eager": True,
              "structured_outputs_config": {"backend": backend}}
    return VllmEngine(**engine_arguments(model_path, max_model_len, 1, kwargs, has_accelerator()))


def close_engine(engine: Any) -> None:
    """Stop the engine now, rather than whenever the garbage collector gets to it."""
    engine.close()


class RequestRefused(Exception):
    """The engine would not take this request (its grammar backend refuses the schema); the message is vLLM's."""


def _as_refusal(gen: Any) -> Any:
    """A request the engine refused on its own (`finish_reason` "refused": the others in the call ran) as the
    exception a refused call used to raise, so that it is rerouted to the next backend like one."""
    return RequestRefused(gen.error or REFUSED) if isinstance(gen, Generation) and gen.finish_reason == REFUSED else gen


def generate_batch(engine: Any, jobs: list[Job], max_tokens: int) -> list[Any]:
    """One Generation or exception per job, all jobs in one `generate` call.

    The engine refuses a request it cannot take on its own (the others run): that job gets `RequestRefused`.
    Should the whole call fail, each request is probed alone with max_tokens=1 (the prompt's prefix stays
    cached), the refused ones get their error, and the rest run as one batch; per-request calls are the last
    resort.
    """
    def run(batch: list[Job], tokens: int) -> list[Any]:
        grammars = [job.schema if job.grammar is None else job.grammar for job in batch]
        return engine.generate([job.prompt_ids for job in batch], grammars, tokens, 0.0)

    if not jobs:
        return []
    try:
        return [_as_refusal(gen) for gen in run(jobs, max_tokens)]
    except Exception as exc:  # noqa: BLE001 - find the refused requests, keep the rest
        log.warning("conformance.batch_refused", jobs=len(jobs), error=str(exc)[:200])
    results: list[Any] = [None] * len(jobs)
    for i, job in enumerate(jobs):
        try:
            run([job], 1)
        except Exception as exc:  # noqa: BLE001
            results[i] = exc
    accepted = [i for i, r in enumerate(results) if r is None]
    try:
        for i, gen in zip(accepted, run([jobs[i] for i in accepted], max_tokens), strict=True):
            results[i] = _as_refusal(gen)
    except Exception:  # noqa: BLE001 - the last resort: one request at a time
        for i in accepted:
            try:
                results[i] = _as_refusal(run([jobs[i]], max_tokens)[0])
            except Exception as exc:  # noqa: BLE001
                results[i] = exc
    return results


def run_backend(backend: str, jobs: list[Job], model_path: str, opts: Options) -> tuple[dict[str, Any], list[Job],
                                                                                        dict[str, Any]]:
    """Generate every job on one engine holding `backend`. Returns the outputs by key, the jobs the
    engine refused that another backend compiled (for the next engine), and timings."""
    outputs: dict[str, Any] = {}
    rerouted: list[Job] = []
    started = time.perf_counter()
    engine = make_engine(backend, model_path, opts.max_model_len)
    try:
        ready = []
        for job in jobs:
            ids, capped = fit_prompt(engine, job.schema, opts.max_tokens, opts.max_model_len)
            job.prompt_capped = capped
            if ids is None:
                outputs[job.key] = {"status": "not_attempted", "backend": backend, "prompt_capped": capped,
                                    "error": "the prompt does not fit max_model_len with max_tokens"}
            else:
                job.prompt_ids = ids
                ready.append(job)
        gen_started = time.perf_counter()
        results = generate_batch(engine, ready, opts.max_tokens)
        gen_seconds = time.perf_counter() - gen_started
        for job, result in zip(ready, results, strict=True):
            later = job.backends[job.backends.index(backend) + 1:] if backend in job.backends else []
            if isinstance(result, Exception) and later:
                job.backends = later
                rerouted.append(job)
                outputs[job.key] = {"refused_by": backend, "refusal": f"{type(result).__name__}: {result}"[:500]}
            else:
                outputs[job.key] = {"generation": result, "backend": backend, "prompt_capped": job.prompt_capped}
        timing = {"backend": backend, "jobs": len(jobs), "generated": len(ready),
                  "engine_init_s": round(engine.init_seconds, 2), "generate_s": round(gen_seconds, 2),
                  "output_tokens": sum(r.output_tokens for r in results if not isinstance(r, Exception))}
    finally:
        close_engine(engine)
        del engine
        gc.collect()
    timing["total_s"] = round(time.perf_counter() - started, 2)
    log.info("conformance.backend_done", **timing)
    return outputs, rerouted, timing


def _picklable(result: Any) -> Any:
    """A result as it can cross back from the child: an exception that does not pickle becomes a RuntimeError
    with the same `Type: message` text (what the report keeps of a refusal)."""
    if not isinstance(result, Exception):
        return result
    try:
        pickle.dumps(result)
        return result
    except Exception:  # noqa: BLE001 - any exception that does not survive pickling
        return RuntimeError(f"{type(result).__name__}: {result}")


def _backend_child(backend: str, jobs: list[Job], model_path: str, opts: Options) -> tuple[dict[str, Any],
                                                                                           list[Job],
                                                                                           dict[str, Any]]:
    outputs, rerouted, timing = run_backend(backend, jobs, model_path, opts)
    for value in outputs.values():
        if "generation" in value:
            value["generation"] = _picklable(value["generation"])
    return outputs, rerouted, timing


def run_backend_in_child(backend: str, jobs: list[Job], model_path: str, opts: Options) -> tuple[
        dict[str, Any], list[Job], dict[str, Any]]:
    """`run_backend` in a child process of its own, which exits before the next backend's engine starts and so
    gives all its memory back. A child that dies is `ChildDied`: one line and exit 3 from the CLI."""
    from pipeline.tools.child import run_in_child

    return run_in_child(_backend_child, backend, jobs, model_path, opts, what=f"the {backend} engine")


def generate_all(jobs: list[Job], model_path: str, opts: Options) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """One engine per backend, one after another, each in a child process: each job goes to the first backend
    that compiled it; a job the xgrammar engine refuses at request time goes on to the guidance engine."""
    outputs: dict[str, Any] = {}
    timings = []
    carried: list[Job] = []
    for backend in BACKENDS:
        batch = [j for j in jobs if j.backends and j.backends[0] == backend and j not in carried] + carried
        if not batch:
            continue
        done, carried, timing = run_backend_in_child(backend, batch, model_path, opts)
        for key, value in done.items():
            outputs[key] = {**outputs.get(key, {}), **value}
        timings.append(timing)
    return outputs, timings
