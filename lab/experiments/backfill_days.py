"""A long nightly backfill on the simulated engine (issue 57 item 2): driver RSS across days, a SIGKILL mid-way, resume.

    PYTHONPATH=$PWD .venv/bin/python jobs/bench/backfill_days.py --days 1000 --per-day 100 --kill-at 500 \
        --out /tmp/backfill-days

`extract backfill` over `--days` daily partitions of `--per-day` documents (the job's defaults otherwise: batch size
16, unit 256, one actor) against a loopback Ray cluster (pipeline.tools.localcluster). The driver's private RSS
(VmRSS less the object store's shared pages) is read from /proc each time another partition is committed; at
`--kill-at` committed days the driver is SIGKILLed, and the same backfill is run again. Reported: the first commit's
second, driver RSS at day 10 and at the last day of each run, the documents the rerun generated beside those the
kill left uncommitted and unstaged (what was redone), and every document committed once (DuckDB over the output).
Writes OUT/backfill-days.json.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import duckdb

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from pipeline.tools.simbench import (  # noqa: E402 - after the path
    LocalCluster,
    _run_manifest,
    driver_command,
    make_corpus,
    own_private_rss_kb,
    staged_rows,
    write_config,
)


def committed_days(output: Path) -> int:
    folder = output / "_partitions"
    return sum(1 for _ in folder.glob("*/manifest.json")) if folder.exists() else 0


def watch(command: list[str], env: dict[str, str], output: Path, log: Path, kill_at: int | None) -> dict[str, Any]:
    """Run the driver; its private RSS (MB) at each newly committed day; SIGKILL at `kill_at` committed days."""
    started = time.perf_counter()
    with log.open("w") as handle:
        proc = subprocess.Popen(command, env=env, stdout=handle, stderr=subprocess.STDOUT, cwd=ROOT)
    rss: dict[int, float] = {}
    first_commit_s = None
    base = committed_days(output)
    seen = base
    while proc.poll() is None:
        days = committed_days(output)
        if days > seen:
            seen = days
            kb = own_private_rss_kb(proc.pid)
            if kb:
                rss[days] = round(kb / 1024, 1)
            if first_commit_s is None:
                first_commit_s = round(time.perf_counter() - started, 1)
        if kill_at is not None and days >= kill_at:
            os.kill(proc.pid, signal.SIGKILL)
            break
        time.sleep(0.25)
    proc.wait()
    return {"exit": proc.returncode, "wall_s": round(time.perf_counter() - started, 1),
            "first_commit_s": first_commit_s, "rss_mb_by_day": rss, "days_before": base,
            "days_after": committed_days(output)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--days", type=int, default=1000)
    parser.add_argument("--per-day", type=int, default=100)
    parser.add_argument("--kill-at", type=int, default=500)
    parser.add_argument("--out", default="/tmp/backfill-days")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    info = make_corpus(out / "corpus", args.days * args.per_day, args.days)
    output = out / "output"
    if output.exists():
        import shutil

        shutil.rmtree(output)
    config = write_config(out / "extract.yaml", out / "corpus", info, output, 1, 16, 256, {})
    cluster = LocalCluster([2])
    try:
        env = cluster.driver_env()
        first = watch(driver_command(config, info), env, output, out / "first.log", args.kill_at)
        time.sleep(5)  # the killed driver's actors end
        kept = staged_rows(output)
        second = watch(driver_command(config, info), env, output, out / "second.log", None)
    finally:
        cluster.stop()
    manifest = _run_manifest(output)
    generated = sum(a.get("documents", 0) for a in manifest.get("actors", []))
    total = args.days * args.per_day
    con = duckdb.connect()
    every = (f"SELECT doc_id FROM read_parquet('{output}/rows/**/*.parquet') UNION ALL "
             f"SELECT doc_id FROM read_parquet('{output}/dead_letters/**/*.parquet')")
    count, distinct = con.execute(f"SELECT count(*), count(DISTINCT doc_id) FROM ({every})").fetchone()

    def at(run: dict[str, Any], day: int) -> float | None:
        days = sorted(run["rss_mb_by_day"])
        return next((run["rss_mb_by_day"][d] for d in days if d >= day), None)

    report = {
        "days": args.days, "per_day": args.per_day, "kill_at": args.kill_at, "first": first, "second": second,
        "kept_at_kill": kept, "rerun_generated": generated, "redone": generated - (total - kept),
        "committed_once": count == distinct == total, "committed": count, "distinct": distinct,
        "rss_day_10_mb": at(first, 10), "rss_last_day_first_run_mb": at(first, first["days_after"]),
        "rss_last_day_mb": at(second, args.days),
    }
    (out / "backfill-days.json").write_text(json.dumps(report, indent=1))
    print(json.dumps({k: v for k, v in report.items() if k not in ("first", "second")}, indent=1))


if __name__ == "__main__":
    main()
