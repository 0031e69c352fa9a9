"""Where the extraction actor's memory goes: its RSS after each step of its life, in one process, outside Ray.

The steps are the actor's own (`workers.actor`): the environment Ray gives it (`pipeline.dataflow.actor_env`),
`import torch`, `import vllm`, the engine as the actor starts it (`start_engine`: the KV budget sized from the
job's sample, the weights), the schema warm-up (`BatchExtractor.prepare`: the first grammar), then the job's
documents in `workers.batches_in_flight` threads of `workers.batch_size` documents, as Ray Data calls an actor.
At each step it reads `/proc/self/status` (RSS, anonymous, file-backed, threads) and glibc's `mallinfo2` (bytes
malloc holds: in use and free), and at the end it sums `/proc/self/smaps` by kind: the KV cache's mapping,
other large anonymous mappings, malloc's arenas, the main heap, shared libraries. The grammar cache's bytes are
read from vLLM's XGrammar compiler (`get_cache_size_bytes`), and the number of distinct grammars the documents
asked for is counted. The actor's own process under Ray also holds Ray's core worker (about 0.1-0.2 GiB), which
this does not; `lab/experiments/actor_memory.py` measures the real actor.

    nice -n 19 .venv/bin/python lab/experiments/actor_memory_parts.py [CONFIG] [--docs N] [--json OUT] [--env K=V ...]

It restarts itself with `workers.memory.actor_memory_env` in its environment (glibc reads MALLOC_ARENA_MAX at
start), as Ray starts the actor; `--no-actor-env` runs without it and without `actor_env`. The KV cache is sized for
the sample's documents (52), as the driver sizes it since issue 27.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import re
import sys
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
MIB = 1 << 20


def status() -> dict[str, float]:
    found: dict[str, float] = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM", "RssAnon", "RssFile", "Threads"):
            parts = value.split()
            found[key] = round(int(parts[0]) / 1024, 1) if key != "Threads" else int(parts[0])
    return found


def reset_peak() -> None:
    """Start the kernel's high-water mark (`VmHWM`) again from the RSS now (Linux 4.0+: clear_refs 5)."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        pass


class _MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in
                ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks",
                 "keepcost")]


def mallinfo() -> dict[str, float]:
    """glibc's totals over every arena (MiB): `arena` bytes from sbrk/arena heaps, `hblkhd` in mmapped chunks,
    `uordblks` in use, `fordblks` free but held."""
    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.mallinfo2.restype = _MallInfo2
        info = libc.mallinfo2()
    except (OSError, AttributeError):
        return {}
    return {"malloc_arena_mib": round(info.arena / MIB, 1), "malloc_mmapped_mib": round(info.hblkhd / MIB, 1),
            "malloc_in_use_mib": round(info.uordblks / MIB, 1), "malloc_free_held_mib": round(info.fordblks / MIB, 1)}


_HEADER = re.compile(r"^([0-9a-f]+)-([0-9a-f]+) (\S+) \S+ \S+ \S+\s*(.*)$")
ARENA_RESERVE = 64 * MIB  # glibc's HEAP_MAX_SIZE on 64-bit: each extra arena reserves this much address space


def _mappings() -> list[tuple[int, str, int]]:
    """(size in bytes, name, RSS in kB) of each mapping of /proc/self/smaps."""
    entries: list[tuple[int, str, int]] = []
    for line in Path("/proc/self/smaps").read_text().splitlines():
        header = _HEADER.match(line)
        if header:
            entries.append((int(header[2], 16) - int(header[1], 16), header[4].strip(), 0))
        elif line.startswith("Rss:") and entries:
            size, name, _ = entries[-1]
            entries[-1] = (size, name, int(line.split()[1]))
    return entries


def _kind(size: int, name: str) -> str:
    if name == "[heap]":
        return "heap"
    if name.endswith(".so") or ".so." in name:
        return "shared_libraries"
    if name.startswith("/"):
        return "other_files"
    if not name:  # malloc's extra arenas live in 64 MiB reservations; big tensors in mappings of their own
        return "anon_large" if size >= ARENA_RESERVE else "anon_small"
    return name.strip("[]")


