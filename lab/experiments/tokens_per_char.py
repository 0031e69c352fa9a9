"""Tokens per character of compact JSON outputs, under the bundled model's tokenizer.

`schemas.bounds.TOKENS_PER_CHAR` comes from this measurement: it turns a schema's longest output in
characters into tokens, to fit the grammar-only bounds to `max_tokens`. Each output is one JSON value
written as the grammar emits it (compact: no whitespace, `ensure_ascii=False`), from three sources:

- the sample gold (`jobs/sample/invoices_gold.jsonl`, without its `doc_id`);
- DeepJSONEval dev gold (`../shared/corpora/deepjsoneval-dev/deepjsoneval-en-dev.jsonl`, field `json`);
- JSONSchemaBench dev valid instances (`../shared/corpora/jsonschemabench-dev/instances.jsonl`).

Run: `.venv/bin/python lab/experiments/tokens_per_char.py` (prints a table; `--json` for the figures).
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
CORPORA = ROOT.parent / "shared" / "corpora"
SOURCES = {
    "sample_gold": ROOT / "jobs" / "sample" / "invoices_gold.jsonl",
    "deepjsoneval_gold": CORPORA / "deepjsoneval-dev" / "deepjsoneval-en-dev.jsonl",
    "jsonschemabench_valid": CORPORA / "jsonschemabench-dev" / "instances.jsonl",
}
MIN_CHARS = 8  # outputs shorter than this (`1`, `"a"`, `{}`) say little about a rate and are left out


def compact(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _lines(path: Path) -> Iterator[dict[str, Any]]:
    with path.open(encoding="utf-8") as handle:
        for line in handle:
            if line.strip():
                yield json.loads(line)


def outputs(source: str) -> Iterator[str]:
    """The compact JSON texts of one source."""
    path = SOURCES[source]
    for record in _lines(path):
        if source == "sample_gold":
            yield compact({k: v for k, v in record.items() if k != "doc_id"})
        elif source == "deepjsoneval_gold":
            value = record["json"]
            yield compact(json.loads(value) if isinstance(value, str) else value)
        else:
            for test in record.get("tests") or []:
                if test.get("valid"):
                    yield compact(test["data"])


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


def measure(tokenizer: Any, texts: list[str]) -> dict[str, Any]:
    rates = []
    tokens = chars = 0
    for text in texts:
        if len(text) < MIN_CHARS:
            continue
        n = len(tokenizer.encode(text, add_special_tokens=False))
        rates.append(n / len(text))
        tokens += n
        chars += len(text)
    return {"outputs": len(rates), "chars": chars, "tokens": tokens, "pooled": round(tokens / chars, 4),
            "mean": round(statistics.fmean(rates), 4), "p50": round(percentile(rates, 0.5), 4),
            "p90": round(percentile(rates, 0.9), 4), "p99": round(percentile(rates, 0.99), 4),
            "max": round(max(rates), 4)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="bundled", help="model folder or id (default: the bundled model)")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    from transformers import AutoTokenizer

    from workers.bundled_model import resolve_model_path

    tokenizer = AutoTokenizer.from_pretrained(resolve_model_path(args.model))
    texts = {source: list(outputs(source)) for source in SOURCES}
    figures = {source: measure(tokenizer, found) for source, found in texts.items()}
    figures["all"] = measure(tokenizer, [t for found in texts.values() for t in found])
    if args.json:
        print(json.dumps(figures, indent=2))
        return 0
    columns = ["outputs", "chars", "tokens", "pooled", "mean", "p50", "p90", "p99", "max"]
    print(f"{'source':<24}" + "".join(f"{c:>10}" for c in columns))
    for source, row in figures.items():
        print(f"{source:<24}" + "".join(f"{row[c]:>10}" for c in columns))
    return 0


if __name__ == "__main__":
    sys.exit(main())
