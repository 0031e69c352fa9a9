"""`pipeline ÷ engine_same_requests` alone (issue 27's goal: ≥ 0.95 in output tokens/s), without the rest of
`extract bench`: the bench's two arms with its own functions and settings, on the bench's synthetic corpus, one
after the other, `--rounds` times with the order alternating (same requests first in odd rounds), so that drift
in the machine's speed hits both arms alike.

    .venv/bin/python lab/experiments/same_requests.py --docs 16 --rounds 2 --out /tmp/q/samereq

Prints one line per arm and round, and the median ratio; writes `same_requests.json` in `--out`.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import pyarrow as pa  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402

from pipeline.config import load_config  # noqa: E402
from pipeline.dataflow import actor_env  # noqa: E402
from pipeline.tools.bench import SEED, _in_child, pipeline_arm, pipeline_settings  # noqa: E402
from pipeline.tools.machine import machine  # noqa: E402
from pipeline.tools.synthetic import make_corpus  # noqa: E402

KEYS = ("seconds", "output_tokens", "prompt_tokens", "output_tokens_per_s", "docs_per_s", "cores_used", "cpu_s",
        "others_cpu_s", "field_accuracy")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", default=str(ROOT / "jobs" / "extract.yaml"))
    ap.add_argument("--docs", type=int, default=16)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--max-tokens", type=int, default=None)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    ids, texts, golds = make_corpus(args.docs, SEED, prefix="bench")
    corpus = out / "corpus.parquet"
    pq.write_table(pa.table({"doc_id": ids, "text": pa.array(texts, pa.string())}), corpus)
    overrides = {"input.uri": str(corpus), "input.limit": None}
    if args.max_tokens:
        overrides["model.max_tokens"] = args.max_tokens
    loaded = load_config(args.config, overrides)
    settings, extra = pipeline_settings(args.docs, loaded, corpus)
    rounds = []
    for n in range(args.rounds):
        arms: dict = {}
        order = ("same", "pipeline") if n % 2 == 0 else ("pipeline", "same")
        for arm in order:
            if arm == "same":
                result = _in_child(args.config, {**overrides, **settings}, texts, golds, 1, "same_requests",
                                   env=actor_env(loaded.config.workers.gpus_per_actor))
                arms["same"] = result["engine_same_requests"]
            else:
                target = out / f"pipeline-{n}"
                shutil.rmtree(target, ignore_errors=True)
                arms["pipeline"] = pipeline_arm(Path(args.config), target, args.docs, golds, extra)
            print(f"round {n} {arm}: " + ", ".join(f"{k} {arms[arm].get(k)}" for k in KEYS), flush=True)
        ratio = arms["pipeline"]["output_tokens_per_s"] / arms["same"]["output_tokens_per_s"]
        rounds.append({"order": order, "arms": arms, "ratio_tokens": round(ratio, 3)})
        print(f"round {n}: pipeline / same requests (tokens/s) {ratio:.3f}", flush=True)
    median = statistics.median(r["ratio_tokens"] for r in rounds)
    print(f"median pipeline / same requests (tokens/s) over {len(rounds)} rounds: {median:.3f}")
    (out / "same_requests.json").write_text(json.dumps(
        {"docs": args.docs, "rounds": rounds, "median": median, "machine": machine()}, indent=2, default=str))


if __name__ == "__main__":
    main()