def smaps(kv_bytes: int | None) -> dict[str, float]:
    """RSS (MiB) by kind of mapping: the KV cache (the anonymous mapping nearest its size), other anonymous
    mappings of 64 MiB or more, smaller anonymous mappings (malloc's extra arenas, thread stacks), [heap],
    shared libraries, other files."""
    entries = _mappings()
    kv_index = None
    if kv_bytes:
        anon = [(abs(s - kv_bytes), i) for i, (s, n, _) in enumerate(entries) if not n and s >= kv_bytes * 0.9]
        kv_index = min(anon)[1] if anon else None
    totals: dict[str, float] = {}
    for i, (size, name, rss) in enumerate(entries):
        kind = "kv_cache" if i == kv_index else _kind(size, name)
        totals[kind] = totals.get(kind, 0) + rss / 1024
    out: dict[str, float] = {k: round(v, 1) for k, v in sorted(totals.items(), key=lambda kv: -kv[1])}
    out["mappings"] = len(entries)
    return out


class Sampler(threading.Thread):
    def __init__(self, interval: float = 0.25) -> None:
        super().__init__(daemon=True)
        self.interval, self.stop, self.peak = interval, threading.Event(), 0.0
        self.series: list[tuple[float, float]] = []
        self.started = time.monotonic()

    def run(self) -> None:
        while not self.stop.is_set():
            rss = status()["VmRSS"]
            self.peak = max(self.peak, rss)
            self.series.append((round(time.monotonic() - self.started, 1), rss))
            self.stop.wait(self.interval)


def grammar_sizes(backend: Any, asked: set[str]) -> list[float]:
    """XGrammar's own size (MiB) of three of the grammars the documents asked for, compiled again."""
    from workers.engine.outputs import grammar_spec

    sizes = []
    for text in list(asked)[:3]:
        compiled = backend.compiler.compile_json_schema(grammar_spec(json.loads(text)), any_whitespace=False,
                                                        separators=(",", ":"))
        sizes.append(round(compiled.memory_size_bytes / MIB, 2))
    return sizes


def start_as_the_actor(extra: dict[str, str]) -> None:
    """glibc reads MALLOC_ARENA_MAX (and its other MALLOC_* variables) when the process starts: start again with
    the actor's memory environment and `extra` (`--env`), as Ray starts the actor's process with its runtime_env
    (once)."""
    if "_PARTS_REEXEC" in os.environ:
        return
    from workers.memory import actor_memory_env

    memory = {k: os.environ.get(k, v) for k, v in actor_memory_env().items()}
    os.execve(sys.executable, [sys.executable, *sys.argv],
              {**os.environ, **memory, **extra, "_PARTS_REEXEC": "1"})


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("config", nargs="?", default=str(ROOT / "jobs/extract.yaml"))
    parser.add_argument("--docs", type=int, default=0, help="documents to run (0: all of the sample)")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--env", action="append", default=[],
                        help="K=V in the environment from the start (glibc's MALLOC_* too)")
    parser.add_argument("--no-actor-env", action="store_true", help="do not apply pipeline.dataflow.actor_env")
    parser.add_argument("--set", action="append", default=[], dest="overrides",
                        help="KEY=VALUE on the job's config, as `extract --set` (the value read as YAML)")
    parser.add_argument("--trim-every", type=float, default=None,
                        help="as the actor: malloc_trim(0) once warm, then every this many seconds (default: the "
                             "actor's workers.memory.TRIM_SECONDS; 0: never, as before the actor trimmed)")
    return parser.parse_args()


def step(steps: list[dict[str, Any]], name: str, **extra: Any) -> None:
    """One step: the RSS parts and malloc's totals now, and `extra`, printed as it is taken."""
    steps.append({"step": name, **status(), **mallinfo(), **extra})
    steps[-1]["step_peak"] = steps[-1].pop("VmHWM")  # the highest RSS since the step before (the kernel's)
    reset_peak()
    print(json.dumps(steps[-1]), file=sys.stderr, flush=True)


