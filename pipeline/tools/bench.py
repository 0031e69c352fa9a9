"""`extract bench`: the pipeline against what a user would otherwise write, in one run, one machine.

Arms, one after another, on the same model, engine settings and documents:
  engine         vLLM `generate` over every document in one call, under the grammar (the ceiling)
  unconstrained  the same call without a grammar; and, without speculation, free text forced to the
                 constrained outputs' exact lengths, which prices the constraint per decode step at equal
                 work (`constraint_price`; when the job speculates, that engine also gives the arm
                 `engine_no_speculation`)
  retry          unconstrained, then parse + validate, re-asking failures with the error, twice at most
  pipeline       the real `extract run` (Ray, actors, Parquet in and out, staging, manifest), as a subprocess
  pipeline_no_confidence
                 the same run with `output.confidence: false` (no log-probabilities): what `_confidence` costs,
                 as the ratio `confidence_over_plain` (when the job has confidence on, as by default)
  naive          (with `naive=True`) vLLM's defaults, the user's prompt, the plain grammar, one call
                 (`pipeline.tools.bench_naive`); ratios `pipeline_over_naive` in docs/s and in correct leaves/s

Per-token cost is decode only: each arm is also timed with max_tokens=1 (prefill plus one step), from a
cold prefix cache, and that time is subtracted. Writes DIR/bench.json, DIR/bench.md and DIR/bench.png.
"""

from __future__ import annotations

import dataclasses
import gc
import json
import os
import statistics
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import structlog

from pipeline.config import SIMULATED, LoadedConfig, load_config
from pipeline.dataflow import actor_env, build_spec
from pipeline.output.manifest import committed, run_manifests
from pipeline.output.tables import read_columns
from pipeline.stage_config import ActorConfig
from pipeline.storage import Storage, storage_for
from pipeline.tools.bench_long import LongSetup, run_long_arm, write_long
from pipeline.tools.bench_naive import ARM as NAIVE
from pipeline.tools.bench_naive import NAIVE_ENV, naive_arm, naive_ratios
from pipeline.tools.bench_report import render_chart, render_markdown
from pipeline.tools.bench_requests import ARM as SAME_REQUESTS
from pipeline.tools.bench_requests import same_requests_arm
from pipeline.tools.bench_sampler import RssSampler, actor_cpu
from pipeline.tools.bench_scoring import leaf_fields
from pipeline.tools.child import run_in_child
from pipeline.tools.machine import machine
from pipeline.tools.synthetic import make_corpus
from schemas.contract import RecordRejected, SchemaContract
from workers.bundled_model import resolve_model_path
from workers.classify import classify, json_candidate
from workers.engine import Generation, VllmEngine, engine_arguments, has_accelerator, speculates
from workers.prompt import render_prompt

log = structlog.get_logger(__name__)

SEED = 4242
MAX_RETRIES = 2
IN_FLIGHT = 4  # the pipeline arm's batches in flight per actor
RETRY_SUFFIX = "\nAnswer with only a JSON object that matches this JSON Schema:\n{schema}"


def parse_free_text(text: str, contract: SchemaContract, document: str) -> tuple[dict[str, Any] | None, str]:
    """What a hand-written loop does with free text: find the JSON, parse it, validate it."""
    try:
        return contract.check(json_candidate(text), {"document": document}), ""
    except RecordRejected as rejected:
        return None, f"{rejected.reason}: {rejected.errors[0]['msg'] if rejected.errors else ''}"


# -- the in-process arms -----------------------------------------------------------------------------

def open_engine(loaded: LoadedConfig, sequences: int, engine_kwargs: dict[str, Any]) -> Any:
    """The bench's bare engine for the job: vLLM's `LLM` (`VllmEngine`, no thread around it: the ceiling) with
    `engine_kwargs`, or under `model.path: simulated` the engine the actor's factory gives
    (`workers.actor.start_engine`), so the arms' plumbing runs without a model."""
    if loaded.model_path == SIMULATED:
        from workers.actor import start_engine

        spec = build_spec(ActorConfig.of(loaded), "bench")
        return start_engine(dataclasses.replace(spec, sequences_in_flight=sequences), False)
    return VllmEngine(**engine_arguments(resolve_model_path(loaded.model_path), loaded.config.model.max_model_len, 1,
                                         engine_kwargs, has_accelerator(), sequences=sequences))


