"""`extract bench`'s arm `engine_same_requests`: the pipeline's own requests, straight to one engine in one call.

The `engine` arm sends the user's prompt under the bare schema's grammar. The pipeline's actor sends more: the
job's prompt (system message, the schema or few-shot examples as turns, the chat template), a grammar grounded in
each document and bounded for `max_tokens`, the job's sampling (`model.sampling`: the presence penalty; the
log-probabilities `_confidence` asks for), on an engine started with the actor's settings (its KV budget sized
from the input, speculation from the document). So `pipeline ÷ engine` mixes what the pipeline's machinery costs
with what those levers cost.

This arm runs the actor's own code, not a copy of it: the engine comes from `workers.actor.start_engine` on the
`ExtractionSpec` the driver builds (`pipeline.dataflow.build_spec`, with the input's KV sample as
`build_dataset` adds it), and every document goes through one `BatchExtractor.outcomes` call, which builds each
document's prompt and grammar, sends them all to the engine in one `generate` call and classifies the outputs as
the actor does. Only Ray, Ray Data's batches, the threads and the staging and commit are left out, so
`pipeline ÷ engine_same_requests` is what they cost.

Timed: building the requests (prompts, tokenizing, grounding) and the generation, as the `engine` arm times its
rendering, tokenizing and generation; classifying is reported beside (`classify_s`), not in `seconds`. The
prefill-plus-one-token pass (for the decode-only figure) resends the same prompts and grounded schemas with
max_tokens=1 from a cold prefix cache, after the timed run: its grammars are bounded for one token, so they are
compiled again, as the timed run compiled its own.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Mapping, Sequence
from typing import Any

from pipeline.config import LoadedConfig
from pipeline.dataflow import actor_env, build_spec
from pipeline.partition import partition_for
from pipeline.planning import plan_input
from pipeline.stage_config import ActorConfig, InputSource
from pipeline.storage import storage_for
from pipeline.tools.bench_sampler import others_cpu
from pipeline.tools.machine import cpu_seconds
from workers.actor import start_engine
from workers.engine import Generation, has_accelerator
from workers.engine.contract import NO_BOUNDS, Engine, GrammarBounds
from workers.extractor import BatchExtractor
from workers.memory import read_sample
from workers.spec import ExtractionSpec

ARM = "engine_same_requests"


@dataclasses.dataclass(frozen=True)
class _Call:
    """One `generate` call the extractor made: its requests, and when it started and ended (perf_counter)."""

    prompts: list[list[int]]
    schemas: list[dict[str, Any] | None]
    temperature: float
    started: float
    ended: float
    generations: list[Generation]


class TimedEngine(Engine):
    """The actor's engine as the extractor sees it (the contract, `workers.engine.contract.Engine`), each `generate`
    call recorded; every other call and fact is the engine's own."""

    def __init__(self, engine: Engine) -> None:
        self.inner = engine
        self.calls: list[_Call] = []
        self.max_model_len = engine.max_model_len
        self.max_chars_per_token = engine.max_chars_per_token
        self.init_seconds = engine.init_seconds

    @property
    def tokenizer(self) -> Any:  # type: ignore[override]
        return self.inner.tokenizer

    @property
    def sampling_options(self) -> Mapping[str, Any]:  # type: ignore[override]
        return self.inner.sampling_options

    @property
    def grammar_bounds(self) -> GrammarBounds:  # type: ignore[override]
        return self.inner.grammar_bounds

    def prompt_token_ids(self, prompt: Any) -> list[int]:
        return self.inner.prompt_token_ids(prompt)

    def warm(self, json_schema: dict[str, Any]) -> float:
        return self.inner.warm(json_schema)

    def compile(self, json_schema: dict[str, Any]) -> float | None:
        return self.inner.compile(json_schema)

    def use_sampling(self, options: Mapping[str, Any], grammar_bounds: GrammarBounds = NO_BOUNDS) -> None:
        self.inner.use_sampling(options, grammar_bounds)

    def close(self) -> None:
        self.inner.close()

    def generate(self, prompts: list[list[int]], json_schema: dict[str, Any] | None | Sequence[dict[str, Any] | None],
                 max_tokens: int, temperature: float, seeds: Sequence[int | None] | None = None) -> list[Generation]:
        started = time.perf_counter()
        generations = self.inner.generate(prompts, json_schema, max_tokens, temperature, seeds)
        schemas = list(json_schema) if isinstance(json_schema, list | tuple) else [json_schema] * len(prompts)
        self.calls.append(_Call(prompts, schemas, temperature, started, time.perf_counter(), generations))
        return generations


