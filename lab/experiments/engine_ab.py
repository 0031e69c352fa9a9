"""Two engine settings compared in one process, their rounds interleaved, so a machine whose speed drifts
between runs (these 2-core VMs do: the same eval took 50 to 126 s of generation on one morning) drifts under
both alike.

It starts the actor's engine (`workers.actor.start_engine`, on the spec the driver builds) once per setting,
`--a KEY=VALUE ...` and `--b KEY=VALUE ...` applied to the job's config, then runs the sample's documents
through `BatchExtractor.outcomes` as the actor does (batches of `workers.batch_size`, `workers.batches_in_flight`
threads), A then B, `--rounds` times. Prints one JSON line per round and the medians. Process-wide patches
(the mask and penalty kernels) are the same for both.

    nice -n 19 .venv/bin/python lab/experiments/engine_ab.py --docs 26 --rounds 3 \\
        --a model.engine_kwargs.max_num_seqs=64 --b model.engine_kwargs.max_num_seqs=16
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))


def setting(config: Path, overrides: list[str], texts: list[str]) -> Any:
    import yaml

    from pipeline.config import load_config
    from pipeline.dataflow import build_spec
    from pipeline.stage_config import ActorConfig
    from workers.actor import start_engine
    from workers.extractor import BatchExtractor
    from workers.memory import sample_document

    loaded = load_config(config, {k: yaml.safe_load(v) for k, v in (o.split("=", 1) for o in overrides)})
    spec = build_spec(ActorConfig.of(loaded), "engine-ab")
    spec = dataclasses.replace(spec, kv_sample=sample_document(texts, max_chars=16 * spec.max_model_len,
                                                               documents=len(texts)))
    engine = start_engine(spec, False)
    extractor = BatchExtractor(engine, spec, min(spec.engine.max_model_len, engine.max_model_len))
    extractor.prepare()
    return loaded.config, extractor


def one_round(cfg: Any, extractor: Any, ids: list[Any], texts: list[str]) -> dict[str, Any]:
    batch, in_flight = cfg.workers.batch_size, cfg.workers.batches_in_flight
    chunks = [(ids[i:i + batch], texts[i:i + batch]) for i in range(0, len(ids), batch)]
    outcomes: list[Any] = [None] * len(chunks)

    def work(slot: int) -> None:
        for k in range(slot, len(chunks), in_flight):
            outcomes[k] = extractor.outcomes(chunks[k][0], chunks[k][1], None)

    started, cpu = time.perf_counter(), os.times()
    threads = [threading.Thread(target=work, args=(s,)) for s in range(in_flight)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    seconds, used = time.perf_counter() - started, os.times()
    flat = [o for chunk in outcomes for o in chunk]
    return {"seconds": round(seconds, 2), "cpu_s": round(used.user + used.system - cpu.user - cpu.system, 1),
            "rows": sum(1 for o in flat if o.is_row), "docs_per_s": round(len(flat) / seconds, 3)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("config", nargs="?", type=Path, default=ROOT / "jobs/extract.yaml")
    parser.add_argument("--a", nargs="*", default=[], help="KEY=VALUE overrides of setting A")
    parser.add_argument("--b", nargs="*", default=[], help="KEY=VALUE overrides of setting B")
    parser.add_argument("--docs", type=int, default=0, help="documents of the sample (0: all)")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    import pyarrow.parquet as pq

    from pipeline.dataflow import actor_env

    os.environ.update({k: v for k, v in actor_env(0).items() if k not in os.environ})
    table = pq.read_table(ROOT / "jobs/sample/invoices.parquet")
    texts, ids = table.column("text").to_pylist(), table.column("doc_id").to_pylist()
    if args.docs:
        texts, ids = texts[:args.docs], ids[:args.docs]
    arms = {"a": setting(args.config, args.a, texts), "b": setting(args.config, args.b, texts)}
    results: dict[str, list[dict[str, Any]]] = {"a": [], "b": []}
    for number in range(args.rounds):
        for name, (cfg, extractor) in arms.items():
            result = one_round(cfg, extractor, ids, texts)
            results[name].append(result)
            print(json.dumps({"round": number, "arm": name, **result}), flush=True)
    medians = {name: statistics.median(r["seconds"] for r in rounds) for name, rounds in results.items()}
    print(json.dumps({"a": args.a, "b": args.b, "median_seconds": medians,
                      "b_over_a_speed": round(medians["a"] / medians["b"], 3)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