def reset_prefix_cache(engine: Any) -> None:
    """A cold prefix cache before a timed call (an engine without one, the simulated, has nothing to forget)."""
    reset = getattr(engine, "reset_prefix_cache", None)
    if reset is not None:
        reset()


def generate_exact(engine: Any, prompts: list[list[int]], lengths: list[int], temperature: float) -> list[Generation]:
    """Free text of exactly `lengths[i]` tokens per prompt: vLLM's `generate_exact`; an engine without it (the
    simulated) writes free text of at most each length, a request per prompt."""
    exact = getattr(engine, "generate_exact", None)
    if exact is not None:
        return exact(prompts, lengths, temperature)
    return [engine.generate([p], None, max(n, 1), temperature)[0] for p, n in zip(prompts, lengths, strict=True)]


def _timed(engine: Any, prompts: list[list[int]], schema: dict | None, max_tokens: int,
           temperature: float) -> tuple[list[Generation], float]:
    reset_prefix_cache(engine)
    started = time.perf_counter()
    generations = engine.generate(prompts, schema, max_tokens, temperature)
    return generations, time.perf_counter() - started


def _arm(name: str, generations: list[Generation], seconds: float, prefill_seconds: float, n_docs: int,
         records: list[dict | None], golds: list[dict], **extra: Any) -> dict[str, Any]:
    tokens = sum(g.output_tokens for g in generations)
    decode_steps = max(tokens - n_docs, 1)  # the max_tokens=1 run already paid each document's first token
    return {
        "arm": name,
        "docs": n_docs,
        "seconds": round(seconds, 3),
        "docs_per_s": round(n_docs / seconds, 3),
        "output_tokens": tokens,
        "prompt_tokens": sum(g.prompt_tokens for g in generations),
        "output_tokens_per_s": round(tokens / seconds, 1),
        "ms_per_output_token": round(1000 * seconds / max(tokens, 1), 3),
        "prefill_plus_one_s": round(prefill_seconds, 3),
        "decode_ms_per_token": round(1000 * max(seconds - prefill_seconds, 0.0) / decode_steps, 3),
        "valid_rate": round(sum(r is not None for r in records) / n_docs, 4),
        **leaf_fields(records, golds, seconds),
        **extra,
    }


def _warn_if_lengths_differ(event: str, generations: list[Generation], lengths: list[int]) -> None:
    """The price compares runs of the same per-document lengths; say so when a run did not keep them."""
    if [g.output_tokens for g in generations] != lengths:
        log.warning(event, tokens=sum(g.output_tokens for g in generations), wanted=sum(lengths))


def _arms_child(config: str, overrides: dict[str, Any], texts: list[str], golds: list[dict],
                price_rounds: int, part: str) -> dict[str, Any]:
    if part == "same_requests":
        return same_requests(load_config(config, overrides), texts, golds)
    if part == NAIVE:
        raw = naive_arm(load_config(config, overrides), texts)
        return {NAIVE: _arm(NAIVE, raw.pop("generations"), raw.pop("seconds"), raw.pop("prefill_plus_one_s"),
                            len(texts), raw.pop("records"), golds, **raw)}
    return in_process_arms(load_config(config, overrides), texts, golds, price_rounds, part)


