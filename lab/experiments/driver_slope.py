"""The driver's memory against the documents it has streamed (issue 57, item 1): one simulated-bench cell (a
loopback Ray cluster, a real `extract run` of the simulated engine answering valid rows) at the defaults (batch 16,
unit 256, one actor), its driver's RSS parts (`VmRSS`, `VmHWM`, `RssAnon`, `RssFile`, `RssShmem` of
/proc/<pid>/status) sampled every `--every` seconds beside the documents done (the driver's last `progress` line),
and the slope of each part in bytes per document between two points of the stream (by default 30 % and 95 % of
the documents: past the start, before the commit).

    nice -n 19 .venv/bin/python lab/experiments/driver_slope.py --docs 200000 --out /tmp/slope

`--env KEY=VALUE` (repeatable) sets a variable for the cluster and the driver (a Ray knob such as
`RAY_max_direct_call_object_size=1024`); `--cwd DIR` runs the driver from another tree;
`--wrap CMD` runs it under CMD (heaptrack). `--attach DIR` starts nothing: it samples the driver of the bench
cell DIR (`extract bench --simulate --out OUT`: OUT/cell-N-1a-1p) that another process runs. Writes OUT/slope.json
(the slopes, the end figures and the series).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from driver_threads import RSS_KEYS

from pipeline.tools import simbench

DONE = re.compile(r"""\bdone["']?\s*[:=]\s*(\d+)""")


def rss_kb(pid: int) -> dict[str, int]:
    """The RSS parts of /proc/<pid>/status, kB."""
    parts = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in RSS_KEYS:
            parts[key] = int(value.split()[0])
    return parts


def last_done(log: Path, tail: int = 8192) -> int | None:
    """The documents done of the driver log's last progress line, None before the first."""
    try:
        with log.open("rb") as handle:
            handle.seek(0, os.SEEK_END)
            handle.seek(max(0, handle.tell() - tail))
            text = handle.read().decode(errors="replace")
    except OSError:
        return None
    found = [int(m.group(1)) for line in text.splitlines() if "progress" in line for m in [DONE.search(line)] if m]
    return found[-1] if found else None


def slope(series: list[dict[str, Any]], key: str, lo: int, hi: int) -> float | None:
    """Least-squares bytes per document of `key` (kB in the series) over the samples with lo ≤ done ≤ hi."""
    points = [(s["done"], s[key] * 1024) for s in series if s.get("done") is not None and lo <= s["done"] <= hi]
    if len(points) < 3:
        return None
    n = len(points)
    mx = sum(x for x, _ in points) / n
    my = sum(y for _, y in points) / n
    var = sum((x - mx) ** 2 for x, _ in points)
    return round(sum((x - mx) * (y - my) for x, y in points) / var, 1) if var else None


def attach(cell: Path, docs: int, every: float) -> list[dict[str, Any]]:
    """The series of the driver of a bench cell run by another process (`extract bench --simulate --out DIR`; `cell`:
    DIR/cell-N-1a-1p): waits for it to start, samples it until it exits."""
    import psutil

    config = str(cell / "extract.yaml")
    while True:
        found = [p for p in psutil.process_iter(["cmdline"]) if config in (p.info["cmdline"] or [])]
        if found:
            break
        time.sleep(1)
    pid, started, series = found[0].pid, time.perf_counter(), []
    while psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
        try:
            series.append({"t": round(time.perf_counter() - started, 1), "done": last_done(cell / "driver.log"),
                           **rss_kb(pid)})
        except (OSError, ValueError, psutil.Error):
            pass
        time.sleep(every)
    return series


