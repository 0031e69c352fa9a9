"""The report's figures from every part: per subset and overall for the benchmark, per keyword category for
the suite, beside the published JSONSchemaBench figures."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable
from datetime import datetime, timezone
from typing import Any

from pipeline.tools.conformance.corpora import BENCH, SUITE
from pipeline.tools.conformance.judge import GENERATED, NOT_GENERATED, agreement_tally, share, verdict
from workers.compiler import BACKENDS

PUBLISHED = {
    "source": "JSONSchemaBench (Geng et al. 2025, arXiv 2501.10868), Tables 2-3",
    "subset": "Github_hard",
    "empirical_coverage": {"xgrammar": 0.28, "guidance": 0.41},
    "compliance": {"xgrammar": 0.41, "guidance": 0.69},
    "median_compile_s_xgrammar": "0.12-0.30",
}


def nearest_rank(values: Iterable[float], q: float) -> float | None:
    """Nearest-rank percentile (q in (0, 1]); None for no values."""
    ordered = sorted(values)
    if not ordered:
        return None
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


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
