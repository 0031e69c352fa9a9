"""One simulated-bench cell (`pipeline.tools.simbench`: a loopback Ray cluster, a real `extract run` of the
simulated engine), with where the driver's CPU and memory go: its CPU per thread (`/proc/<pid>/task/*/stat`),
named by `py-spy dump` every 10 s (py-spy on PATH; threads it never saw, such as Arrow's pool, show as "?"),
and its RSS parts (`VmHWM`, `RssAnon`, `RssFile`, `RssShmem`) every 0.5 s. Issue 27's figures in
docs/performance.md ("Driver CPU and memory, 2026-12-02") came from it.

    nice -n 19 .venv/bin/python jobs/bench/driver_threads.py --docs 1000000 --out /tmp/h27/cell-1e6

`--cwd DIR` runs the driver from another tree (a `git archive` of an older commit) for a before/after.
Writes OUT/result.json (totals, per-thread CPU, RSS peaks) and OUT/samples.json (the RSS series).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from pipeline.tools import simbench

TICK = os.sysconf("SC_CLK_TCK")
RSS_KEYS = ("VmRSS", "VmHWM", "RssAnon", "RssFile", "RssShmem")


def thread_cpu(pid: int) -> dict[str, tuple[str, float]]:
    """tid -> (kernel thread name, CPU seconds) of every thread of `pid` now."""
    out = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            stat = (task / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        out[task.name] = (stat[stat.index("(") + 1:stat.rindex(")")], (int(fields[11]) + int(fields[12])) / TICK)
    return out


def rss_parts(pid: int) -> dict[str, int]:
    parts = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in RSS_KEYS:
            parts[key] = int(value.split()[0]) // 1024
    return parts


def python_thread_names(pid: int) -> dict[str, str]:
    """tid -> the Python thread's name, from `py-spy dump` (empty without py-spy)."""
    spy = shutil.which("py-spy")
    if not spy:
        return {}
    done = subprocess.run([spy, "dump", "--json", "--nonblocking", "-p", str(pid)], capture_output=True, text=True,
                          timeout=30)
    try:
        return {str(t.get("os_thread_id")): t.get("thread_name") or "" for t in json.loads(done.stdout)}
    except ValueError:
        return {}


def run(docs: int, actors: int, batch_size: int, out: Path, cwd: Path) -> dict[str, Any]:
    out.mkdir(parents=True, exist_ok=True)
    cluster = simbench.LocalCluster([actors + 1])
    try:
        corpus = out / "corpus" / f"{docs}-1"
        info = simbench.make_corpus(corpus, docs, 1)
        cell = out / "cell"
        shutil.rmtree(cell, ignore_errors=True)
        cell.mkdir(parents=True)
        output = cell / "output"
        config = simbench.write_config(cell / "extract.yaml", corpus, info, output, actors, batch_size, batch_size,
                                       {})
        started = time.perf_counter()
        with (cell / "driver.log").open("w") as log:
            proc = subprocess.Popen(simbench.driver_command(config, info), env=cluster.driver_env(), stdout=log,
                                    stderr=subprocess.STDOUT, cwd=cwd)
        samples: list[tuple[float, dict[str, int]]] = []
        threads: dict[str, tuple[str, float]] = {}
        names: dict[str, str] = {}

        def sample() -> None:
            ticks = 0
            while proc.poll() is None:
                try:
                    samples.append((round(time.perf_counter() - started, 1), rss_parts(proc.pid)))
                    threads.update(thread_cpu(proc.pid))
                    if ticks % 20 == 19:
                        names.update(python_thread_names(proc.pid))
                except (OSError, subprocess.TimeoutExpired):
                    pass
                ticks += 1
                time.sleep(0.5)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - started
        sampler.join(5)
    finally:
        cluster.stop()
    manifest = simbench._run_manifest(output)
    outcomes = (manifest.get("rows") or 0) + (manifest.get("dead_letters") or 0)
    cpu = usage.ru_utime + usage.ru_stime
    by_thread: dict[str, float] = {}
    for tid, (kernel_name, seconds) in threads.items():
        name = names.get(tid) or ("?" if kernel_name == "python" else kernel_name)
        by_thread[name] = round(by_thread.get(name, 0.0) + seconds, 2)
    peaks: dict[str, int] = {}
    for _, parts in samples:
        for key, value in parts.items():
            peaks[key] = max(peaks.get(key, 0), value)
    result = {"docs": docs, "actors": actors, "batch_size": batch_size, "exit": os.waitstatus_to_exitcode(status),
              "wall_s": round(wall, 1), "driver_cpu_s": round(cpu, 2), "outcomes": outcomes,
              "driver_cpu_us_per_outcome": round(cpu / outcomes * 1e6, 2) if outcomes else None,
              "ru_maxrss_mb": usage.ru_maxrss // 1024, "rss_peaks_mb": peaks,
              "cpu_by_thread_s": dict(sorted(by_thread.items(), key=lambda kv: -kv[1])),
              "timings": manifest.get("timings")}
    (out / "samples.json").write_text(json.dumps(samples))
    (out / "result.json").write_text(json.dumps(result, indent=2))
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--docs", type=int, default=100_000)
    parser.add_argument("--actors", type=int, default=4)
    parser.add_argument("--batch-size", type=int, default=10_000)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--cwd", type=Path, default=Path(__file__).resolve().parents[2])
    args = parser.parse_args()
    print(json.dumps(run(args.docs, args.actors, args.batch_size, args.out.resolve(), args.cwd), indent=2))


if __name__ == "__main__":
    sys.exit(main())
