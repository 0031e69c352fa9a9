"""What a run used and cost: prompt and output tokens in total and per document (p50, p99), the generation's
tokens per second, and, at the job's `output.cost` prices, the run's cost and its cost per 1,000 documents.

Prices (`output.cost`): `per_million_input_tokens` and `per_million_output_tokens` (an API's price list), or
`per_gpu_hour` (your own GPUs): the run's wall time × its GPUs (`workers.actors` × `workers.gpus_per_actor`; on
CPU actors, one unit per actor) × the price. Figures are over the documents of the partitions the run committed,
rows and dead letters alike (a dead letter's tokens were spent too)."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from typing import Any

from pipeline.output.manifest import RunManifest


def percentile(values: Sequence[int] | Counter[int], q: float) -> int | None:
    """The nearest-rank percentile (q in 0..100) of `values` (or of a histogram: value → how many), None when empty."""
    counts = values if isinstance(values, Counter) else Counter(values)
    total = sum(counts.values())
    if not total:
        return None
    rank = max(1, math.ceil(q / 100 * total))
    seen = 0
    for value in sorted(counts):
        seen += counts[value]
        if seen >= rank:
            return int(value)
    return None


def token_figures(prompt: Sequence[int] | Counter[int], output: Sequence[int] | Counter[int],
                  generation_s: float | None) -> dict[str, Any]:
    """Totals, per-document p50/p99, and output tokens per second of generation; each side a list of per-document
    counts or a histogram of them (count → documents)."""
    prompt, output = _histogram(prompt), _histogram(output)
    total_out = sum(v * n for v, n in output.items())
    return {
        "documents": max(sum(prompt.values()), sum(output.values())),
        "prompt_tokens": int(sum(v * n for v, n in prompt.items())), "output_tokens": int(total_out),
        "prompt_per_document": {"p50": percentile(prompt, 50), "p99": percentile(prompt, 99)},
        "output_per_document": {"p50": percentile(output, 50), "p99": percentile(output, 99)},
        "generation_tokens_per_s": round(total_out / generation_s, 1) if generation_s else None,
    }


def _histogram(values: Sequence[int] | Counter[int]) -> Counter[int]:
    return values if isinstance(values, Counter) else Counter(int(v) for v in values)


def cost_figures(prompt_tokens: int, output_tokens: int, documents: int, wall_s: float | None, units: float,
                 price: dict[str, Any] | None) -> dict[str, Any] | None:
    """The run's cost at `price` (the `output.cost` keys) and per 1,000 documents; None without a price."""
    if not price:
        return None
    if price.get("per_gpu_hour") is not None:
        hours = (wall_s or 0.0) / 3600 * units
        cost = hours * float(price["per_gpu_hour"])
        basis = f"{hours:.4f} GPU-hours ({units:g} × {wall_s or 0:.1f} s wall) at {price['per_gpu_hour']} per GPU-hour"
    else:
        cost = (prompt_tokens * float(price.get("per_million_input_tokens") or 0)
                + output_tokens * float(price.get("per_million_output_tokens") or 0)) / 1e6
        basis = (f"{prompt_tokens} input tokens at {price.get('per_million_input_tokens') or 0} and {output_tokens} "
                 f"output tokens at {price.get('per_million_output_tokens') or 0} per million")
    return {"total": round(cost, 6), "per_1000_documents": round(1000 * cost / documents, 6) if documents else None,
            "basis": basis, "price": dict(price)}


def run_usage(loaded: Any, manifest: RunManifest) -> dict[str, Any]:
    """`token_figures` and `cost_figures` of a finished run, read from the partitions it committed."""
    prompt, output = committed_tokens(loaded, manifest)
    t = manifest.timings or {}
    usage = token_figures(prompt, output, t.get("generation_s"))
    usage["documents"] = manifest.input_rows or usage["documents"]  # a document that never reached the model counts
    workers = loaded.config.workers
    units = workers.actors * (workers.gpus_per_actor or 1)
    cost = loaded.config.output.cost
    price = cost.model_dump(exclude_none=True) if cost is not None else None
    usage["cost"] = cost_figures(usage["prompt_tokens"], usage["output_tokens"], usage["documents"],
                                 t.get("total_s"), units, price)
    return usage


def committed_tokens(loaded: Any, manifest: RunManifest) -> tuple[Counter[int], Counter[int]]:
    """Histograms (tokens → documents) of each document's prompt and output tokens (rows and dead letters) in the
    partitions the run committed: counted by Arrow, a column at a time, so the driver holds a few thousand counts,
    not a Python int per document (issue 57)."""
    import pyarrow.compute as pc

    from pipeline.output.committed import CommittedOutput
    from pipeline.output.tables import column_names, read_columns
    from workers.outcome import DEAD_LETTERS, ROWS, DeadCol, RowCol

    output = CommittedOutput.of(loaded)
    mine = {str(p["partition"]) for p in manifest.partitions if p.get("status") == "committed"}
    prompt: Counter[int] = Counter()
    out: Counter[int] = Counter()
    for m in output.partitions():
        if m.partition not in mine or m.run_id != manifest.run_id:
            continue
        for kind, (p_col, o_col) in ((ROWS, (RowCol.PROMPT_TOKENS, RowCol.OUTPUT_TOKENS)),
                                     (DEAD_LETTERS, (DeadCol.PROMPT_TOKENS, DeadCol.OUTPUT_TOKENS))):
            uri = m.uri(kind, output.root)
            names = column_names(output.storage, uri)
            for column, into in ((p_col, prompt), (o_col, out)):
                if column in names:
                    counted = pc.value_counts(read_columns(output.storage, uri, [column]).column(column))
                    for value, n in zip(counted.field("values").to_pylist(), counted.field("counts").to_pylist(),
                                        strict=True):
                        if value is not None:
                            into[int(value)] += n
    return prompt, out


def usage_lines(usage: dict[str, Any] | None, timings: dict[str, Any], documents: int) -> list[str]:
    """The summary's tokens, rates and cost lines."""
    lines = rate_lines(timings, documents)
    if not usage:
        return lines
    p, o = usage["prompt_per_document"], usage["output_per_document"]
    lines.append(f"  tokens     prompt {usage['prompt_tokens']} (per document p50 {p['p50']}, p99 {p['p99']}), "
                 f"output {usage['output_tokens']} (p50 {o['p50']}, p99 {o['p99']})"
                 + (f", {usage['generation_tokens_per_s']} output tokens/s of generation"
                    if usage.get("generation_tokens_per_s") else ""))
    cost = usage.get("cost")
    if cost:
        per = f", {cost['per_1000_documents']:.4f} per 1,000 documents" if cost["per_1000_documents"] is not None \
            else ""
        lines.append(f"  cost       {cost['total']:.4f}{per} ({cost['basis']})")
    return lines


GENERATION_RATE = "docs/s over generation only"
WALL_RATE = "docs/s over wall time with start-up"


def rates(timings: dict[str, Any], documents: int) -> dict[str, float | None]:
    """Documents per second over generation only, and over the wall time including Ray's and the engine's start."""
    generation, total = timings.get("generation_s"), timings.get("total_s")
    return {GENERATION_RATE: round(documents / generation, 2) if generation and documents else None,
            WALL_RATE: round(documents / total, 2) if total and documents else None}


def rate_lines(timings: dict[str, Any], documents: int) -> list[str]:
    shown = [f"{value:.2f} {label}" for label, value in rates(timings, documents).items() if value is not None]
    return [f"  rate       {'; '.join(shown)}"] if shown else []
