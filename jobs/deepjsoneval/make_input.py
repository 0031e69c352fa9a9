"""Builds the DeepJSONEval dev job's input and gold from the shared corpus (never copied into the repo).

Reads ../shared/corpora/deepjsoneval-dev/deepjsoneval-en-dev.jsonl (136 English items, each with its
own nested JSON Schema) and writes, under out/deepjsoneval/ (not committed):
- input.parquet: doc_id (the item's idx), text, schema (the JSON Schema as JSON text), category, depth;
- gold.jsonl:    {"doc_id": idx, "record": <the gold extraction>} per line, for `extract eval --gold`;
- schemas/<idx>.json: each schema on its own, for running one schema at a time with `schema_file`;
- shards/dt=2026-01-0K/part-0.parquet: the same input cut into --shards date partitions (the dates are
  only labels), so a slow CPU run can go one shard per command and be scored together afterwards.

    python jobs/deepjsoneval/make_input.py [--corpus PATH] [--out DIR] [--shards 4]
    extract eval jobs/deepjsoneval/extract.yaml --gold out/deepjsoneval/gold.jsonl
"""

from __future__ import annotations

import argparse
import json
from datetime import date, timedelta
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT.parent / "shared" / "corpora" / "deepjsoneval-dev" / "deepjsoneval-en-dev.jsonl"
OUT = ROOT / "out" / "deepjsoneval"


def read_items(corpus: Path) -> list[dict]:
    items = [json.loads(line) for line in corpus.read_text().splitlines() if line.strip()]
    if not items:
        raise SystemExit(f"{corpus}: holds no items")
    return items


SHARD_DAY0 = date(2026, 1, 1)


def write_shards(table: pa.Table, out: Path, shards: int) -> list[str]:
    """`shards` near-equal date partitions of `table`, in corpus order; returns their dates."""
    days = []
    size = -(-table.num_rows // shards)
    for k in range(shards):
        day = (SHARD_DAY0 + timedelta(days=k)).isoformat()
        folder = out / "shards" / f"dt={day}"
        folder.mkdir(parents=True, exist_ok=True)
        pq.write_table(table.slice(k * size, size), folder / "part-0.parquet")
        days.append(day)
    return days


def write_all(items: list[dict], out: Path, shards: int) -> list[str]:
    out.mkdir(parents=True, exist_ok=True)
    (out / "schemas").mkdir(exist_ok=True)
    table = pa.table({
        "doc_id": pa.array([int(i["idx"]) for i in items], pa.int64()),
        "text": pa.array([i["text"] for i in items], pa.string()),
        "schema": pa.array([json.dumps(i["schema"], ensure_ascii=False) for i in items], pa.string()),
        "category": pa.array([i.get("category") for i in items], pa.string()),
        "depth": pa.array([i.get("true_depth") for i in items], pa.int64()),
    })
    pq.write_table(table, out / "input.parquet")
    with open(out / "gold.jsonl", "w") as gold:
        for item in items:
            gold.write(json.dumps({"doc_id": int(item["idx"]), "record": item["json"]}, ensure_ascii=False) + "\n")
    for item in items:
        (out / "schemas" / f"{item['idx']}.json").write_text(json.dumps(item["schema"], indent=1))
    return write_shards(table, out, shards)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=CORPUS)
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--shards", type=int, default=4, help="date partitions under shards/ (default 4)")
    args = parser.parse_args()
    items = read_items(args.corpus)
    days = write_all(items, args.out, max(1, args.shards))
    print(f"wrote {len(items)} documents to {args.out / 'input.parquet'}, gold to {args.out / 'gold.jsonl'}, "
          f"shards dt={days[0]}..dt={days[-1]} under {args.out / 'shards'}")


if __name__ == "__main__":
    main()
