"""Resume at scale (issue 27, item 4): SIGKILL the driver at about half of a simulated corpus, rerun, and measure
what was done twice and how long the rerun takes to start generating.

    flock /tmp/engine.lock .venv/bin/python jobs/bench/resume_at_scale.py --docs 100000 --actors 4

A loopback Ray cluster (pipeline.tools.simbench.LocalCluster), the simulated engine answering at once (or as
--engine JSON says). The first run is SIGKILLed once the staged units plus committed partitions hold half the
documents; the driver logs every batch it receives (EXTRACT_LOG_LEVEL=debug, `driver.batch`), so the documents
that reached the driver and were not staged when it died are counted exactly. The rerun is timed, its manifest
read, and every document checked to be committed exactly once. Writes OUT/resume.json.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
import time
from pathlib import Path

import duckdb
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from pipeline.tools.simbench import (  # noqa: E402 - after the path
    LocalCluster,
    _run_manifest,
    driver_command,
    make_corpus,
    run_driver,
    staging_dir,
    write_config,
)

BATCH = re.compile(r"driver\.batch\s.*?rows=(\d+)")


def staged_now(output: Path) -> int:
    staging = staging_dir(output)
    return sum(pq.ParquetFile(p).metadata.num_rows for p in staging.rglob("*.parquet")) if staging.exists() else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=100_000)
    parser.add_argument("--actors", type=int, default=4)
    parser.add_argument("--partitions", type=int, default=1)
    parser.add_argument("--batch-size", type=int, default=500)
    parser.add_argument("--checkpoint-rows", type=int, default=500)
    parser.add_argument("--batches-in-flight", type=int, default=2)
    parser.add_argument("--engine", default="{}", help="model.simulated settings as JSON")
    parser.add_argument("--out", default="out/bench-resume")
    args = parser.parse_args()
    out = (ROOT / args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    info = make_corpus(out / "corpus" / f"{args.docs}-{args.partitions}", args.docs, args.partitions)
    cell = out / f"resume-{args.docs}-{args.actors}a-{args.partitions}p"
    shutil.rmtree(cell, ignore_errors=True)
    cell.mkdir(parents=True)
    output = cell / "output"
    config = write_config(cell / "extract.yaml", out / "corpus" / f"{args.docs}-{args.partitions}", info, output,
                          args.actors, args.batch_size, args.checkpoint_rows, json.loads(args.engine),
                          batches_in_flight=args.batches_in_flight)
    cluster = LocalCluster([args.actors + 1])
    try:
        env = {**cluster.driver_env(), "EXTRACT_LOG_LEVEL": "debug"}
        first = run_driver(driver_command(config, info), env, output, cell / "first.log", kill_at=args.docs // 2)
        time.sleep(1.0)
        staged = staged_now(output)
        from pipeline.tools.simbench import committed_rows

        committed = committed_rows(output)
        received = sum(int(m.group(1)) for m in BATCH.finditer((cell / "first.log").read_text(errors="replace")))
        started = time.perf_counter()
        second = run_driver(driver_command(config, info), cluster.driver_env(), output, cell / "second.log")
        rerun_wall = time.perf_counter() - started
    finally:
        cluster.stop()
    manifest = _run_manifest(output)
    ids = duckdb.connect().execute(
        f"SELECT count(*), count(DISTINCT doc_id) FROM (SELECT doc_id FROM read_parquet('{output}/rows/**/*.parquet')"
        f" UNION ALL SELECT doc_id FROM read_parquet('{output}/dead_letters/**/*.parquet'))").fetchone()
    kept = staged + committed
    report = {
        "docs": args.docs, "actors": args.actors, "partitions": args.partitions, "batch_size": args.batch_size,
        "checkpoint_rows": args.checkpoint_rows, "batches_in_flight": args.batches_in_flight,
        "killed_at_staged_or_committed": first["killed_at_staged"], "first_exit": first["exit"],
        "kept_after_kill": kept, "received_by_driver_before_kill": received,
        "received_not_kept": max(0, received - kept),
        "rerun_documents": args.docs - kept,
        "goal_at_most": args.actors * args.batch_size,
        "rerun_exit": second["exit"], "rerun_wall_s": round(rerun_wall, 2),
        "rerun_first_output_s": (manifest.get("timings") or {}).get("first_output_s"),
        "rerun_timings": manifest.get("timings"),
        "committed": ids[0], "distinct": ids[1], "exactly_once": ids[0] == ids[1] == args.docs,
        "first_driver": first, "second_driver": second,
    }
    (out / f"resume-{args.docs}-{args.actors}a-{args.partitions}p.json").write_text(json.dumps(report, indent=2))
    print(json.dumps({k: v for k, v in report.items() if not isinstance(v, dict)}, indent=2))
    return 0 if report["exactly_once"] and second["exit"] == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