def actor_spec(loaded: LoadedConfig, run_id: str = "bench-same-requests") -> ExtractionSpec:
    """The `ExtractionSpec` an actor of `extract run` gets for this config: the driver's `build_spec`, with the KV
    sample `build_dataset` reads from the units it plans (one partition, no `{date}`)."""
    spec = build_spec(ActorConfig.of(loaded), run_id)
    units = plan_input(InputSource.of(loaded), partition_for(loaded.input_uri, None)).units
    storage = storage_for(loaded.input_uri, loaded.s3_settings)
    cpu = not loaded.config.workers.gpus_per_actor
    return dataclasses.replace(spec, kv_sample=read_sample(storage, units, spec, cpu=cpu))


def same_requests_arm(loaded: LoadedConfig, ids: list[str], texts: list[str]) -> dict[str, Any]:
    """The arm's raw figures: the actor's engine and extractor, every document in one `outcomes` call. Returns the
    timings (seconds), the engine's generations and each document's record or None (scored by the caller)."""
    for key, value in actor_env(loaded.config.workers.gpus_per_actor).items():  # as the actor's runtime_env
        os.environ.setdefault(key, value)
    spec = actor_spec(loaded)
    engine = TimedEngine(start_engine(spec, has_accelerator()))
    try:
        extractor = BatchExtractor(engine, spec, min(spec.engine.max_model_len, engine.max_model_len))
        extractor.prepare()  # the actor's warm-up of the job's schema
        started, cpu_started, machine_started = time.perf_counter(), time.process_time(), cpu_seconds()
        outcomes = extractor.outcomes(ids, texts)
        ended, cpu_s, machine_ended = time.perf_counter(), time.process_time() - cpu_started, cpu_seconds()
        calls = list(engine.calls)
        prefill_s = _prefill_plus_one(engine, calls[0]) if calls else 0.0
    finally:
        engine.inner.close()
    build_s = calls[0].started - started if calls else ended - started
    generate_s = sum(c.ended - c.started for c in calls)
    return {
        "seconds": build_s + generate_s,
        "build_s": build_s,
        "generate_s": generate_s,
        "classify_s": max(ended - started - build_s - generate_s, 0.0),
        "prefill_plus_one_s": build_s + prefill_s,
        # CPU seconds of the process (all its threads) over the `outcomes` call, and the cores that is on average:
        # on a shared machine, a figure well under the cores the engine uses says the arm was starved of CPU.
        "cpu_s": cpu_s,
        "cores_used": cpu_s / max(ended - started, 1e-9),
        # What every other process on the machine took meanwhile, as the pipeline arm reports its own (`actor_cpu`).
        "others_cpu_s": others_cpu(machine_ended[0] - machine_started[0] if machine_started and machine_ended
                                   else None, cpu_s),
        "engine_calls": len(calls),
        "requests": sum(len(c.prompts) for c in calls),
        "distinct_grammars": len({repr(s) for c in calls for s in c.schemas}),
        "engine_init_s": engine.init_seconds,
        "schema_compile_s": sum(extractor.compile_seconds.values()),
        "generations": [g for c in calls for g in c.generations],  # every attempt's (one, unless model.retry)
        "truncated": sum(o.reason == "truncated" for o in outcomes),
        "records": [o.record if o.is_row else None for o in outcomes],
        "sequences_in_flight": spec.sequences_in_flight,
        "sampling": dict(spec.sampling),
    }


def _prefill_plus_one(engine: TimedEngine, call: _Call) -> float:
    """The first call's requests again with max_tokens=1, from a cold prefix cache: prefill plus one step."""
    reset = getattr(engine.inner, "reset_prefix_cache", None)  # EngineThread's; its thread is idle here
    if reset is not None:  # (the simulated engine has no cache)
        reset()
    started = time.perf_counter()
    engine.inner.generate(call.prompts, call.schemas, 1, call.temperature)
    return time.perf_counter() - started


def describe(arm: dict[str, Any] | None) -> list[str]:
    """The markdown lines under the bench's table that say what the arm sent and where its time went."""
    if not arm:
        return []
    return ["", f"{ARM}: {arm['requests']} requests in {arm['engine_calls']} engine call(s), "
            f"{arm['distinct_grammars']} distinct grammars, sampling {arm['sampling']}, "
            f"{arm['prompt_tokens']} prompt tokens; {arm['build_s']} s building them (prompts, tokenizing, "
            f"grounding) and {arm['generate_s']} s generating (both timed), {arm['classify_s']} s classifying "
            f"(not timed, as in the engine arm); {arm['cpu_s']} CPU s, {arm['cores_used']} cores on average."]
