"""`extract conformance`: how much of real-world JSON Schema the grammar engine enforces, and what our
post-check adds.

No structured-output engine promises that its output satisfies the whole schema (JSONSchemaBench,
arXiv 2501.10868), so the pipeline re-validates every output with a full validator. This harness
measures both sides on two corpora we were not tuned on (`../shared/corpora`, read-only):

- `jsonschemabench-dev`, per subset: compile coverage per backend and with the xgrammar → guidance
  fallback; compile time p50/p99; compliance of one generated output per schema *before* the
  post-check; that every row the post-check lets through is valid when re-validated independently;
  and our validator's agreement with the benchmark's own valid and invalid instances.
- `json-schema-test-suite` (draft2020-12), per keyword category: whether the XGrammar grammar rejects
  the suite's invalid instances, whether our validator does, and its agreement with the suite.

It writes DIR/conformance.json (every figure, and the per-schema detail) and DIR/conformance.md. A
run longer than one sitting can be split (`keep=True`): each run writes DIR/parts/*.json, and the
report is rendered from every part in the folder.
"""

from __future__ import annotations

import atexit
import gc
import json
import math
import os
import shutil
import tempfile
import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import structlog

from workers.compiler import BACKENDS

log = structlog.get_logger(__name__)

BENCH = "jsonschemabench-dev"
SUITE = "json-schema-test-suite"
CORPORA = (BENCH, SUITE)
# The shared corpora sit beside the project (`../shared/corpora`); EXTRACT_CORPORA points elsewhere.
DEFAULT_CORPORA_ROOT = Path(os.environ.get("EXTRACT_CORPORA")
                            or Path(__file__).resolve().parents[3] / "shared" / "corpora")
SUITE_DRAFT = "draft2020-12"
SUITE_REMOTES_BASE = "http://localhost:1234/"  # where the suite's tests expect remotes/ to be served

PROMPT = "Generate a JSON object that conforms to this JSON Schema:\n{schema}"
PROMPT_CAP_MARKER = "\n... (schema truncated)"
MIN_SCHEMA_TOKENS = 64  # below this much of the schema in the prompt, the request is not attempted

# Generation statuses. The first five are outputs of the engine (they count in compliance).
GENERATED = ("valid", "schema_violation", "invalid_json", "truncated", "engine_error")
NOT_GENERATED = ("not_attempted", "not_compiled", "schema_invalid", "skipped")

PUBLISHED = {
    "source": "JSONSchemaBench (Geng et al. 2025, arXiv 2501.10868), Tables 2-3",
    "subset": "Github_hard",
    "empirical_coverage": {"xgrammar": 0.28, "guidance": 0.41},
    "compliance": {"xgrammar": 0.41, "guidance": 0.69},
    "median_compile_s_xgrammar": "0.12-0.30",
}


class ConformanceError(ValueError):
    """A corpus, subset or category that does not exist, or options that do not fit together."""


@dataclass
class Options:
    corpora_root: Path = DEFAULT_CORPORA_ROOT
    subsets: list[str] | None = None
    categories: list[str] | None = None
    limit: int | None = None
    max_tokens: int = 512
    max_model_len: int = 4096
    generate: bool = True
    generate_limit: int | None = None  # generate for the first N schemas of each subset only (id order)
    compile_timeout_s: float = 30.0
    keep: bool = False  # merge with the parts already in the output folder instead of starting afresh
    # The grammar-only bounds (schemas.bounds) on the schema sent to generation, as the pipeline applies them:
    # "auto" fits them to max_tokens, "none" generates under the schema as written. The prompt, the judge and
    # the post-check keep the schema as written either way.
    grammar_bounds: str = "auto"


# -- small pure helpers -------------------------------------------------------------------------------

def share(part: int, whole: int) -> float | None:
    return round(part / whole, 4) if whole else None


def nearest_rank(values: Iterable[float], q: float) -> float | None:
    """Nearest-rank percentile (q in (0, 1]); None for no values."""
    ordered = sorted(values)
    if not ordered:
        return None
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


def verdict(rejected: int, checked: int) -> str:
    """How fully a check enforces a keyword category, from how many invalid instances it rejected."""
    if checked == 0:
        return "n/a"
    if rejected == checked:
        return "enforced"
    return "not enforced" if rejected == 0 else "partly"


def first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0] if text else ''}"[:300]