def same_requests(loaded: LoadedConfig, texts: list[str], golds: list[dict]) -> dict[str, Any]:
    """The arm `engine_same_requests` (`pipeline.tools.bench_requests`): the requests the pipeline's actor sends
    for these documents (its prompts, grounded grammars, sampling and engine settings), in one engine call."""
    raw = same_requests_arm(loaded, [g["doc_id"] for g in golds], texts)
    timings = {k: round(raw.pop(k), 3) for k in ("build_s", "generate_s", "classify_s", "engine_init_s",
                                                  "schema_compile_s", "cpu_s", "cores_used")}
    timings["others_cpu_s"] = raw.pop("others_cpu_s")  # rounded already, or None
    return {SAME_REQUESTS: _arm(SAME_REQUESTS, raw.pop("generations"), raw.pop("seconds"),
                                raw.pop("prefill_plus_one_s"), len(texts), raw.pop("records"), golds,
                                **timings, **raw)}


def _in_child(*args: Any, env: dict[str, str] | None = None) -> dict[str, Any]:
    """`_arms_child(*args)` in a child process of its own, started with `env` added to this environment."""
    return run_in_child(_arms_child, *args, env=env, what=f"the bench's {args[-1]} engine")


def job_speculates(loaded: LoadedConfig) -> bool:
    cfg = loaded.config
    if loaded.model_path == SIMULATED:
        return False
    return speculates(engine_arguments("m", cfg.model.max_model_len, 1, dict(cfg.model.engine_kwargs),
                                       has_accelerator()))


def engine_arms(config: Path, overrides: dict[str, Any], texts: list[str], golds: list[dict],
                price_rounds: int, speculate: bool) -> tuple[dict[str, Any], dict[str, Any]]:
    """The engine, unconstrained and retry arms, and the constraint price, each engine in a child process
    that exits before the next engine starts.

    Measured: a deleted in-process vLLM engine keeps its memory and a thread that used most of a core,
    which the pipeline arm's actor then had to share (this skewed earlier pipeline/engine ratios).

    The price of the grammar is a cost per decode step, so it is measured without speculation, where a
    step is one token. When the job speculates (`speculate`), a second engine without it also gives the arm
    `engine_no_speculation`: what speculation buys."""
    args = (str(config), overrides, texts, golds, price_rounds)
    if not speculate:
        arms = _in_child(*args, "all")
        return arms, arms.pop("_price")
    arms = _in_child(*args, "main")
    plain = _in_child(*args, "price")
    arms["engine_no_speculation"] = plain["engine_no_speculation"]
    return arms, plain["_price"]


def in_process_arms(loaded: LoadedConfig, texts: list[str], golds: list[dict],
                    price_rounds: int = 1, part: str = "all") -> dict[str, Any]:
    """`part`: "all" (every engine arm and the price), "main" (engine, unconstrained, retry) or "price"
    (the engine arm without speculation, as `engine_no_speculation`, and the price). The price is returned
    under `_price`."""
    cfg = loaded.config
    contract = loaded.contract
    schema = contract.json_schema
    schema_json = json.dumps(schema, ensure_ascii=False)
    for key, value in actor_env(cfg.workers.gpus_per_actor).items():  # the same engine set-up as an actor's
        os.environ.setdefault(key, value)
    kwargs = dict(cfg.model.engine_kwargs)
    if part == "price":
        kwargs["speculative_config"] = None
    engine = open_engine(loaded, len(texts), kwargs)
    compile_s = engine.warm(schema)
    max_tokens, temperature, n = cfg.model.max_tokens, cfg.model.temperature, len(texts)
    # `LLM.chat` over every document: chat templating and tokenizing are part of the call, so they are timed
    # here as they are in the pipeline (which does them in its actors).
    started = time.perf_counter()
    prompts = [engine.prompt_token_ids(render_prompt(cfg.prompt, t, schema_json)) for t in texts]
    render_s = time.perf_counter() - started
    common = {"engine_init_s": round(engine.init_seconds, 3), "schema_compile_s": round(compile_s, 3)}
    arms: dict[str, Any] = {}

    _, prefill_gen = _timed(engine, prompts, schema, 1, temperature)
    gens, gen_seconds = _timed(engine, prompts, schema, max_tokens, temperature)
    outcomes = [classify(g, contract, {"document": t}) for g, t in zip(gens, texts, strict=True)]
    name = "engine_no_speculation" if part == "price" else "engine"
    arms[name] = _arm(name, gens, gen_seconds + render_s, prefill_gen + render_s, n,
                      [o.record for o in outcomes], golds,
                      truncated=sum(o.reason == "truncated" for o in outcomes), render_s=round(render_s, 3),
                      **common)
    if part in ("all", "price"):
        arms["_price"] = _constraint_price(engine, prompts, schema, gens, gen_seconds, prefill_gen,
                                           price_rounds, max_tokens, temperature)
    if part in ("all", "main"):
        arms.update(_free_arms(engine, loaded, prompts, texts, golds, common))
    engine.close()  # the simulated engine's scheduler thread; vLLM's engine core
    del engine
    gc.collect()
    return arms


