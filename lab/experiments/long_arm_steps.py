"""Where the engine time of `extract bench --long-only` goes: its short and long runs on one engine, each vLLM step
recorded (issue 56, the long-document arm's ratio).

The bench's own documents and settings (`pipeline.tools.bench.bench_input`, `pipeline.tools.bench_long.documents`,
the pipeline arm's overrides), the actor's engine and extractor, then `outcomes` over the short documents and over
the long ones, as `bench_long.long_child` does (no curve). Around the engine core's own methods (in this process:
`VLLM_ENABLE_V1_MULTIPROCESSING=0`, as on a CPU actor), per arm:

- steps, and per step: sequences scheduled, tokens scheduled, of them prompt (prefill) tokens and draft tokens;
  the running and waiting queues (and requests waiting for their grammar);
- per request at its first scheduling: prompt tokens and prefix-cache hits (tokens not computed);
- seconds in the scheduler, the grammar bitmask, the model (`execute_model` + `sample_tokens`), the output update,
  and the drafter (`post_step`); grammar compiles (count, seconds each, the grammar's text size);
- process CPU seconds, wall seconds, output tokens.

    PYTHONPATH=$PWD python lab/experiments/long_arm_steps.py jobs/extract.yaml --docs 24 --max-tokens 256 \\
        --out /tmp/la/steps [--set KEY=VALUE ...]

Writes OUT/steps.json (both arms' summaries and every step) and prints the summaries. A lab tool, not a test.
Unlike the bench's child, this process sets the actor's environment after it started, so what is read only at a
process's start (MALLOC_ARENA_MAX) is not the actor's: compare its seconds with its own other runs only.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import threading
import time
from pathlib import Path
from typing import Any


class Recorder:
    """Per-step records, appended by wrappers around the engine core's methods (on the engine thread), and
    grammar compiles (on vLLM's compile thread)."""

    def __init__(self) -> None:
        self.steps: list[dict[str, Any]] = []
        self.requests: list[dict[str, Any]] = []
        self.compiles: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        self._step: dict[str, Any] | None = None

    def install(self, core: Any) -> None:
        sched, executor = core.scheduler, core.model_executor
        self._install_schedule(sched)
        self._timed(sched, "get_grammar_bitmask", "bitmask_s")
        self._timed(executor, "execute_model", "model_s")
        self._timed(executor, "sample_tokens", "sample_s")
        self._timed(sched, "update_from_output", "update_s")
        self._timed(core, "post_step", "draft_s")
        self._install_compile(sched.structured_output_manager.backend)

    def _timed(self, owner: Any, name: str, key: str) -> None:
        """`owner.name` wrapped: its seconds added to the current step's `key`."""
        original = getattr(owner, name)

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                if self._step is not None:
                    self._step[key] = self._step.get(key, 0.0) + time.perf_counter() - started

        setattr(owner, name, wrapper)

    def _install_schedule(self, sched: Any) -> None:
        schedule = sched.schedule

        def scheduled(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            out = schedule(*args, **kwargs)
            step: dict[str, Any] = {"t": started, "schedule_s": time.perf_counter() - started}
            prefill = drafts = 0
            for rid, n in out.num_scheduled_tokens.items():
                request = sched.requests.get(rid)
                if request is None:
                    continue
                before = request.num_computed_tokens - n
                prefill += max(0, min(request.num_prompt_tokens, request.num_computed_tokens) - before)
            for new in out.scheduled_new_reqs:
                prompt = len(new.prompt_token_ids or [])
                self.requests.append({"prompt": prompt, "cached": new.num_computed_tokens,
                                      "first_scheduled": started})
            drafts = sum(len(v) for v in out.scheduled_spec_decode_tokens.values())
            waiting_grammar = sum(1 for r in sched.waiting
                                  if r.status.name == "WAITING_FOR_STRUCTURED_OUTPUT_GRAMMAR")
            step.update(seqs=len(out.num_scheduled_tokens), tokens=out.total_num_scheduled_tokens,
                        prefill_tokens=prefill, draft_tokens=drafts, running=len(sched.running),
                        waiting=len(sched.waiting), waiting_grammar=waiting_grammar,
                        new=len(out.scheduled_new_reqs), preempted=len(out.preempted_req_ids or ()))
            self._step = step
            self.steps.append(step)
            return out

        sched.schedule = scheduled

    def _install_compile(self, backend: Any) -> None:
        compile_grammar = backend.compile_grammar

        def compiled(request_type: Any, spec: str, *args: Any, **kwargs: Any) -> Any:
            started, cpu = time.perf_counter(), time.thread_time()
            try:
                return compile_grammar(request_type, spec, *args, **kwargs)
            finally:
                with self.lock:
                    self.compiles.append({"t": started, "s": time.perf_counter() - started,
                                          "cpu_s": time.thread_time() - cpu, "chars": len(spec)})

        backend.compile_grammar = compiled

    def mark(self) -> tuple[int, int, int]:
        return len(self.steps), len(self.requests), len(self.compiles)


def summary(rec: Recorder, since: tuple[int, int, int], wall: float, cpu: float, tokens: int,
            prompt_tokens: int, requests: int, generate_s: float) -> dict[str, Any]:
    steps = rec.steps[since[0]:]
    reqs = rec.requests[since[1]:]
    compiles = rec.compiles[since[2]:]
    busy = [s for s in steps if s["tokens"]]

    def total(key: str) -> float:
        return round(sum(s.get(key, 0.0) for s in steps), 3)

    prefill = sum(s["prefill_tokens"] for s in steps)
    decode_steps = [s for s in busy if not s["prefill_tokens"]]
    t0 = steps[0]["t"] if steps else 0.0
    grammar_ready = [r["first_scheduled"] - t0 for r in reqs]
    return {
        "requests": requests, "wall_s": round(wall, 3), "process_cpu_s": round(cpu, 3),
        "generate_s": round(generate_s, 3), "output_tokens": tokens, "prompt_tokens": prompt_tokens,
        "output_tokens_per_s": round(tokens / wall, 1),
        "steps": len(steps), "busy_steps": len(busy),
        "prompt_tokens_cached": sum(r["cached"] for r in reqs),
        "prefill_tokens_computed": prefill,
        "prefix_hit_rate": round(sum(r["cached"] for r in reqs) / max(1, sum(r["prompt"] for r in reqs)), 3),
        "prefill_tokens_per_output_token": round(prefill / max(1, tokens), 2),
        "tokens_scheduled": sum(s["tokens"] for s in steps),
        "draft_tokens_scheduled": sum(s["draft_tokens"] for s in steps),
        "mean_seqs_per_busy_step": round(statistics.mean(s["seqs"] for s in busy), 2) if busy else None,
        "mean_seqs_decode_steps": round(statistics.mean(s["seqs"] for s in decode_steps), 2) if decode_steps else None,
        "steps_with_prefill": len(busy) - len(decode_steps),
        "max_waiting_grammar": max((s["waiting_grammar"] for s in steps), default=0),
        "steps_waiting_grammar": sum(1 for s in steps if s["waiting_grammar"]),
        "preempted": sum(s["preempted"] for s in steps),
        "first_scheduled_s": {"min": round(min(grammar_ready), 2) if reqs else None,
                              "median": round(statistics.median(grammar_ready), 2) if reqs else None,
                              "max": round(max(grammar_ready), 2) if reqs else None},
        "seconds": {"schedule": total("schedule_s"), "bitmask": total("bitmask_s"), "model": total("model_s"),
                    "sample": total("sample_s"), "update": total("update_s"), "draft": total("draft_s")},
        "model_s_prefill_steps": round(sum(s.get("model_s", 0) for s in busy if s["prefill_tokens"]), 3),
        "model_s_decode_steps": round(sum(s.get("model_s", 0) for s in decode_steps), 3),
        "compiles": len(compiles), "compile_s": round(sum(c["s"] for c in compiles), 3),
        "compile_cpu_s": round(sum(c["cpu_s"] for c in compiles), 3),
        "compile_s_max": round(max((c["s"] for c in compiles), default=0), 3),
        "grammar_chars_median": int(statistics.median(c["chars"] for c in compiles)) if compiles else None,
    }


def parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("config")
    parser.add_argument("--docs", type=int, default=24)
    parser.add_argument("--max-tokens", type=int, default=256)
    parser.add_argument("--window-tokens", type=int, default=512)
    parser.add_argument("--long-windows", type=int, default=4)
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="a job override (YAML value), after the bench's")
    parser.add_argument("--order", default="short,long", help="the arms, in order (e.g. long,short)")
    parser.add_argument("--xgr-threads", type=int, help="XGrammar's compile threads in the engine (vLLM: 8)")
    parser.add_argument("--out", required=True)
    return parser.parse_args()


def bench_documents(args: argparse.Namespace, out: Path) -> tuple[dict[str, Any], dict[str, tuple[list, list]]]:
    """The bench's overrides (pointing at the long documents, as `bench_long.run_long_arm` does) and both arms'
    documents; the actor's environment set in this process."""
    import yaml

    from pipeline.dataflow import actor_env
    from pipeline.tools.bench import bench_input, pipeline_settings
    from pipeline.tools.bench_long import LongSetup, documents, model_tokens, write_corpus

    given = bench_input(Path(args.config), args.docs, out, args.max_tokens)
    setup = LongSetup(window_tokens=args.window_tokens, windows=args.long_windows, curve=())
    settings, _ = pipeline_settings(len(given.ids), given.loaded, given.corpus)
    docs = documents(given.ids, given.texts, setup, model_tokens(Path(args.config), given.overrides))
    corpus = out / "corpus-long.parquet"
    write_corpus(corpus, docs["long_ids"], docs["long_texts"])
    overrides = {**given.overrides, **settings, "input.uri": str(corpus), "input.window_tokens": args.window_tokens}
    for item in args.set:
        key, value = item.split("=", 1)
        overrides[key] = yaml.safe_load(value)
    for key, value in actor_env(given.loaded.config.workers.gpus_per_actor).items():
        os.environ.setdefault(key, value)
    return overrides, {"short": (given.ids, given.texts), "long": (docs["long_ids"], docs["long_texts"])}


def fewer_compile_threads(core: Any, threads: int) -> None:
    """vLLM's XGrammar compiler rebuilt with `threads` threads (the same masks, the same cache limit)."""
    import xgrammar as xgr

    backend = core.scheduler.structured_output_manager.backend
    info = xgr.TokenizerInfo.from_huggingface(backend.tokenizer, vocab_size=backend.vocab_size)
    backend.compiler = xgr.GrammarCompiler(info, max_threads=threads, cache_enabled=True,
                                           cache_limit_bytes=backend.compiler.cache_limit_bytes)


def run_arm(extractor: Any, engine: Any, rec: Recorder, ids: list, texts: list) -> dict[str, Any]:
    engine.calls.clear()
    since = rec.mark()
    started, cpu = time.perf_counter(), time.process_time()
    outcomes = extractor.outcomes(ids, texts)
    wall, cpu = time.perf_counter() - started, time.process_time() - cpu
    gens = [g for c in engine.calls for g in c.generations]
    generate_s = sum(c.ended - c.started for c in engine.calls)
    arm = summary(rec, since, wall, cpu, sum(g.output_tokens for g in gens), sum(g.prompt_tokens for g in gens),
                  len(gens), generate_s)
    arm.update(docs=len(ids), windows=[int(o.extra.get("windows") or 1) for o in outcomes],
               generate_calls=len(engine.calls), rows=sum(o.is_row for o in outcomes))
    return arm


def main() -> None:
    args = parse()
    out = Path(args.out).resolve()
    overrides, arms = bench_documents(args, out)

    from pipeline.config import load_config
    from pipeline.tools.bench_requests import TimedEngine, actor_spec
    from workers.actor import start_engine
    from workers.extractor import BatchExtractor

    spec = actor_spec(load_config(args.config, overrides), "long-arm-steps")
    inner = start_engine(spec, False)
    engine, rec = TimedEngine(inner), Recorder()
    report: dict[str, Any] = {"overrides": {k: v for k, v in overrides.items() if k != "input.uri"},
                              "xgr_threads": args.xgr_threads}
    try:
        extractor = BatchExtractor(engine, spec, min(spec.engine.max_model_len, engine.max_model_len))
        extractor.prepare()
        core = inner._engine.llm.llm_engine.engine_core.engine_core  # EngineThread → VllmEngine → vllm.LLM
        if args.xgr_threads:
            fewer_compile_threads(core, args.xgr_threads)
        rec.install(core)
        sc = core.scheduler.scheduler_config
        report["engine"] = {"max_num_seqs": sc.max_num_seqs, "max_num_batched_tokens": sc.max_num_batched_tokens,
                            "kv_blocks": core.scheduler.kv_cache_manager.block_pool.num_gpu_blocks,
                            "block_size": core.scheduler.cache_config.block_size}
        for name in args.order.split(","):
            report[name] = run_arm(extractor, engine, rec, *arms[name])
            print(name, json.dumps(report[name], indent=1), flush=True)
    finally:
        inner.close()
    report["step_records"], report["compile_records"] = rec.steps, rec.compiles
    (out / "steps.json").write_text(json.dumps(report, indent=1, default=str))
    print(f"wrote {out / 'steps.json'}")


if __name__ == "__main__":
    main()