def compact_json(value: Any) -> str:
    """The text the engine would emit for `value`: compact JSON (the engine runs with no free whitespace)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


# -- corpora -------------------------------------------------------------------------------------------

@dataclass
class BenchSchema:
    subset: str
    id: str
    schema: Any

    @property
    def key(self) -> str:
        return f"{self.subset}/{self.id}"


def corpus_dir(root: Path, name: str) -> Path:
    folder = root / name
    if not folder.is_dir():
        raise ConformanceError(f"corpus {name!r}: {folder} does not exist")
    return folder


def bench_subsets(root: Path) -> list[str]:
    return sorted(p.name for p in (corpus_dir(root, BENCH) / "schemas").iterdir() if p.is_dir())


def load_bench(root: Path, subsets: list[str] | None, limit: int | None) -> list[BenchSchema]:
    """The schemas of `subsets` (all by default), the first `limit` of each in id order."""
    known = bench_subsets(root)
    for name in subsets or []:
        if name not in known:
            raise ConformanceError(f"--subset {name!r}: not a subset of {BENCH} (one of {', '.join(known)})")
    items = []
    for subset in [s for s in known if not subsets or s in subsets]:
        files = sorted((corpus_dir(root, BENCH) / "schemas" / subset).glob("*.json"))
        for path in files[:limit] if limit is not None else files:
            items.append(BenchSchema(subset, path.stem, json.loads(path.read_text())))
    return items


def load_instances(root: Path) -> dict[str, list[dict[str, Any]]]:
    """The benchmark's own instances, `subset/id` → [{description, valid, data}]; a row without a subset
    (a user's folder of schemas) is keyed `*/id`. No instances.jsonl: none."""
    found: dict[str, list[dict[str, Any]]] = {}
    path = corpus_dir(root, BENCH) / "instances.jsonl"
    if not path.is_file():
        return found
    with open(path) as handle:
        for line in handle:
            if line.strip():
                row = json.loads(line)
                found[f"{row.get('subset', '*')}/{row['id']}"] = row.get("tests") or []
    return found


def suite_categories(root: Path) -> list[str]:
    return sorted(p.stem for p in (corpus_dir(root, SUITE) / "tests" / SUITE_DRAFT).glob("*.json"))


def load_suite(root: Path, categories: list[str] | None) -> dict[str, list[dict[str, Any]]]:
    """Test cases per keyword category (file name): [{description, schema, tests: [{data, valid}]}]."""
    known = suite_categories(root)
    for name in categories or []:
        if name not in known:
            raise ConformanceError(f"--category {name!r}: not a {SUITE} {SUITE_DRAFT} file")
    folder = corpus_dir(root, SUITE) / "tests" / SUITE_DRAFT
    return {c: json.loads((folder / f"{c}.json").read_text()) for c in known if not categories or c in categories}


def suite_registry(root: Path) -> Any:
    """The suite's remotes/ as a local registry at the URIs its tests use; anything else is refused."""
    import referencing
    import referencing.jsonschema

    from schemas.validation import NO_REMOTE_REGISTRY

    remotes = corpus_dir(root, SUITE) / "remotes"
    resources = []
    for path in sorted(remotes.rglob("*.json")):
        uri = SUITE_REMOTES_BASE + path.relative_to(remotes).as_posix()
        contents = json.loads(path.read_text())
        resources.append((uri, referencing.Resource.from_contents(
            contents, default_specification=referencing.jsonschema.DRAFT202012)))
    return NO_REMOTE_REGISTRY.with_resources(resources)


# -- validators ---------------------------------------------------------------------------------------

def suite_validator(json_schema: Any, registry: Any) -> Any:
    """Our full validator, with the suite's remotes resolvable (`schemas.validation.full_validator`
    takes no registry, so it is assembled here from the same public pieces)."""
    import jsonschema

    from schemas.validation import DEFAULT_DRAFT, format_checker

    cls = jsonschema.validators.validator_for(json_schema, default=DEFAULT_DRAFT)
    cls.check_schema(json_schema)
    return cls(json_schema, format_checker=format_checker(cls), registry=registry)


def independent_validator(json_schema: Any) -> Any:
    """A second opinion for emitted rows: plain `jsonschema` for the schema's draft with its own format
    checker and no remote retrieval, built apart from `schemas.validation` and the contract."""
    import jsonschema
    import referencing

    cls = jsonschema.validators.validator_for(json_schema, default=jsonschema.Draft202012Validator)
    return cls(json_schema, format_checker=cls.FORMAT_CHECKER, registry=referencing.Registry())


def instance_verdict(validator: Any, data: Any) -> tuple[bool | None, str]:
    """(valid?, first error) under our validator; (None, reason) when the schema cannot be applied."""
    from schemas.validation import SchemaRefError, schema_errors

    try:
        errors = schema_errors(validator, data)
    except SchemaRefError as exc:
        return None, f"schema_ref_error: {exc}"
    except Exception as exc:  # noqa: BLE001 - a validator crash is a disagreement to report, not a harness crash
        return None, first_line(exc)
    return (not errors), (f"{errors[0]['keyword']} at /{'/'.join(errors[0]['loc'])}: {errors[0]['msg']}"
                          if errors else "")


def agreement_tally(verdicts: Iterable[tuple[bool, bool | None]]) -> dict[str, Any]:
    """Counts of (expected, ours) pairs: agreement overall and on valid and invalid instances apart."""
    tally = Counter()
    for expected, ours in verdicts:
        side = "valid" if expected else "invalid"
        tally["n"] += 1
        tally[f"{side}_n"] += 1
        if ours is None:
            tally["errors"] += 1
        elif ours == expected:
            tally["agree"] += 1
            tally[f"{side}_agree"] += 1
    keys = ("n", "agree", "valid_n", "valid_agree", "invalid_n", "invalid_agree", "errors")
    out: dict[str, Any] = {k: tally[k] for k in keys}
    out["share"] = share(out["agree"], out["n"])
    return out


# -- compile coverage ---------------------------------------------------------------------------------

def compile_record(compiler: Any, json_schema: Any, name: str) -> dict[str, Any]:
    """`workers.compiler`'s verdict on one schema: limits, each backend's compile (vLLM's request
    validation included), the backend the pipeline would use, and what that backend leaves to the
    post-check. Schemas over a limit are still compiled, for the per-backend figures."""
    check = compiler.check(json_schema, name=name, all_backends=True)
    results = dict(check.results)
    for backend in BACKENDS:
        if backend not in results:  # check() stops at a limit error
            results[backend] = compiler.compile(json_schema, backend)
    return {
        "schema_hash": check.schema_hash,
        "limit_error": check.limit_error,
        "compile": {b: {"ok": r.ok, "seconds": round(r.seconds, 4), "error": r.error} for b, r in results.items()},
        "backend": check.backend,
        "unenforced": [list(pair) for pair in check.unenforced],
        "enforced_by": check.enforced_by,
    }


def compile_all(compiler: Any, items: list[BenchSchema]) -> dict[str, dict[str, Any]]:
    records = {}
    started = time.perf_counter()
    for n, item in enumerate(items, 1):
        try:
            records[item.key] = compile_record(compiler, item.schema, item.key)
        except Exception as exc:  # noqa: BLE001 - one schema that breaks the checker must not end the run
            records[item.key] = {"schema_hash": None, "limit_error": f"{type(exc).__name__}: {exc}",
                                 "compile": {b: {"ok": False, "seconds": 0.0, "error": "check failed"}
                                             for b in BACKENDS},
                                 "backend": None, "unenforced": [], "enforced_by": ""}
        if n % 50 == 0 or n == len(items):
            log.info("conformance.compiled", done=n, of=len(items), seconds=round(time.perf_counter() - started, 1))
    return records


# -- generation ---------------------------------------------------------------------------------------

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
    """A vLLM engine (no Ray) holding one structured-output backend.

    Its engine core runs in vLLM's own child process (V1 multiprocessing), not in this one: a deleted
    in-process engine does not give its memory back, so a second in-process engine would find less room.
    A core process exits on `close_engine` and returns all of it.
    """
    from workers.engine import VllmEngine, engine_arguments, has_accelerator

    os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "1"
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
    os.environ.setdefault("VLLM_LOGGING_STREAM", "ext://sys.stderr")  # stdout carries the report
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    kwargs = {"kv_cache_memory_bytes": TEST_KV_CACHE_BYTES, "enforce_eager": True,
              "structured_outputs_config": {"backend": backend}}
    return VllmEngine(**engine_arguments(model_path, max_model_len, 1, kwargs, has_accelerator()))


def close_engine(engine: Any) -> None:
    """Stop the engine's core process now, rather than whenever the garbage collector gets to it."""
    engine.close()


def generate_batch(engine: Any, jobs: list[Job], max_tokens: int) -> list[Any]:
    """One Generation or exception per job, all jobs in one `generate` call when vLLM accepts them.

    vLLM validates every request before it runs any, so one schema it refuses fails the whole call.
    Then each request is probed alone with max_tokens=1 (the prompt's prefix stays cached), the refused
    ones get their error, and the rest run as one batch; per-request calls are the last resort.
    """
    def run(batch: list[Job], tokens: int) -> list[Any]:
        grammars = [job.schema if job.grammar is None else job.grammar for job in batch]
        return engine.generate([job.prompt_ids for job in batch], grammars, tokens, 0.0)

    if not jobs:
        return []
    try:
        return run(jobs, max_tokens)
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
            results[i] = gen
    except Exception:  # noqa: BLE001 - the last resort: one request at a time
        for i in accepted:
            try:
                results[i] = run([jobs[i]], max_tokens)[0]
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


def generate_all(jobs: list[Job], model_path: str, opts: Options) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """One engine per backend, one after another: each job goes to the first backend that compiled it;
    a job the xgrammar engine refuses at request time goes on to the guidance engine."""
    outputs: dict[str, Any] = {}
    timings = []
    carried: list[Job] = []
    for backend in BACKENDS:
        batch = [j for j in jobs if j.backends and j.backends[0] == backend and j not in carried] + carried
        if not batch:
            continue
        done, carried, timing = run_backend(backend, batch, model_path, opts)
        for key, value in done.items():
            outputs[key] = {**outputs.get(key, {}), **value}
        timings.append(timing)
    return outputs, timings


# -- judging outputs ----------------------------------------------------------------------------------

def judge(item: BenchSchema, validator: Any, output: dict[str, Any]) -> dict[str, Any]:
    """One output's verdict: compliance under the full validator (before the post-check), then the
    pipeline's own post-check (`workers.classify.classify` with a `SchemaContract`), then an independent
    re-validation of what the post-check let through."""
    from schemas.validation import SchemaRefError, schema_errors

    gen = output.get("generation")
    result: dict[str, Any] = {k: v for k, v in output.items() if k != "generation"}
    if gen is None or isinstance(gen, Exception):
        result.setdefault("status", "engine_error")
        if isinstance(gen, Exception):
            result["error"] = f"{type(gen).__name__}: {gen}"[:500]
        result.update(emitted=False, revalidated_valid=None)
        return result
    result.update(finish_reason=gen.finish_reason, prompt_tokens=gen.prompt_tokens,
                  output_tokens=gen.output_tokens, output=gen.text)
    if gen.finish_reason == "length":
        result["status"] = "truncated"
    elif gen.finish_reason not in ("stop", None):
        result["status"] = "engine_error"
        result["error"] = f"finish_reason {gen.finish_reason!r}"
    else:
        try:
            parsed = json.loads(gen.text)
        except json.JSONDecodeError as exc:
            result.update(status="invalid_json", error=f"{exc.msg} at char {exc.pos}")
        else:
            try:
                errors = schema_errors(validator, parsed)
            except SchemaRefError as exc:
                errors = [{"keyword": "$ref", "loc": [], "msg": str(exc), "schema_path": ""}]
            result["status"] = "schema_violation" if errors else "valid"
            if errors:
                result["violations"] = [{"keyword": e["keyword"], "loc": "/" + "/".join(e["loc"]),
                                         "msg": e["msg"][:200]} for e in errors[:5]]
    result.update(post_check(item, gen))
    return result


def post_check(item: BenchSchema, gen: Any) -> dict[str, Any]:
    """What the pipeline does with the output: a row (emitted) or a dead letter; rows re-validated."""
    from schemas.contract import SchemaContract
    from workers.classify import classify

    try:
        contract = SchemaContract.from_dict(item.schema, default_name=item.id, source=item.key)
    except Exception as exc:  # noqa: BLE001 - a schema the pipeline refuses up front emits nothing
        return {"emitted": False, "dead_letter": "schema_refused", "revalidated_valid": None,
                "post_check_error": f"{type(exc).__name__}: {exc}"[:300]}
    outcome = classify(gen, contract, {"document": "", "document_id": item.key})
    if not outcome.is_row:
        return {"emitted": False, "dead_letter": outcome.reason, "revalidated_valid": None}
    try:
        valid = bool(independent_validator(item.schema).is_valid(outcome.record))
    except Exception as exc:  # noqa: BLE001 - an emitted row the second validator cannot judge is not proven valid
        return {"emitted": True, "revalidated_valid": False, "revalidation_error": f"{type(exc).__name__}: {exc}"}
    return {"emitted": True, "revalidated_valid": valid}


# -- the benchmark corpus -----------------------------------------------------------------------------

def bench_instances(item: BenchSchema, validator: Any, tests: list[dict[str, Any]]) -> dict[str, Any]:
    """Our validator on the benchmark's own instances of one schema: tally and disagreements."""
    pairs = []
    disagreements = []
    for test in tests:
        ours, why = instance_verdict(validator, test["data"]) if validator is not None else (None, "schema_invalid")
        pairs.append((bool(test["valid"]), ours))
        if ours is None or ours != bool(test["valid"]):
            disagreements.append({"schema": item.key, "description": test.get("description", ""),
                                  "expected": bool(test["valid"]), "ours": ours, "why": why[:300],
                                  "data": compact_json(test["data"])[:300]})
    return {"tally": agreement_tally(pairs), "disagreements": disagreements}


@dataclass
class BenchRun:
    """The benchmark schemas with what is known before generation: validators, compile records, and
    the instance agreement."""

    items: list[BenchSchema]
    validators: dict[str, Any]
    schema_invalid: dict[str, str]
    instances: dict[str, dict[str, Any]]
    compiled: dict[str, dict[str, Any]]
    stages: dict[str, Any]


def bench_prepare(opts: Options, compiler: Any) -> BenchRun:
    """Validators and instance agreement, then compile coverage (the compiler is only needed here)."""
    from schemas.validation import full_validator

    items = load_bench(opts.corpora_root, opts.subsets, opts.limit)
    instances = load_instances(opts.corpora_root)
    started = time.perf_counter()
    validators: dict[str, Any] = {}
    schema_invalid: dict[str, str] = {}
    for item in items:
        try:
            validators[item.key] = full_validator(item.schema)
        except Exception as exc:  # noqa: BLE001 - a schema our validator refuses is reported, not fatal
            schema_invalid[item.key] = first_line(exc)
    inst = {i.key: bench_instances(i, validators.get(i.key), instances.get(i.key) or instances.get(f"*/{i.id}", []))
            for i in items}
    stages: dict[str, Any] = {"instances_s": round(time.perf_counter() - started, 2)}
    started = time.perf_counter()
    compiled = compile_all(compiler, items)
    stages["compile_s"] = round(time.perf_counter() - started, 2)
    return BenchRun(items, validators, schema_invalid, inst, compiled, stages)


def bench_finish(prepared: BenchRun, model_path: str, opts: Options) -> dict[str, Any]:
    """Generation (unless turned off) and every schema's record."""
    outputs: dict[str, Any] = {}
    stages = dict(prepared.stages)
    sample: set[str] = set()
    if opts.generate:
        started = time.perf_counter()
        sample = generation_sample(prepared.items, opts.generate_limit)
        jobs = [Job(i.key, i.schema, fallback_order(prepared.compiled[i.key]), grammar=grammar_for(i.schema, opts))
                for i in prepared.items if i.key in sample and i.key not in prepared.schema_invalid
                and prepared.compiled[i.key]["backend"] is not None]
        outputs, stages["engines"] = generate_all(jobs, model_path, opts)
        stages["generation_s"] = round(time.perf_counter() - started, 2)
    records = []
    for item in prepared.items:
        compiled = prepared.compiled[item.key]
        record = {"subset": item.subset, "id": item.id, **compiled,
                  "schema_invalid": prepared.schema_invalid.get(item.key),
                  "instances": prepared.instances[item.key]["tally"],
                  "instance_disagreements": prepared.instances[item.key]["disagreements"]}
        record["generation"] = generation_record(item, compiled, prepared.schema_invalid, prepared.validators,
                                                 outputs, opts.generate and item.key in sample)
        records.append(record)
    return {"items": records, "stages": stages}


def grammar_for(json_schema: Any, opts: Options) -> Any:
    """The schema generation compiles its grammar from: with `grammar_bounds` "auto", the grammar-only bounds
    fitted to `max_tokens` (`schemas.bounds.grammar_schema`); with "none", the schema as written."""
    from schemas.bounds import AUTO, grammar_schema

    if opts.grammar_bounds == "none" or not isinstance(json_schema, dict):
        return json_schema
    if opts.grammar_bounds != AUTO:
        raise ConformanceError(f"grammar_bounds {opts.grammar_bounds!r}: must be auto or none")
    return grammar_schema(json_schema, AUTO, AUTO, opts.max_tokens)


def generation_sample(items: list[BenchSchema], limit: int | None) -> set[str]:
    """The schemas generated for: every one, or the first `limit` of each subset in id order."""
    taken: Counter[str] = Counter()
    sample = set()
    for item in items:
        if limit is None or taken[item.subset] < limit:
            taken[item.subset] += 1
            sample.add(item.key)
    return sample


def fallback_order(compiled: dict[str, Any]) -> list[str]:
    """The pipeline's backend first, then any other backend that compiled the schema."""
    first = compiled["backend"]
    rest = [b for b in BACKENDS if b != first and compiled["compile"].get(b, {}).get("ok")]
    return [first, *rest] if first else rest


def generation_record(item: BenchSchema, compiled: dict[str, Any], schema_invalid: dict[str, str],
                      validators: dict[str, Any], outputs: dict[str, Any], generate: bool) -> dict[str, Any]:
    if item.key in schema_invalid:
        return {"status": "schema_invalid", "emitted": False, "revalidated_valid": None}
    if compiled["backend"] is None:
        return {"status": "not_compiled", "emitted": False, "revalidated_valid": None}
    if not generate:
        return {"status": "skipped", "emitted": False, "revalidated_valid": None}
    output = outputs.get(item.key, {})
    if output.get("status") == "not_attempted":
        return {**output, "emitted": False, "revalidated_valid": None}
    return judge(item, validators[item.key], output)


# -- the test suite -----------------------------------------------------------------------------------

def suite_case(case: dict[str, Any], registry: Any, compiler: Any) -> dict[str, Any]:
    """One test case: does vLLM's xgrammar backend take its schema; per instance, whether the grammar
    matcher lets the model emit it (`SchemaCompiler.probe`: compact JSON, then end of sequence) and our
    validator's verdict, next to the suite's."""
    schema = case["schema"]
    texts = [compact_json(test["data"]) for test in case["tests"]]
    try:
        refusal, accepted = compiler.probe(schema, "xgrammar", texts)
    except Exception as exc:  # noqa: BLE001 - a schema the compiler cannot take is "does not compile"
        refusal, accepted = first_line(exc), []
    compiled = refusal is None and len(accepted) == len(texts)
    try:
        validator = suite_validator(schema, registry)
    except Exception as exc:  # noqa: BLE001 - e.g. a pattern Python's `re` cannot compile
        validator, validator_error = None, first_line(exc)
    else:
        validator_error = None
    tests = []
    for n, test in enumerate(case["tests"]):
        ours, why = instance_verdict(validator, test["data"]) if validator is not None else (None, validator_error)
        tests.append({"description": test["description"], "valid": bool(test["valid"]), "ours": ours,
                      "why": why or "", "grammar_accepts": bool(accepted[n]) if compiled else None})
    return {"description": case["description"], "compiled": compiled,
            "compile_error": None if compiled else (refusal or "no verdict from the grammar matcher"),
            "tests": tests}


def summarize_category(category: str, cases: list[dict[str, Any]]) -> dict[str, Any]:
    """Per keyword category: engine enforcement, post-check enforcement and agreement with the suite."""
    tests = [t for c in cases for t in c["tests"]]
    invalid = [t for t in tests if not t["valid"]]
    engine_invalid = [t for t in invalid if t["grammar_accepts"] is not None]
    engine_valid = [t for t in tests if t["valid"] and t["grammar_accepts"] is not None]
    engine_rejected = sum(not t["grammar_accepts"] for t in engine_invalid)
    compiled = sum(c["compiled"] for c in cases)
    engine = "does not compile" if compiled == 0 else verdict(engine_rejected, len(engine_invalid))
    ours_rejected = sum(t["ours"] is False for t in invalid)
    return {
        "category": category,
        "cases": len(cases),
        "compiled_cases": compiled,
        "instances": len(tests),
        "invalid_instances": len(invalid),
        "engine": engine,
        "engine_invalid_checked": len(engine_invalid),
        "engine_invalid_rejected": engine_rejected,
        "engine_valid_checked": len(engine_valid),
        "engine_valid_accepted": sum(bool(t["grammar_accepts"]) for t in engine_valid),
        "post_check": verdict(ours_rejected, len(invalid)),
        "post_check_invalid_rejected": ours_rejected,
        "agreement": agreement_tally((t["valid"], t["ours"]) for t in tests),
    }


def run_suite(opts: Options, compiler: Any) -> dict[str, Any]:
    started = time.perf_counter()
    registry = suite_registry(opts.corpora_root)
    categories = []
    for category, cases in load_suite(opts.corpora_root, opts.categories).items():
        checked = [suite_case(case, registry, compiler) for case in cases]
        categories.append({**summarize_category(category, checked), "cases_detail": checked})
    return {"categories": categories, "stages": {"suite_s": round(time.perf_counter() - started, 2)}}


# -- aggregation --------------------------------------------------------------------------------------

def summarize_bench(items: list[dict[str, Any]]) -> dict[str, Any]:
    """The figures of one subset (or of all): coverage, compile times, compliance, emitted-row validity
    and instance agreement, from per-schema records."""
    n = len(items)
    compiled = {b: sum(bool(i["compile"].get(b, {}).get("ok")) for i in items) for b in BACKENDS}
    compiled["fallback"] = sum(i["backend"] is not None for i in items)
    gens = [i["generation"] for i in items]
    statuses = Counter(g["status"] for g in gens)
    generated = [g for g in gens if g["status"] in GENERATED]
    valid = statuses["valid"]
    emitted = [g for g in gens if g.get("emitted")]
    by_backend = {}
    for b in BACKENDS:
        mine = [g for g in generated if g.get("backend") == b]
        by_backend[b] = {"generated": len(mine), "valid": sum(g["status"] == "valid" for g in mine),
                         "compliance": share(sum(g["status"] == "valid" for g in mine), len(mine))}
    instances = agreement_sum([i["instances"] for i in items])
    return {
        "schemas": n,
        "limit_rejected": sum(i["limit_error"] is not None for i in items),
        "schema_invalid": sum(i.get("schema_invalid") is not None for i in items),
        "compiled": compiled,
        "coverage": {k: share(v, n) for k, v in compiled.items()},
        "compile_s": {b: compile_times(items, b) for b in BACKENDS},
        "statuses": {s: statuses[s] for s in (*GENERATED, *NOT_GENERATED) if statuses[s]},
        "generated": len(generated),
        "not_attempted": statuses["not_attempted"],
        "rerouted": sum(bool(g.get("refused_by")) for g in gens),
        "compliance": share(valid, len(generated)),
        "compliance_by_backend": by_backend,
        "empirical_coverage": share(valid, n - statuses["skipped"]) if generated else None,
        "emitted": len(emitted),
        "valid_not_emitted": sum(g["status"] == "valid" and not g.get("emitted") for g in gens),
        "emitted_valid": sum(bool(g.get("revalidated_valid")) for g in emitted),
        "emitted_valid_share": share(sum(bool(g.get("revalidated_valid")) for g in emitted), len(emitted)),
        "instances": instances,
    }


def compile_times(items: list[dict[str, Any]], backend: str) -> dict[str, Any]:
    """p50/p99 compile seconds over the schemas this backend compiled."""
    seconds = [i["compile"][backend]["seconds"] for i in items if i["compile"].get(backend, {}).get("ok")]
    return {"n": len(seconds), "p50": nearest_rank(seconds, 0.5), "p99": nearest_rank(seconds, 0.99)}


def agreement_sum(tallies: list[dict[str, Any]]) -> dict[str, Any]:
    keys = ("n", "agree", "valid_n", "valid_agree", "invalid_n", "invalid_agree", "errors")
    total = {k: sum(t.get(k, 0) for t in tallies) for k in keys}
    total["share"] = share(total["agree"], total["n"])
    return total


def unenforced_counts(items: list[dict[str, Any]]) -> dict[str, int]:
    """How many schemas leave each keyword to the post-check, under the backend the pipeline uses."""
    counts = Counter(kw for i in items for kw in {pair[0] for pair in i.get("unenforced") or []})
    return dict(counts.most_common())


def build_report(parts: list[dict[str, Any]]) -> dict[str, Any]:
    """The report from every part: per-subset and overall bench figures, per-category suite figures."""
    bench_items = [item for p in parts if p["corpus"] == BENCH for item in p["items"]]
    categories = [c for p in parts if p["corpus"] == SUITE for c in p["categories"]]
    runs = {p["run"]["id"]: p["run"] for p in parts}
    report: dict[str, Any] = {
        "generated_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "runs": sorted(runs.values(), key=lambda r: r["started"]),
        "wall_seconds": round(sum(r["seconds"] for r in runs.values()), 1),
        "published": PUBLISHED,
    }
    if bench_items:
        subsets = sorted({i["subset"] for i in bench_items})
        report[BENCH] = {
            "subsets": {s: summarize_bench([i for i in bench_items if i["subset"] == s]) for s in subsets},
            "all": summarize_bench(bench_items),
            "unenforced_keywords": unenforced_counts(bench_items),
            "instance_disagreements": [d for i in bench_items for d in i["instance_disagreements"]],
            "items": bench_items,
        }
    if categories:
        categories.sort(key=lambda c: c["category"])
        tests = [t for c in categories for case in c["cases_detail"] for t in case["tests"]]
        report[SUITE] = {
            "categories": categories,
            "all": {"agreement": agreement_tally((t["valid"], t["ours"]) for t in tests),
                    "engine": dict(Counter(c["engine"] for c in categories)),
                    "post_check": dict(Counter(c["post_check"] for c in categories))},
        }
    return report


# -- running ------------------------------------------------------------------------------------------

def corpus_kind(folder: Path) -> str:
    """What a folder holds, from its contents (never its name): the JSON-Schema-Test-Suite layout
    (`tests/<draft>/`), the benchmark layout (`schemas/<subset>/*.json`), or a plain folder of `*.json`
    schemas (one subset named after the folder), each with an optional `instances.jsonl`."""
    if (folder / "tests" / SUITE_DRAFT).is_dir():
        return SUITE
    if (folder / "schemas").is_dir() or any(folder.glob("*.json")):
        return BENCH
    raise ConformanceError(f"corpus {str(folder)!r}: no *.json schemas in it (nor schemas/<subset>/*.json, "
                           f"nor tests/{SUITE_DRAFT}/)")


def corpus_folders(names: list[str]) -> dict[str, Path]:
    """The corpora given as folders (any name, through links), by kind; a bundled name is not a folder here."""
    folders: dict[str, Path] = {}
    for name in names:
        if name == "all" or (name in CORPORA and not Path(name).is_dir()):
            continue
        folder = Path(os.path.abspath(name))  # absolute but not resolved: a link keeps its own name
        if not folder.is_dir():
            raise ConformanceError(f"corpus {name!r}: expected one of {', '.join(CORPORA)}, all, or a folder")
        kind = corpus_kind(folder)
        if kind in folders and folders[kind] != folder:
            raise ConformanceError(f"corpus {name!r}: one {kind} folder at a time ({folders[kind]} already)")
        folders[kind] = folder
    return folders


def resolve_corpora(names: list[str]) -> list[str]:
    """Corpus kinds to run, from bundled names, `all`, or folders (whose contents say which)."""
    folders = corpus_folders(names)
    found: list[str] = []
    for name in names:
        kinds = list(CORPORA) if name == "all" else [name] if name in CORPORA and not Path(name).is_dir() else []
        kinds += [k for k, f in folders.items() if f == Path(os.path.abspath(name))]
        for corpus in kinds:
            if corpus not in found:
                found.append(corpus)
    return found


def corpora_root_for(names: list[str], default: Path) -> Path:
    """The root the corpora are read from: `default`, or, when a corpus is given as a folder, a private
    root of links: `jsonschemabench-dev` → the user's folder (a plain folder of schemas becomes its one
    subset), `json-schema-test-suite` → the suite folder, and bundled corpora from `default` beside them."""
    folders = corpus_folders(names)
    if not folders:
        return default
    root = Path(tempfile.mkdtemp(prefix="conformance-corpora-"))
    atexit.register(shutil.rmtree, root, True)
    for kind in CORPORA:
        folder = folders.get(kind)
        if folder is None:
            if (default / kind).is_dir():
                (root / kind).symlink_to(default / kind)
        elif kind == BENCH and not (folder / "schemas").is_dir():
            (root / kind / "schemas").mkdir(parents=True)
            (root / kind / "schemas" / folder.name).symlink_to(folder)
            if (folder / "instances.jsonl").is_file():
                (root / kind / "instances.jsonl").symlink_to(folder / "instances.jsonl")
        else:
            (root / kind).symlink_to(folder)
    return root


def check_selection(corpora: list[str], opts: Options) -> None:
    """Fail on a missing corpus or an unknown subset or category before anything slow starts."""
    for corpus in corpora:
        corpus_dir(opts.corpora_root, corpus)
    if opts.subsets and BENCH not in corpora:
        raise ConformanceError(f"--subset applies to {BENCH}, which is not among the corpora")
    if opts.categories and SUITE not in corpora:
        raise ConformanceError(f"--category applies to {SUITE}, which is not among the corpora")
    if BENCH in corpora:
        known = bench_subsets(opts.corpora_root)
        for name in opts.subsets or []:
            if name not in known:
                raise ConformanceError(f"--subset {name!r}: not a subset of {BENCH} (one of {', '.join(known)})")
    if SUITE in corpora:
        for name in opts.categories or []:
            if name not in suite_categories(opts.corpora_root):
                raise ConformanceError(f"--category {name!r}: not a {SUITE} {SUITE_DRAFT} file")


def prepare_parts(out: Path, keep: bool) -> Path:
    parts = out / "parts"
    if parts.exists() and not keep:
        shutil.rmtree(parts)
    parts.mkdir(parents=True, exist_ok=True)
    return parts


def run_conformance(corpora: list[str], out: Path, opts: Options) -> dict[str, Any]:
    """Run the harness on `corpora`, write this run's parts, and render DIR/conformance.{json,md} from
    every part in DIR (this run's, plus earlier ones with `opts.keep`)."""
    from workers.bundled_model import resolve_model_path
    from workers.compiler import SchemaCompiler

    check_selection(corpora, opts)
    started_at = datetime.now(timezone.utc)
    started = time.perf_counter()
    parts_dir = prepare_parts(out, opts.keep)
    model_path = resolve_model_path("bundled")
    run = {"id": started_at.strftime("%Y%m%dT%H%M%SZ") + f"-{os.getpid()}", "started": started_at.isoformat(),
           "corpora": corpora, "options": {k: (str(v) if isinstance(v, Path) else v) for k, v in asdict(opts).items()}}
    results: dict[str, dict[str, Any]] = {}
    prepared = None
    with SchemaCompiler(model_path, timeout_s=opts.compile_timeout_s, backends=BACKENDS) as compiler:
        if SUITE in corpora:
            results[SUITE] = run_suite(opts, compiler)
        if BENCH in corpora:
            prepared = bench_prepare(opts, compiler)
    if prepared is not None:  # the compiler's workers are gone before an engine takes the memory
        results[BENCH] = bench_finish(prepared, model_path, opts)
    run["seconds"] = round(time.perf_counter() - started, 1)
    run["stages"] = {c: r["stages"] for c, r in results.items()}
    write_parts(parts_dir, results, run)
    parts = [json.loads(p.read_text()) for p in sorted(parts_dir.glob("*.json"))]
    report = build_report(parts)
    (out / "conformance.json").write_text(json.dumps(report, indent=1, ensure_ascii=False, default=str))
    (out / "conformance.md").write_text(render_markdown(report))
    return report


def write_parts(parts_dir: Path, results: dict[str, dict[str, Any]], run: dict[str, Any]) -> None:
    """One part per bench subset and one per suite category, so a later run can replace just those."""
    if BENCH in results:
        by_subset: dict[str, list[dict[str, Any]]] = {}
        for item in results[BENCH]["items"]:
            by_subset.setdefault(item["subset"], []).append(item)
        for subset, items in by_subset.items():
            part = {"corpus": BENCH, "subset": subset, "run": run, "items": items}
            (parts_dir / f"bench-{subset}.json").write_text(json.dumps(part, ensure_ascii=False, default=str))
    if SUITE in results:
        for category in results[SUITE]["categories"]:
            part = {"corpus": SUITE, "category": category["category"], "run": run, "categories": [category]}
            (parts_dir / f"suite-{category['category']}.json").write_text(
                json.dumps(part, ensure_ascii=False, default=str))


# -- the markdown report ------------------------------------------------------------------------------

def _f(value: Any, digits: int = 3) -> str:
    if value is None:
        return "—"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def _table(header: list[str], rows: list[list[Any]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(_f(v) for v in row) + " |" for row in rows]
    return lines + [""]


def _coverage_rows(bench: dict[str, Any]) -> list[list[Any]]:
    rows = []
    for name, s in [*bench["subsets"].items(), ("**all**", bench["all"])]:
        cs = s["compile_s"]
        rows.append([name, s["schemas"], s["coverage"]["xgrammar"], s["coverage"]["guidance"],
                     s["coverage"]["fallback"], s["limit_rejected"], s["schema_invalid"],
                     cs["xgrammar"]["p50"], cs["xgrammar"]["p99"], cs["guidance"]["p50"], cs["guidance"]["p99"]])
    return rows


def _generation_rows(bench: dict[str, Any]) -> list[list[Any]]:
    rows = []
    for name, s in [*bench["subsets"].items(), ("**all**", bench["all"])]:
        st, by = s["statuses"], s["compliance_by_backend"]
        rows.append([name, s["generated"], s["not_attempted"], s["rerouted"], st.get("valid", 0),
                     st.get("schema_violation", 0), st.get("invalid_json", 0), st.get("truncated", 0),
                     st.get("engine_error", 0), s["compliance"],
                     f"{_f(by['xgrammar']['compliance'])} ({by['xgrammar']['generated']})",
                     f"{_f(by['guidance']['compliance'])} ({by['guidance']['generated']})",
                     s["empirical_coverage"], s["emitted"], s["emitted_valid_share"]])
    return rows


def _published_rows(hard: dict[str, Any]) -> list[list[Any]]:
    by = hard["compliance_by_backend"]
    return [
        ["compile coverage (schemas a backend compiles)", hard["coverage"]["xgrammar"], hard["coverage"]["guidance"],
         hard["coverage"]["fallback"], "—", "—"],
        ["empirical coverage (valid outputs / schemas in the generation sample)", "—", "—", hard["empirical_coverage"],
         PUBLISHED["empirical_coverage"]["xgrammar"], PUBLISHED["empirical_coverage"]["guidance"]],
        ["compliance (valid / generated)", f"{_f(by['xgrammar']['compliance'])} (n={by['xgrammar']['generated']})",
         f"{_f(by['guidance']['compliance'])} (n={by['guidance']['generated']})", hard["compliance"],
         PUBLISHED["compliance"]["xgrammar"], PUBLISHED["compliance"]["guidance"]],
        ["compile time p50 s, xgrammar", hard["compile_s"]["xgrammar"]["p50"], "—", "—",
         PUBLISHED["median_compile_s_xgrammar"], "—"],
    ]


def _instance_rows(bench: dict[str, Any]) -> list[list[Any]]:
    rows = []
    for name, s in [*bench["subsets"].items(), ("**all**", bench["all"])]:
        i = s["instances"]
        rows.append([name, i["n"], i["agree"], i["share"], f"{i['valid_agree']}/{i['valid_n']}",
                     f"{i['invalid_agree']}/{i['invalid_n']}", i["errors"]])
    return rows


def _bench_markdown(bench: dict[str, Any], max_examples: int = 12) -> list[str]:
    lines = ["## jsonschemabench-dev: compile coverage", "",
             "Share of schemas each backend compiles (against the bundled model's tokenizer, "
             "`workers.compiler.SchemaCompiler`), and with the fallback (xgrammar, else guidance; schemas over a "
             "`schemas.limits` bound count as not covered). Compile seconds are over the schemas that compiled.", ""]
    lines += _table(["subset", "schemas", "xgrammar", "guidance", "fallback", "over a limit", "invalid schema",
                     "xgr p50 s", "xgr p99 s", "guid p50 s", "guid p99 s"], _coverage_rows(bench))
    lines += ["## jsonschemabench-dev: generation", "",
              "One output per compiled schema, bundled model, greedy, under the grammar of the backend the fallback "
              "picks. *Compliance* = outputs valid under the full validator **before** the post-check / outputs "
              "generated (truncated and engine errors count as non-compliant). *Empirical coverage* = valid "
              "outputs / schemas of the generation sample (the paper's coverage figure). *Emitted* = outputs the "
              "pipeline's post-check (`classify` + `SchemaContract`) turns into rows; *emitted valid* = their "
              "share that an independent `jsonschema` validator also accepts (must be 1.000). *Rerouted* = refused "
              "by the xgrammar engine at request time, generated by the guidance engine. *Not attempted* = the "
              "prompt does not fit the context even with the schema cut; a schema longer than the context budget "
              "is cut in the prompt (the grammar still holds all of it).", ""]
    if bench["all"]["statuses"].get("skipped"):
        lines += [f"Not generated for {bench['all']['statuses']['skipped']} compiled schemas (`--no-generate`, or "
                  "outside `--generate-limit`); empirical coverage counts the schemas of the generation sample "
                  "only.", ""]
    if bench["all"]["generated"] or bench["all"]["not_attempted"]:
        lines += _table(["subset", "generated", "not attempted", "rerouted", "valid", "violation", "invalid JSON",
                         "truncated", "engine error", "compliance", "compliance xgr (n)", "compliance guid (n)",
                         "empirical coverage", "emitted", "emitted valid"], _generation_rows(bench))
        lines += [f"Valid outputs not emitted: {bench['all']['valid_not_emitted']}. The pipeline writes objects "
                  "only, so a schema-valid string, number or array is a `schema_violation` dead letter "
                  "(\"record is not an object\"). Prompts cut to fit: "
                  f"{sum(bool(i['generation'].get('prompt_capped')) for i in bench['items'])}.", ""]
    if "Github_hard" in bench["subsets"]:
        lines += ["### Compared with the published JSONSchemaBench figures (GitHub-Hard)", "",
                  f"Published: {PUBLISHED['source']}, measured with the paper's own models; ours with a 135M "
                  "model, so compliance here says as much about the model as about the engine.", ""]
        lines += _table(["GitHub-Hard", "ours xgrammar", "ours guidance", "ours fallback", "published XGrammar",
                         "published llguidance"], _published_rows(bench["subsets"]["Github_hard"]))
    lines += ["## jsonschemabench-dev: our validator on the benchmark's instances", "",
              "Agreement of `schemas.validation.full_validator` (format checking on) with the benchmark's valid "
              "and invalid instances. *Errors*: the schema could not be applied (invalid schema, remote or "
              "unresolvable `$ref`).", ""]
    lines += _table(["subset", "instances", "agree", "share", "valid agreed", "invalid agreed", "errors"],
                    _instance_rows(bench))
    disagreements = bench["instance_disagreements"]
    if disagreements:
        lines += [f"Disagreements ({len(disagreements)}; the first {min(max_examples, len(disagreements))}):", ""]
        lines += _table(["schema", "instance", "expected", "ours", "why"],
                        [[d["schema"], d["description"][:60], "valid" if d["expected"] else "invalid",
                          {True: "valid", False: "invalid", None: "error"}[d["ours"]],
                          (d["why"] or "instance " + d["data"])[:140].replace("|", "\\|")]
                         for d in disagreements[:max_examples]])
    top = list(bench["unenforced_keywords"].items())[:15]
    if top:
        lines += ["Keywords the chosen backend leaves to the post-check (`unenforced_keywords`), by number of "
                  "schemas: " + ", ".join(f"`{k}` {v}" for k, v in top), ""]
    return lines


def _suite_markdown(suite: dict[str, Any]) -> list[str]:
    lines = ["## json-schema-test-suite (draft2020-12): per keyword category", "",
             "*Engine*: for the cases whose schema vLLM's xgrammar backend takes, does the grammar matcher it builds "
             "(`SchemaCompiler.probe`: the instance as compact JSON text, then end of sequence) refuse the suite's "
             "invalid instances? *Accepts valid* shows where the grammar is narrower than the schema (e.g. strict "
             "mode's default `additionalProperties: false`). *Post-check*: does our "
             "validator refuse them? *Agreement*: our validator's verdict equals the suite's, over all instances "
             "(remote refs served from the suite's remotes/, never the network).", ""]
    rows = []
    for c in suite["categories"]:
        a = c["agreement"]
        rows.append([c["category"], c["cases"], f"{c['compiled_cases']}/{c['cases']}", c["engine"],
                     f"{c['engine_invalid_rejected']}/{c['engine_invalid_checked']}",
                     f"{c['engine_valid_accepted']}/{c['engine_valid_checked']}", c["post_check"],
                     f"{c['post_check_invalid_rejected']}/{c['invalid_instances']}", f"{a['agree']}/{a['n']}",
                     a["share"]])
    lines += _table(["category", "cases", "compile (xgr)", "engine", "grammar refuses invalid",
                     "grammar accepts valid", "post-check", "validator refuses invalid", "agree", "share"], rows)
    total = suite["all"]
    lines += [f"All categories: our validator agrees on {total['agreement']['agree']}/{total['agreement']['n']} "
              f"instances ({_f(total['agreement']['share'])}). Engine: "
              + ", ".join(f"{k} {v}" for k, v in sorted(total["engine"].items()))
              + ". Post-check: " + ", ".join(f"{k} {v}" for k, v in sorted(total["post_check"].items())) + ".", "",
              "`format` disagrees by design: the suite treats `format` as an annotation, and our post-check asserts "
              "it (format checking on). Many suite schemas carry no `type` (e.g. `{\"minLength\": 2}`); xgrammar "
              "applies a type's keywords only under that explicit `type`, so *not enforced* here can still be "
              "*enforced* in a typed schema (`workers.compiler.ENFORCEMENT` probes typed schemas). A schema our "
              "validator cannot build (e.g. a `\\p{Letter}` pattern, which Python's `re` lacks) counts as "
              "disagreeing; the pipeline refuses such a schema up front.", ""]
    return lines


def render_markdown(report: dict[str, Any]) -> str:
    lines = ["# Conformance", "", f"Generated {report['generated_at']}. Runs (wall seconds, options):", ""]
    for run in report["runs"]:
        o = run["options"]
        lines.append(f"- `{run['id']}`: {', '.join(run['corpora'])}; {run['seconds']} s; subsets "
                     f"{o.get('subsets') or 'all'}, categories {o.get('categories') or 'all'}, limit "
                     f"{o.get('limit')}, max_tokens {o.get('max_tokens')}, generate {o.get('generate')}, "
                     f"generate_limit {o.get('generate_limit')}, grammar_bounds {o.get('grammar_bounds', 'none')}; "
                     f"stages {json.dumps(run.get('stages', {}))}")
    lines += ["", f"Total wall time of the runs: {report['wall_seconds']} s.", ""]
    if BENCH in report:
        lines += _bench_markdown(report[BENCH])
    if SUITE in report:
        lines += _suite_markdown(report[SUITE])
    return "\n".join(lines)