def _constraint_price(engine: Any, prompts: list[list[int]], schema: dict, gens: list[Generation],
                      gen_seconds: float, prefill_gen: float, rounds: int, max_tokens: int,
                      temperature: float) -> dict[str, Any]:
    """The price of the constraint, per decode step at equal work: free text forced to exactly the length
    each constrained output had, so both runs have the same sequences alive at every step. On 2 cores one
    run of either side varies by about 5%, which can swing a one-run price by 10%: so each side runs
    `rounds` times, alternating, and their medians are compared (`gens` is the first constrained round)."""
    n = len(prompts)
    lengths = [g.output_tokens for g in gens]
    constrained_s, free_s = [gen_seconds], []
    for round_ in range(rounds):
        if round_:
            again, again_s = _timed(engine, prompts, schema, max_tokens, temperature)
            _warn_if_lengths_differ("bench.constrained_rerun_differs", again, lengths)
            constrained_s.append(again_s)
        reset_prefix_cache(engine)
        started = time.perf_counter()
        equal = generate_exact(engine, prompts, lengths, temperature)
        free_s.append(time.perf_counter() - started)
        _warn_if_lengths_differ("bench.equal_lengths_missed", equal, lengths)
    _, prefill_free = _timed(engine, prompts, None, 1, temperature)
    steps = max(sum(lengths) - n, 1)
    return {
        "rounds": rounds,
        "constrained_s": [round(x, 3) for x in constrained_s],
        "equal_length_unconstrained_s": [round(x, 3) for x in free_s],
        "constrained_decode_ms_per_token": round(1000 * (statistics.median(constrained_s) - prefill_gen) / steps, 3),
        "equal_length_unconstrained_decode_ms_per_token": round(
            1000 * (statistics.median(free_s) - prefill_free) / steps, 3),
    }


def _free_arms(engine: Any, loaded: LoadedConfig, prompts: list[list[int]], texts: list[str],
               golds: list[dict], common: dict[str, Any]) -> dict[str, Any]:
    """The unconstrained arm and the retry baseline."""
    cfg, contract = loaded.config, loaded.contract
    schema_json = json.dumps(contract.json_schema, ensure_ascii=False)
    max_tokens, temperature, n = cfg.model.max_tokens, cfg.model.temperature, len(texts)
    arms: dict[str, Any] = {}
    _, prefill = _timed(engine, prompts, None, 1, temperature)
    gens, seconds = _timed(engine, prompts, None, max_tokens, temperature)
    records = [parse_free_text(g.text, contract, t)[0] for g, t in zip(gens, texts, strict=True)]
    arms["unconstrained"] = _arm("unconstrained", gens, seconds, prefill, n, records, golds, **common)

    # The retry baseline asks for the schema in words and re-asks each failure with its error.
    retry_template = cfg.prompt + RETRY_SUFFIX
    base = [render_prompt(retry_template, t, schema_json) for t in texts]
    reset_prefix_cache(engine)
    started = time.perf_counter()
    results: list[dict | None] = [None] * n
    errors = [""] * n
    all_gens: list[Generation] = []
    retries = 0
    pending = list(range(n))
    for attempt in range(MAX_RETRIES + 1):
        if not pending:
            break
        if attempt:
            retries += len(pending)
        texts_now = [base[i] if not attempt else
                     f"{base[i]}\nYour previous answer was rejected ({errors[i]}). Answer again." for i in pending]
        gens = engine.generate([engine.prompt_token_ids(p) for p in texts_now], None, max_tokens, temperature)
        all_gens += gens
        still = []
        for i, g in zip(pending, gens, strict=True):
            results[i], errors[i] = parse_free_text(g.text, contract, texts[i])
            if results[i] is None:
                still.append(i)
        pending = still
    seconds = time.perf_counter() - started
    arms["retry"] = _arm("retry", all_gens, seconds, 0.0, n, results, golds, retries=retries,
                         attempts=n + retries, **common)
    arms["retry"]["decode_ms_per_token"] = None  # mixed prompts and attempts: no clean decode-only figure
    return arms


