"""One simulated-bench cell (`pipeline.tools.simbench`: a loopback Ray cluster, a real `extract run` of the
simulated engine), with where the driver's CPU and memory go: its CPU per thread (`/proc/<pid>/task/*/stat`),
named by `py-spy dump` every 10 s (py-spy on PATH; threads it never saw, such as Arrow's pool, show as "?"),
and its RSS parts (`VmHWM`, `RssAnon`, `RssFile`, `RssShmem`) every 0.5 s. Issue 27's figures in
lab/journal/performance.md ("Driver CPU and memory, 2026-12-02") came from it.

    nice -n 19 .venv/bin/python lab/experiments/driver_threads.py --docs 1000000 --out /tmp/h27/cell-1e6

`--cwd DIR` runs the driver from another tree (a `git archive` of an older commit) for a before/after.
`--py-spy` also records the driver's Python stacks (`py-spy record --threads --nonblocking`, 100 samples/s of
active threads) into OUT/py-spy.txt (collapsed stacks) and OUT/py-spy-top.txt (CPU samples per function, self
and total, per thread).
`--cprofile` runs the driver under cProfile timed by `time.thread_time` (its main thread's own CPU, not the
other threads'), into OUT/driver.prof and OUT/driver-prof.txt (by own time, then by cumulative time).
Writes OUT/result.json (totals, per-thread CPU, RSS peaks), OUT/samples.json (the RSS series) and
OUT/cpu-series.json (every thread's CPU so far, every 2 s, and the threads' names: split a run into its start-up,
its streaming and its commit).
"""

from __future__ import annotations

import argparse
import io
import json
import os
import pstats
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


def spy_top(collapsed: Path, rows: int = 40) -> str:
    """The functions of py-spy's collapsed stacks with the most samples: self and total, thread by thread."""
    own: dict[str, int] = {}
    total: dict[str, int] = {}
    for line in collapsed.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        frames = stack.split(";")
        thread = frames[0]
        for frame in set(frames[1:]):
            total[f"{thread} | {frame}"] = total.get(f"{thread} | {frame}", 0) + int(count)
        if len(frames) > 1:
            own[f"{thread} | {frames[-1]}"] = own.get(f"{thread} | {frames[-1]}", 0) + int(count)
    lines = ["self samples:"] + [f"{n:7d} {k}" for k, n in sorted(own.items(), key=lambda kv: -kv[1])[:rows]]
    lines += ["total samples:"] + [f"{n:7d} {k}" for k, n in sorted(total.items(), key=lambda kv: -kv[1])[:rows]]
    return "\n".join(lines) + "\n"


PROFILED = """import cProfile, runpy, sys, time
profile = cProfile.Profile(time.thread_time)
sys.argv = ["pipeline", *sys.argv[2:]]
profile.enable()
try:
    runpy.run_module("pipeline", run_name="__main__")
finally:
    profile.disable()
    profile.dump_stats(OUT)
"""


def profiled(command: list[str], out: Path) -> list[str]:
    """`command` (python -m pipeline ...) under cProfile, its stats written to `out`."""
    return [command[0], "-c", PROFILED.replace("OUT", repr(str(out))), "-", *command[3:]]


