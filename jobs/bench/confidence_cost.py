"""What `_confidence` and `_spans` cost: docs/s of one job with `output.confidence` on against off, one engine.

Both arms run the same documents through the same `BatchExtractor` path an actor runs (prompt, generation under
the grammar, checks, and with confidence on: each sampled token's log-probability from vLLM, the per-leaf
confidence and the spans). The arms alternate for `--rounds` rounds on one engine, so the machine's state is
shared; the ratio of median docs/s is the figure (issue: at least 0.9).

Run: `.venv/bin/python jobs/bench/confidence_cost.py [CONFIG] [--docs 32] [--rounds 3]`
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))


def main() -> int:
    import pyarrow.parquet as pq

    from pipeline.config import load_config
    from pipeline.plan import actor_env, build_spec
    from workers.bundled_model import resolve_model_path
    from workers.engine import VllmEngine, engine_arguments, has_accelerator
    from workers.extractor import BatchExtractor

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("config", nargs="?", default=str(ROOT / "jobs" / "extract.yaml"))
    parser.add_argument("--docs", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="a config override for both arms (e.g. model.engine_kwargs.logprobs_mode=...)")
    args = parser.parse_args()

    from pipeline.cli.options import parse_value

    base = {k: parse_value(v) for k, v in (item.split("=", 1) for item in args.set)}
    arms = {on: load_config(args.config, {**base, "output.confidence": on}) for on in (False, True)}
    loaded = arms[True]
    cfg = loaded.config
    table = pq.read_table(loaded.input_uri, columns=[cfg.input.id_column, cfg.input.text_column]).slice(0, args.docs)
    ids, texts = table.column(0).to_pylist(), table.column(1).to_pylist()
    for key, value in actor_env(cfg.workers.gpus_per_actor).items():
        os.environ.setdefault(key, value)
    engine = VllmEngine(**engine_arguments(
        resolve_model_path(loaded.model_path), cfg.model.max_model_len, cfg.workers.tensor_parallel_size,
        dict(cfg.model.engine_kwargs), has_accelerator(), cfg.schema_policy.backends[0], sequences=len(ids)))
    extractors = {}
    for on, arm in arms.items():
        spec = build_spec(arm, "bench")
        extractors[on] = (spec, BatchExtractor(engine, spec, min(spec.max_model_len, engine.max_model_len)))
        extractors[on][1].prepare()
    rates: dict[bool, list[float]] = {False: [], True: []}
    rows: dict[bool, int] = {}
    for _ in range(args.rounds + 1):  # the first round warms both arms and is not counted
        for on, (spec, extractor) in extractors.items():
            engine.use_sampling(spec.sampling, spec.grammar_bounds)
            started = time.perf_counter()
            outcomes = extractor.outcomes(ids, texts, None)
            rates[on].append(len(ids) / (time.perf_counter() - started))
            rows[on] = sum(o.is_row for o in outcomes)
    off, on = (statistics.median(rates[k][1:]) for k in (False, True))
    print(f"{len(ids)} documents, {args.rounds} rounds after a warm-up, one engine ({cfg.model.path})")
    print(f"confidence off: {off:.3f} docs/s ({rows[False]} rows); rounds {[round(r, 3) for r in rates[False][1:]]}")
    print(f"confidence on:  {on:.3f} docs/s ({rows[True]} rows); rounds {[round(r, 3) for r in rates[True][1:]]}")
    print(f"ratio on/off: {on / off:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
