"""Reach per field: the share of gold values a job's grammar lets the model write (no engine needed).

    python lab/reach.py CONFIG --gold GOLD [--limit N] [--set KEY=VALUE ...] [--refusals] [--json]

For each gold document with a text in the job's input, builds the grammar's schema as the extractor does
(`schemas.grounding.ground` under the job's `schema_policy.grounding`) and counts the gold leaves it accepts
(pipeline.tools.evaluate.reach). Prints a row per field, the overall share, and with --refusals every refused
gold value with what the finder read instead. Rerun it after a change to the finders to compare.

The measurements of issue 54 (before the locale-aware finders):
    python lab/reach.py jobs/extract.yaml --gold jobs/sample/invoices_gold.jsonl
    python lab/reach.py jobs/tickets/extract.yaml --gold jobs/tickets/tickets_gold.jsonl
    python lab/reach.py jobs/multilingual/extract.yaml --gold jobs/multilingual/invoices_gold.jsonl
    python jobs/deepjsoneval/make_input.py --out /tmp/dje-en   # and --corpus ...-zh-dev.jsonl --out /tmp/dje-zh
    python lab/reach.py jobs/deepjsoneval/extract.yaml --gold /tmp/dje-en/gold.jsonl \
        --set input.uri=/tmp/dje-en/input.parquet --limit 32
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pipeline.cli.options import typed_value  # noqa: E402
from pipeline.config import load_config  # noqa: E402
from pipeline.tools.evaluate import load_gold  # noqa: E402
from pipeline.tools.evaluate.inputs import gold_documents  # noqa: E402
from pipeline.tools.evaluate.reach import Reach, grammar_mode, job_reach  # noqa: E402


def measure(config: str, gold: str, limit: int | None, sets: list[str]) -> tuple[Reach, str]:
    overrides = {}
    for item in sets:
        key, _, value = item.partition("=")
        overrides[key] = typed_value(key, value, "--set")
    loaded = load_config(config, overrides)
    golds = load_gold(gold, loaded.config.input.id_column)
    documents, schemas = gold_documents(loaded, set(golds), limit)
    found = job_reach(loaded, {i: golds[i] for i in documents}, documents, schemas)
    mode, numbers = grammar_mode(loaded)
    return found, f"grounding: {mode}" + (", ground_numbers" if numbers else "")


def table(found: Reach) -> str:
    lines = ["| field | gold | reached | reach |", "|---|---|---|---|"]
    for path, s in found.fields().items():
        lines.append(f"| {path} | {s['gold']} | {s['reached']} | {s['reach']:.3f} |")
    o = found.summary()["overall"]
    share = "-" if o["reach"] is None else f"{o['reach']:.3f}"
    lines.append(f"| **all** | {o['gold']} | {o['reached']} | {share} |")
    return "\n".join(lines)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("config")
    p.add_argument("--gold", required=True)
    p.add_argument("--limit", type=int)
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--refusals", action="store_true", help="list every refused gold value")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    args = p.parse_args()
    found, mode = measure(args.config, args.gold, args.limit, args.set)
    if args.json:
        print(json.dumps({"config": args.config, "mode": mode, **found.summary()}, ensure_ascii=False, default=str))
        return 0
    print(f"{args.config} ({mode}), {found.documents} documents")
    print(table(found))
    if args.refusals:
        for refusal in found.refusals:
            print("  " + refusal.line())
    return 0


if __name__ == "__main__":
    sys.exit(main())
