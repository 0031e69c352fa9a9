"""The harness: compile coverage, the benchmark (validators, instances, generation, judging) and the test suite
run per schema and case, written as parts and rendered as DIR/conformance.{json,md}."""

from __future__ import annotations

import json
import os
import shutil
import time
from collections import Counter
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import structlog

from pipeline.tools.conformance.corpora import (
    BENCH,
    SUITE,
    BenchSchema,
    ConformanceError,
    Options,
    check_selection,
    load_bench,
    load_instances,
    load_suite,
    suite_registry,
)
from pipeline.tools.conformance.figures import build_report, summarize_category
from pipeline.tools.conformance.generate import Job, generate_all
from pipeline.tools.conformance.judge import (
    bench_instances,
    compact_json,
    first_line,
    instance_verdict,
    judge,
    suite_validator,
)
from pipeline.tools.conformance.markdown import render_markdown
from workers.compiler import BACKENDS

log = structlog.get_logger(__name__)


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


def run_suite(opts: Options, compiler: Any) -> dict[str, Any]:
    started = time.perf_counter()
    registry = suite_registry(opts.corpora_root)
    categories = []
    for category, cases in load_suite(opts.corpora_root, opts.categories).items():
        checked = [suite_case(case, registry, compiler) for case in cases]
        categories.append({**summarize_category(category, checked), "cases_detail": checked})
    return {"categories": categories, "stages": {"suite_s": round(time.perf_counter() - started, 2)}}


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
    from workers.compiling import open_compiler

    check_selection(corpora, opts)
    started_at = datetime.now(timezone.utc)
    started = time.perf_counter()
    parts_dir = prepare_parts(out, opts.keep)
    model_path = resolve_model_path("bundled")
    run = {"id": started_at.strftime("%Y%m%dT%H%M%SZ") + f"-{os.getpid()}", "started": started_at.isoformat(),
           "corpora": corpora, "options": {k: (str(v) if isinstance(v, Path) else v) for k, v in asdict(opts).items()}}
    results: dict[str, dict[str, Any]] = {}
    prepared = None
    with open_compiler(model_path, opts.compile_timeout_s) as compiler:  # no cache: each compile is measured
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