def slopes(series: list[dict[str, Any]], docs: int, between: str) -> dict[str, Any]:
    a, b = (float(x) for x in between.split(","))
    lo, hi = int(a * docs), int(b * docs)
    at = [s for s in series if s.get("done") is not None and lo <= s["done"] <= hi]
    return {
        "peak_mb": {k: round(max((s.get(k, 0) for s in series), default=0) / 1024, 1)
                    for k in ("VmHWM", "VmRSS", "RssAnon", "RssShmem")},
        "between_docs": [lo, hi],
        "mb_at_between": [{k: round(s[k] / 1024, 1) for k in ("VmRSS", "RssAnon", "RssShmem")} for s in
                          (at[:1] + at[-1:])] if at else None,
        "bytes_per_doc": {k: slope(series, k, lo, hi) for k in ("VmRSS", "RssAnon", "RssFile", "RssShmem")},
    }


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--docs", type=int, default=200_000)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--checkpoint-rows", type=int, default=256)
    parser.add_argument("--every", type=float, default=2.0, help="seconds between samples")
    parser.add_argument("--between", default="0.3,0.95", help="the share of the documents the slope is fitted over")
    parser.add_argument("--env", action="append", default=[], help="KEY=VALUE for the cluster and the driver")
    parser.add_argument("--cwd", type=Path, default=Path(__file__).resolve().parents[2])
    parser.add_argument("--wrap", default="", help="a command the driver runs under (e.g. 'heaptrack -o OUT/ht')")
    parser.add_argument("--attach", type=Path, help="only sample the driver of this bench cell folder, run by another")
    parser.add_argument("--out", type=Path, required=True)
    return parser.parse_args()


def main() -> None:
    args = arguments()
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    if args.attach:
        series = attach(args.attach.resolve(), args.docs, args.every)
        result = {"docs": args.docs, "cell": str(args.attach), **slopes(series, args.docs, args.between)}
        (out / "slope.json").write_text(json.dumps({**result, "series": series}, indent=1))
        print(json.dumps(result, indent=1))
        return
    for pair in args.env:
        key, _, value = pair.partition("=")
        os.environ[key] = value  # the cluster's processes and the driver inherit it
    corpus = out / "corpus" / f"{args.docs}-1"
    info = simbench.make_corpus(corpus, args.docs, 1)
    cell = out / "cell"
    shutil.rmtree(cell, ignore_errors=True)
    cell.mkdir(parents=True)
    output = cell / "output"
    config = simbench.write_config(cell / "extract.yaml", corpus, info, output, 1, args.batch_size,
                                   args.checkpoint_rows, {})
    cluster = simbench.LocalCluster([2])
    series: list[dict[str, Any]] = []
    try:
        log = cell / "driver.log"
        started = time.perf_counter()
        with log.open("w") as handle:
            proc = subprocess.Popen([*shlex.split(args.wrap), *simbench.driver_command(config, info)],
                                    env=cluster.driver_env(), stdout=handle, stderr=subprocess.STDOUT, cwd=args.cwd)

        def sample() -> None:
            while proc.poll() is None:
                try:
                    series.append({"t": round(time.perf_counter() - started, 1), "done": last_done(log),
                                   **rss_kb(proc.pid)})
                except (OSError, ValueError):
                    pass
                time.sleep(args.every)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - started
        sampler.join(5)
    finally:
        cluster.stop()
    report(out, args, series, status, usage, wall, simbench._run_manifest(output))


def report(out: Path, args: argparse.Namespace, series: list[dict[str, Any]], status: int, usage: Any, wall: float,
           manifest: dict[str, Any]) -> None:
    outcomes = (manifest.get("rows") or 0) + (manifest.get("dead_letters") or 0)
    cpu = usage.ru_utime + usage.ru_stime
    result = {
        "docs": args.docs, "env": args.env, "exit": os.waitstatus_to_exitcode(status), "wall_s": round(wall, 1),
        "rows": manifest.get("rows"), "dead_letters": manifest.get("dead_letters"), "status": manifest.get("status"),
        "driver_cpu_s": round(cpu, 2), "cpu_us_per_outcome": round(cpu / outcomes * 1e6, 1) if outcomes else None,
        **slopes(series, args.docs, args.between),
    }
    (out / "slope.json").write_text(json.dumps({**result, "series": series}, indent=1))
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