def import_steps(steps: list[dict[str, Any]], no_actor_env: bool, start_env: dict[str, str]) -> dict[str, str]:
    """The imports, a step each: the pipeline (then the environment Ray gives the actor, set), torch, vLLM.
    Returns the environment set."""
    # pipeline.dataflow brings pyarrow.parquet, ray, structlog, pipeline.config and workers.actor with it.
    from pipeline.dataflow import actor_env

    env = {} if no_actor_env else actor_env(0)
    env.update(start_env)
    os.environ.update(env)
    step(steps, "pipeline imported (pyarrow, ray, structlog)", env=env)
    import torch

    step(steps, "import torch", torch_threads=torch.get_num_threads())
    import vllm  # noqa: F401

    step(steps, "import vllm")
    return env


def load_job(args: argparse.Namespace) -> tuple[Any, Any, list[Any], list[str]]:
    """The job's config (`--set` applied), its spec with the KV budget sized from the sample's documents, and the
    documents' ids and texts (the first `--docs` of them)."""
    import dataclasses

    import pyarrow.parquet as pq
    import yaml

    from pipeline.config import load_config
    from pipeline.dataflow import build_spec
    from pipeline.stage_config import ActorConfig
    from workers.memory import sample_document

    loaded = load_config(args.config, {k: yaml.safe_load(v) for k, v in (o.split("=", 1) for o in args.overrides)})
    cfg = loaded.config
    table = pq.read_table(ROOT / "jobs/sample/invoices.parquet")
    texts = table.column(cfg.input.text_column).to_pylist()
    ids = table.column(cfg.input.id_column).to_pylist()
    if args.docs:
        texts, ids = texts[:args.docs], ids[:args.docs]
    spec = build_spec(ActorConfig.of(loaded), "memory-parts")
    spec = dataclasses.replace(spec, kv_sample=sample_document(texts, max_chars=16 * spec.max_model_len,
                                                               documents=len(texts)))
    return cfg, spec, ids, texts


def kv_cache_bytes(engine: Any) -> int | None:
    """The bytes vLLM gave the KV cache (None if it does not say)."""
    try:
        return int(engine._engine.llm.llm_engine.vllm_config.cache_config.kv_cache_memory_bytes or 0) or None
    except AttributeError:
        return None


def warm_engine(steps: list[dict[str, Any]], spec: Any) -> tuple[Any, Any, int | None]:
    """The engine as the actor starts it, then the schema warm-up, a step each. Returns the engine, the extractor
    and the KV cache's bytes."""
    from workers.actor import start_engine
    from workers.extractor import BatchExtractor

    started = time.perf_counter()
    engine = start_engine(spec, False)
    kv_bytes = kv_cache_bytes(engine)
    step(steps, "engine up (weights, KV cache)", seconds=round(time.perf_counter() - started, 1),
         kv_mib=round((kv_bytes or 0) / MIB), smaps=smaps(kv_bytes))
    extractor = BatchExtractor(engine, spec, min(spec.engine.max_model_len, engine.max_model_len))
    extractor.prepare()
    step(steps, "schema warm-up (first grammar, first forward)")
    return engine, extractor, kv_bytes


def trim_as_the_actor(steps: list[dict[str, Any]], trim_every: float | None) -> float:
    """What the actor does once warm (workers.actor): malloc_trim(0), then again every `trim_every` seconds (None:
    the actor's own period; 0: never). Returns the period."""
    from workers.memory import TRIM_SECONDS, keep_trimmed, release_free_memory

    trim_every = TRIM_SECONDS if trim_every is None else trim_every
    if trim_every:
        release_free_memory()
        keep_trimmed(trim_every)
        step(steps, f"trimmed once warm; then every {trim_every:.1f} s")
    return trim_every