# -- the pipeline arm -----------------------------------------------------------------------------------

def _committed_records(storage: Storage, output: str, golds: list[dict]) -> list[dict[str, Any] | None]:
    """The committed row of each gold document (dates as ISO text, as the engine arms' records), or None."""
    rows = read_columns(storage, committed(storage, output)[0].uri("rows", output)).to_pylist()
    by_id = {r["doc_id"]: r for r in rows}
    records: list[dict[str, Any] | None] = []
    for gold in golds:
        row = by_id.get(gold["doc_id"])
        records.append(None if row is None else {k: (v.isoformat() if hasattr(v, "isoformat") else v)
                                                 for k, v in row.items()})
    return records


def _sampled_run(config: Path, output: Path, extra: list[str]) -> tuple[RssSampler, float]:
    """`extract run` in a child process on a cluster of its own, like a user's first run, its RSS and CPU sampled;
    returns the sampler and the Unix time it started."""
    env = dict(os.environ)
    env.pop("RAY_ADDRESS", None)
    started = time.time()
    proc = subprocess.Popen([sys.executable, "-m", "pipeline", "run", str(config), "--output", str(output),
                             "--force", *extra], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    sampler = RssSampler(proc.pid)
    sampler.start()
    _, err = proc.communicate()
    sampler.stop.set()
    sampler.join()
    if proc.returncode != 0:
        raise RuntimeError(f"pipeline arm failed ({proc.returncode}): {err[-2000:]}")
    return sampler, started


def pipeline_arm(config: Path, output: Path, n_docs: int, golds: list[dict], extra: list[str]) -> dict[str, Any]:
    sampler, started = _sampled_run(config, output, extra)
    storage = storage_for(str(output))
    manifest = run_manifests(storage, str(output))[-1].to_dict()
    finished = datetime.fromisoformat(manifest["finished_at"]).timestamp()
    ready = max(a["ready_unix"] for a in manifest["actors"])
    steady = finished - ready
    records = _committed_records(storage, str(output), golds)
    t = manifest["timings"]
    run_start = datetime.fromisoformat(manifest["started_at"]).timestamp()

    def after_ready(key: str) -> float | None:  # seconds from the last actor being ready (engine warm) to `key`
        return round(run_start + t[key] - ready, 3) if t.get(key) is not None else None

    return {
        "arm": "pipeline",
        "docs": n_docs,
        "seconds": round(steady, 3),
        "wall_seconds": round(finished - started, 3),
        "docs_per_s": round(n_docs / steady, 3),
        "wall_docs_per_s": round(n_docs / (finished - started), 3),
        "output_tokens": manifest["tokens"].get("output", 0),
        "prompt_tokens": manifest["tokens"].get("prompt", 0),
        "output_tokens_per_s": round(manifest["tokens"].get("output", 0) / steady, 1),
        "ms_per_output_token": round(1000 * steady / max(manifest["tokens"].get("output", 1), 1), 3),
        "valid_rate": round(manifest["rows"] / n_docs, 4),
        **leaf_fields(records, golds, steady),
        "time_to_first_output_s": t.get("first_output_s"),
        "time_to_first_commit_s": t.get("first_commit_s"),
        "first_output_after_ready_s": after_ready("first_output_s"),
        "first_progress_after_ready_s": after_ready("first_progress_s"),  # live counts on screen (the run's desk)
        "first_document_after_ready_s": after_ready("first_document_s"),  # the first finished documents on screen
        "first_commit_after_ready_s": after_ready("first_commit_s"),
        "engine_init_s": t.get("engine_init_s"),
        "schema_compile_s": t.get("schema_compile_s"),
        "driver_peak_rss_mb": round(sampler.driver_peak / 2**20, 1),
        "worker_peak_rss_mb": round(sampler.worker_peak / 2**20, 1),
        **actor_cpu(sampler.worker_cpu, ready, finished, sampler.machine_cpu),
        "dead_letters_by_reason": manifest["dead_letters_by_reason"],
        "stage_cpu_ms": manifest.get("stage_cpu_ms"),  # the actors' CPU per document beside the engine, by stage
    }


# -- report ---------------------------------------------------------------------------------------------

def _without_confidence(loaded: LoadedConfig) -> list[str]:
    """`--set` flags that turn `_confidence` off, and what acts on it (a confidence bar, a calibration)."""
    flags = ["--set", "output.confidence=false"]
    for key in ("min_confidence", "calibration"):
        if getattr(loaded.config.output, key) is not None:
            flags += ["--set", f"output.{key}=null"]
    return flags


def ratios(arms: dict[str, dict[str, Any]], price: dict[str, Any],
           long: dict[str, Any] | None = None) -> dict[str, float | None]:
    def div(a: float | None, b: float | None) -> float | None:
        return round(a / b, 3) if a and b else None

    return {
        "pipeline_over_engine": div(arms["pipeline"]["docs_per_s"], arms["engine"]["docs_per_s"]),
        # Over the pipeline's own requests (prompts, grounded grammars, sampling, engine settings) in one engine
        # call: what Ray, the batches and the actor's threads cost, the levers' own cost left out.
        "pipeline_over_engine_same_requests": div(arms["pipeline"]["docs_per_s"],
                                                  arms.get(SAME_REQUESTS, {}).get("docs_per_s")),
        "pipeline_over_engine_same_requests_tokens": div(arms["pipeline"]["output_tokens_per_s"],
                                                         arms.get(SAME_REQUESTS, {}).get("output_tokens_per_s")),
        # decode only, at equal output lengths, medians of alternating rounds (see _constraint_price); the
        # free-running arm's figure is skewed by its longer outputs keeping more sequences alive per step
        "constrained_over_unconstrained_per_token": div(
            price["constrained_decode_ms_per_token"], price["equal_length_unconstrained_decode_ms_per_token"]),
        "pipeline_over_retry": div(arms["pipeline"]["docs_per_s"], arms["retry"]["docs_per_s"]),
        # The same comparison per output token. Greedy decoding on CPU is not batch-invariant: the pipeline's
        # batches can write a few percent more or fewer tokens than the engine's one call, which moves docs/s
        # but not this.
        "pipeline_over_engine_tokens": div(arms["pipeline"]["output_tokens_per_s"],
                                           arms["engine"]["output_tokens_per_s"]),
        # What the job's speculative decoding buys the bare engine (None when the job does not speculate).
        "engine_speculation_speedup": div(arms["engine"]["docs_per_s"],
                                          arms.get("engine_no_speculation", {}).get("docs_per_s")),
        # What `_confidence` costs: the pipeline with it over the same pipeline without (None when the job has it
        # off). Per output token too, for the reason given above.
        "confidence_over_plain": div(arms["pipeline"]["docs_per_s"],
                                     arms.get("pipeline_no_confidence", {}).get("docs_per_s")),
        "confidence_over_plain_tokens": div(arms["pipeline"]["output_tokens_per_s"],
                                            arms.get("pipeline_no_confidence", {}).get("output_tokens_per_s")),
        **naive_ratios(arms),  # None without the naive arm
        # Output tokens/s on windowed documents over short ones, one engine (None without --long: bench_long)
        "long_over_short_tokens": long["long_over_short_tokens"] if long else None,
    }


def _scaling_arm(config: Path, out: Path, docs: int, golds: list[dict], extra: list[str],
                 arms: dict[str, Any]) -> dict[str, Any]:
    """Two actors sharing the cores of this machine: each asks for 0.75 CPU so both fit on a 2-core node."""
    two = ["--set", "workers.actors=2", "--set", "workers.cpus_per_actor=0.75"]
    arms["pipeline_2_actors"] = pipeline_arm(config, out / "pipeline-2-output", docs, golds, extra + two)
    one, both = arms["pipeline"]["docs_per_s"], arms["pipeline_2_actors"]["docs_per_s"]
    return {"speedup": round(both / one, 3), "efficiency": round(both / (2 * one), 3), "cpus": os.cpu_count()}


def _memory_arm(config: Path, out: Path, docs: int, memory_scale: int, extra: list[str],
                arms: dict[str, Any]) -> dict[str, Any]:
    """The driver streams: its peak RSS must not grow with the corpus. Same settings, K× the documents."""
    big_ids, big_texts, big_golds = make_corpus(docs * memory_scale, SEED + 1, prefix="bench-mem")
    big = out / f"corpus-x{memory_scale}.parquet"
    pq.write_table(pa.table({"doc_id": big_ids, "text": pa.array(big_texts, pa.string())}), big)
    big_extra = [a if not a.startswith("input.uri=") else f"input.uri={big}" for a in extra]
    arms[f"pipeline_x{memory_scale}"] = pipeline_arm(config, out / f"pipeline-x{memory_scale}-output",
                                                     docs * memory_scale, big_golds, big_extra)
    small, large = arms["pipeline"]["driver_peak_rss_mb"], arms[f"pipeline_x{memory_scale}"]["driver_peak_rss_mb"]
    return {"scale": memory_scale, "driver_rss_mb": small, "driver_rss_mb_scaled": large,
            "ratio": round(large / small, 3) if small else None}


def pipeline_settings(docs: int, loaded: LoadedConfig, corpus: Path) -> tuple[dict[str, Any], list[str]]:
    """The pipeline arm's settings (one actor on every core, its documents in `IN_FLIGHT` batches, all in flight),
    and the `--set` flags that run it on `corpus`; `engine_same_requests` starts its engine with the same settings."""
    settings = {"workers.cpus_per_actor": os.cpu_count() or 1, "workers.batch_size": max(1, -(-docs // IN_FLIGHT)),
                "workers.batches_in_flight": IN_FLIGHT, "model.max_tokens": loaded.config.model.max_tokens}
    extra = ["--set", f"input.uri={corpus.resolve()}", "--set", "input.limit=null"]
    for key, value in settings.items():
        extra += ["--set", f"{key}={value}"]
    return settings, extra


@dataclasses.dataclass
class BenchInput:
    """The bench's synthetic documents (written to OUT/corpus.parquet) and the job's overrides that read them."""

    ids: list[str]
    texts: list[str]
    golds: list[dict]
    corpus: Path
    overrides: dict[str, Any]
    loaded: LoadedConfig


def bench_input(config: Path, docs: int, out: Path, max_tokens: int | None) -> BenchInput:
    out.mkdir(parents=True, exist_ok=True)
    ids, texts, golds = make_corpus(docs, SEED, prefix="bench")
    corpus = out / "corpus.parquet"
    pq.write_table(pa.table({"doc_id": ids, "text": pa.array(texts, pa.string())}), corpus)
    overrides: dict[str, Any] = {"input.uri": str(corpus.resolve()), "input.limit": None}
    if max_tokens:
        overrides["model.max_tokens"] = max_tokens
    return BenchInput(ids, texts, golds, corpus, overrides, load_config(config, overrides))


def long_arm(config: Path, given: BenchInput, out: Path, setup: LongSetup) -> dict[str, Any]:
    """The long-document arm (`pipeline.tools.bench_long`) at the pipeline arm's settings, in a child started with
    the actor's environment; writes OUT/bench-long.json, .md and bench-windows.png."""
    settings, _ = pipeline_settings(len(given.ids), given.loaded, given.corpus)
    report = run_long_arm(config, {**given.overrides, **settings}, given.ids, given.texts, given.golds, out, setup,
                          env=actor_env(given.loaded.config.workers.gpus_per_actor))
    write_long(out, report)
    return report


def run_bench(config: Path, docs: int, out: Path, scaling: bool = False, memory_scale: int = 0,
              max_tokens: int | None = None, price_rounds: int = 3, naive: bool = False,
              long: LongSetup | None = None) -> dict[str, Any]:
    """Every arm (the module's docstring); with `long`, also the long-document arm and the windows curve."""
    out = out.resolve()  # the pipeline arm's --output would otherwise resolve against the config's folder
    given = bench_input(config, docs, out, max_tokens)
    texts, golds, corpus, overrides, loaded = given.texts, given.golds, given.corpus, given.overrides, given.loaded
    arms, price = engine_arms(config, overrides, texts, golds, price_rounds, job_speculates(loaded))
    # The engine arm uses every core and sees every document at once. So does the pipeline's one actor: its
    # documents come in 4 batches, all in flight together in its one engine. (The larger memory run feeds the
    # same batches continuously, 4 at a time.)
    settings, extra = pipeline_settings(docs, loaded, corpus)
    # The pipeline's requests on its actor's engine, in one call, in a child started with the actor's environment.
    arms.update(_in_child(str(config), {**overrides, **settings}, texts, golds, price_rounds, "same_requests",
                          env=actor_env(loaded.config.workers.gpus_per_actor)))
    if naive:  # vLLM's defaults: an engine of its own (bench_naive), so not in --quick unless asked
        arms.update(_in_child(str(config), overrides, texts, golds, price_rounds, NAIVE, env=NAIVE_ENV))
    long_report = long_arm(config, given, out, long) if long else None
    (out / "bench.partial.json").write_text(json.dumps({"arms": arms, "constraint_price": price}, indent=2))
    arms["pipeline"] = pipeline_arm(Path(config), out / "pipeline-output", docs, golds, extra)
    if loaded.config.output.confidence:
        # The same run without `_confidence` (no log-probabilities asked of the engine): what confidence costs.
        # `_spans` cannot be turned off (they come from the grounded grammar's candidates), so both arms have them.
        arms["pipeline_no_confidence"] = pipeline_arm(Path(config), out / "pipeline-plain-output", docs, golds,
                                                      extra + [*_without_confidence(loaded)])
    scaling_report = _scaling_arm(Path(config), out, docs, golds, extra, arms) if scaling else None
    memory_report = _memory_arm(Path(config), out, docs, memory_scale, extra, arms) if memory_scale > 1 else None
    report = {"docs": docs, "model": loaded.config.model.path, "max_tokens": loaded.config.model.max_tokens,
              "engine_kwargs": loaded.config.model.engine_kwargs, "arms": arms, "constraint_price": price,
              "ratios": ratios(arms, price, long_report), "long_documents": long_report,
              "scaling_2_over_1_actors": scaling_report, "driver_memory": memory_report, "machine": machine()}
    (out / "bench.json").write_text(json.dumps(report, indent=2))
    (out / "bench.md").write_text(render_markdown(report))
    render_chart(report, out / "bench.png")
    return report


def run_long_only(config: Path, docs: int, out: Path, max_tokens: int | None, setup: LongSetup) -> dict[str, Any]:
    """`extract bench --long-only`: the long-document arm and the curve alone (one engine start)."""
    out = out.resolve()
    return long_arm(config, bench_input(config, docs, out, max_tokens), out, setup)