def spy_recorder(pid: int, out: Path) -> subprocess.Popen[bytes] | None:
    if not shutil.which("py-spy"):
        return None
    return subprocess.Popen(["py-spy", "record", "--threads", "--nonblocking", "--rate", "100", "--format", "raw",
                             "-o", str(out / "py-spy.txt"), "-p", str(pid)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def write_profiles(out: Path, recorder: subprocess.Popen[bytes] | None) -> None:
    """py-spy's and cProfile's summaries, of those that ran."""
    if recorder is not None:
        recorder.wait(60)
    if (out / "py-spy.txt").exists():
        (out / "py-spy-top.txt").write_text(spy_top(out / "py-spy.txt"))
    if (out / "driver.prof").exists():
        (out / "driver-prof.txt").write_text(profile_text(out / "driver.prof"))


def profile_text(stats: Path) -> str:
    buffer = io.StringIO()
    for order in ("tottime", "cumulative"):
        pstats.Stats(str(stats), stream=buffer).sort_stats(order).print_stats(45)
    return buffer.getvalue()


def start_driver(out: Path, cluster: simbench.LocalCluster, docs: int, actors: int, batch_size: int, cwd: Path,
                 cprofile: bool, checkpoint_rows: int | None = None) -> tuple[subprocess.Popen[bytes], Path, float]:
    """The cell (its corpus under OUT/corpus, its config, log and output under OUT/cell, afresh) and its driver
    started on `cluster` (under cProfile with `cprofile`): the driver, the cell's output and when it started."""
    corpus = out / "corpus" / f"{docs}-1"
    info = simbench.make_corpus(corpus, docs, 1)
    cell = out / "cell"
    shutil.rmtree(cell, ignore_errors=True)
    cell.mkdir(parents=True)
    output = cell / "output"
    config = simbench.write_config(cell / "extract.yaml", corpus, info, output, actors, batch_size,
                                   checkpoint_rows or batch_size, {})
    started = time.perf_counter()
    with (cell / "driver.log").open("w") as log:
        command = simbench.driver_command(config, info)
        if cprofile:
            command = profiled(command, out / "driver.prof")
        proc = subprocess.Popen(command, env=cluster.driver_env(), stdout=log,
                                stderr=subprocess.STDOUT, cwd=cwd)
    return proc, output, started


class Sampler(threading.Thread):
    """Until the driver exits, every 0.5 s: its RSS parts and its threads' CPU; every 10 s, its Python threads'
    names."""

    def __init__(self, proc: subprocess.Popen[bytes], started: float) -> None:
        super().__init__(daemon=True)
        self.proc, self.started = proc, started
        self.samples: list[tuple[float, dict[str, int]]] = []
        self.threads: dict[str, tuple[str, float]] = {}
        self.names: dict[str, str] = {}
        self.cpu_series: list[tuple[float, dict[str, float]]] = []  # every 2 s: (time, tid -> CPU s so far)

    def run(self) -> None:
        ticks = 0
        while self.proc.poll() is None:
            try:
                self.samples.append((round(time.perf_counter() - self.started, 1), rss_parts(self.proc.pid)))
                self.threads.update(thread_cpu(self.proc.pid))
                if ticks % 4 == 0:
                    self.cpu_series.append((round(time.perf_counter() - self.started, 1),
                                            {tid: cpu for tid, (_, cpu) in self.threads.items()}))
                if ticks % 20 == 19:
                    self.names.update(python_thread_names(self.proc.pid))
            except (OSError, subprocess.TimeoutExpired):
                pass
            ticks += 1
            time.sleep(0.5)


def cpu_by_thread(threads: dict[str, tuple[str, float]], names: dict[str, str]) -> dict[str, float]:
    """CPU seconds by thread name (Python's where py-spy saw the thread, else the kernel's; "?" for an unnamed
    Python thread), the busiest first."""
    by_thread: dict[str, float] = {}
    for tid, (kernel_name, seconds) in threads.items():
        name = names.get(tid) or ("?" if kernel_name == "python" else kernel_name)
        by_thread[name] = round(by_thread.get(name, 0.0) + seconds, 2)
    return dict(sorted(by_thread.items(), key=lambda kv: -kv[1]))


def rss_peaks(samples: list[tuple[float, dict[str, int]]]) -> dict[str, int]:
    """The highest of each RSS part (MB) over the samples."""
    peaks: dict[str, int] = {}
    for _, parts in samples:
        for key, value in parts.items():
            peaks[key] = max(peaks.get(key, 0), value)
    return peaks


def run(docs: int, actors: int, batch_size: int, out: Path, cwd: Path, spy: bool = False,
        cprofile: bool = False, checkpoint_rows: int | None = None) -> dict[str, Any]:
    out.mkdir(parents=True, exist_ok=True)
    for stale in ("py-spy.txt", "driver.prof"):
        (out / stale).unlink(missing_ok=True)
    cluster = simbench.LocalCluster([actors + 1])
    try:
        proc, output, started = start_driver(out, cluster, docs, actors, batch_size, cwd, cprofile, checkpoint_rows)
        recorder = spy_recorder(proc.pid, out) if spy else None
        sampler = Sampler(proc, started)
        sampler.start()
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - started
        sampler.join(5)
        write_profiles(out, recorder)
    finally:
        cluster.stop()
    manifest = simbench._run_manifest(output)
    outcomes = (manifest.get("rows") or 0) + (manifest.get("dead_letters") or 0)
    cpu = usage.ru_utime + usage.ru_stime
    result = {"docs": docs, "actors": actors, "batch_size": batch_size, "exit": os.waitstatus_to_exitcode(status),
              "wall_s": round(wall, 1), "driver_cpu_s": round(cpu, 2), "outcomes": outcomes,
              "driver_cpu_us_per_outcome": round(cpu / outcomes * 1e6, 2) if outcomes else None,
              "ru_maxrss_mb": usage.ru_maxrss // 1024, "rss_peaks_mb": rss_peaks(sampler.samples),
              "cpu_by_thread_s": cpu_by_thread(sampler.threads, sampler.names),
              "timings": manifest.get("timings")}
    (out / "samples.json").write_text(json.dumps(sampler.samples))
    (out / "cpu-series.json").write_text(json.dumps({"series": sampler.cpu_series, "names": {
        tid: sampler.names.get(tid) or name for tid, (name, _) in sampler.threads.items()}}))
    (out / "result.json").write_text(json.dumps(result, indent=2))
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--docs", type=int, default=100_000)
    parser.add_argument("--actors", type=int, default=4)
    parser.add_argument("--batch-size", type=int, default=10_000)
    parser.add_argument("--checkpoint-rows", type=int, help="output.checkpoint_rows (default: the batch size)")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--cwd", type=Path, default=Path(__file__).resolve().parents[2])
    parser.add_argument("--py-spy", action="store_true", help="record the driver's stacks (py-spy on PATH)")
    parser.add_argument("--cprofile", action="store_true", help="the driver's main thread under cProfile")
    args = parser.parse_args()
    print(json.dumps(run(args.docs, args.actors, args.batch_size, args.out.resolve(), args.cwd, args.py_spy,
                         args.cprofile, args.checkpoint_rows), indent=2))


if __name__ == "__main__":
    sys.exit(main())