def counting_grammars(engine: Any) -> set[str]:
    """The distinct schemas (grammars) asked of `engine` from now on, filled as its `generate` is called."""
    asked: set[str] = set()
    real_generate = engine.generate

    def counting_generate(prompts: Any, json_schema: Any, *rest: Any, **kw: Any) -> Any:
        schemas = json_schema if isinstance(json_schema, list | tuple) else [json_schema]
        asked.update(json.dumps(s, sort_keys=True) for s in schemas if s is not None)
        return real_generate(prompts, json_schema, *rest, **kw)

    engine.generate = counting_generate  # type: ignore[method-assign]
    return asked


def in_threads(extractor: Any, ids: list[Any], texts: list[str], batch: int, in_flight: int) -> tuple[list[Any], float]:
    """The documents in `in_flight` threads of `batch` documents, as Ray Data calls an actor: each batch's outcomes,
    and the seconds they took."""
    chunks = [(ids[i:i + batch], texts[i:i + batch]) for i in range(0, len(ids), batch)]
    outcomes: list[Any] = [None] * len(chunks)
    started = time.perf_counter()

    def work(slot: int) -> None:
        for k in range(slot, len(chunks), in_flight):
            outcomes[k] = extractor.outcomes(chunks[k][0], chunks[k][1], None)

    threads = [threading.Thread(target=work, args=(s,)) for s in range(in_flight)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return outcomes, time.perf_counter() - started


def run_documents(steps: list[dict[str, Any]], engine: Any, extractor: Any, workers: Any, ids: list[Any],
                  texts: list[str]) -> tuple[Any, set[str], list[Any]]:
    """The job's documents through the extractor, then a step with their rows, speed, distinct grammars and the
    grammar cache's bytes. Returns vLLM's grammar backend, the grammars asked for and each batch's outcomes."""
    from workers import vllm_compat

    backend = vllm_compat.grammar_backend(engine._engine.llm)
    asked = counting_grammars(engine)
    outcomes, seconds = in_threads(extractor, ids, texts, workers.batch_size, workers.batches_in_flight)
    rows = sum(1 for chunk in outcomes for o in chunk if o.is_row)
    cache = backend.compiler.get_cache_size_bytes() if backend is not None and hasattr(backend, "compiler") else None
    limit = backend.compiler.cache_limit_bytes if backend is not None and hasattr(backend, "compiler") else None
    step(steps, "documents done", docs=len(ids), rows=rows, seconds=round(seconds, 1),
         docs_per_s=round(len(ids) / seconds, 3), distinct_grammars=len(asked),
         grammar_cache_mib=round(cache / MIB, 1) if cache is not None else None,
         grammar_cache_limit_mib=round(limit / MIB, 1) if limit is not None else None)
    return backend, asked, outcomes


def main() -> int:
    args = parse_args()
    start_env = dict(kv.split("=", 1) for kv in args.env)
    if not args.no_actor_env:
        start_as_the_actor(start_env)
    steps: list[dict[str, Any]] = []
    sampler = Sampler()
    sampler.start()
    step(steps, "python")
    env = import_steps(steps, args.no_actor_env, start_env)
    cfg, spec, ids, texts = load_job(args)
    engine, extractor, kv_bytes = warm_engine(steps, spec)
    trim_every = trim_as_the_actor(steps, args.trim_every)
    # The outcomes are held to the end, as the documents' texts are: the last steps and smaps count them.
    backend, asked, outcomes = run_documents(steps, engine, extractor, cfg.workers, ids, texts)
    one = grammar_sizes(backend, asked) if backend is not None and asked else None
    trimmed = ctypes.CDLL("libc.so.6").malloc_trim(0)  # what malloc holds free, given back: the ceiling of trimming
    step(steps, "after malloc_trim(0)", released=bool(trimmed))
    parts = smaps(kv_bytes)
    sampler.stop.set()
    sampler.join()
    result = {"steps": steps, "peak_rss_mib": sampler.peak, "vm_hwm_mib": max(s["step_peak"] for s in steps),
              "trim_every": trim_every,
              "smaps_at_end_mib": parts,
              "grammar_memory_size_mib": one, "env": env}
    print(json.dumps({k: v for k, v in result.items() if k != "steps"}), file=sys.stderr)
    if args.json:
        args.json.write_text(json.dumps({**result, "series": sampler.series}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
