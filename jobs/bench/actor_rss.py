"""The extraction actor's peak memory during one command (issue 27: the sample job's actor ≤ 2 GiB on CPU).

Runs the command given after `--`, and every 0.5 s sums the RSS of each process whose command line names
`ExtractionActor` and of all its children (the engine core may run in the actor's process or in a child).
The actor's own kernel high-water mark (`VmHWM` in /proc/PID/status) is read on each poll too, so a spike
between polls still counts for the actor itself. Prints one JSON line: the peaks in GiB and the exit code; the
command's own output goes through unchanged.

    flock /tmp/engine.lock .venv/bin/python jobs/bench/actor_rss.py -- \\
        .venv/bin/extract eval jobs/extract.yaml --gold jobs/sample/invoices_gold.jsonl --set output.uri=/tmp/OUT
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil

GIB = 1 << 30


def _hwm(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) << 10
    except OSError:
        pass
    return 0


def _tree_rss(proc: psutil.Process) -> int:
    total = 0
    for p in [proc, *proc.children(recursive=True)]:
        try:
            total += p.memory_info().rss
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            pass
    return total


class Sampler(threading.Thread):
    def __init__(self, interval: float) -> None:
        super().__init__(daemon=True)
        self.interval = interval
        self.stop = threading.Event()
        self.tree_peak: dict[int, int] = {}  # actor pid -> peak RSS of it and its children
        self.hwm: dict[int, int] = {}  # actor pid -> its own VmHWM
        self.samples = 0
        self.series: list[tuple[float, float]] = []  # (seconds, GiB): the actors' summed RSS, to see where it grows
        self.started = time.monotonic()

    def run(self) -> None:
        actors: dict[int, psutil.Process] = {}
        while not self.stop.is_set():
            for proc in psutil.process_iter(["cmdline"]):
                try:
                    if proc.pid not in actors and "ExtractionActor" in " ".join(proc.info["cmdline"] or []):
                        actors[proc.pid] = proc
                except (psutil.NoSuchProcess, psutil.AccessDenied):
                    pass
            now = 0
            for pid, proc in list(actors.items()):
                try:
                    rss = _tree_rss(proc)
                    now += rss
                    self.tree_peak[pid] = max(self.tree_peak.get(pid, 0), rss)
                    self.hwm[pid] = max(self.hwm.get(pid, 0), _hwm(pid))
                except (psutil.NoSuchProcess, psutil.AccessDenied):
                    del actors[pid]
            self.samples += 1
            if actors:
                self.series.append((round(time.monotonic() - self.started, 1), round(now / GIB, 3)))
            self.stop.wait(self.interval)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--interval", type=float, default=0.5)
    parser.add_argument("--json", type=Path, help="also write the result here")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("give the command to run after --")
    sampler = Sampler(args.interval)
    sampler.start()
    started = time.monotonic()
    code = subprocess.call(command)
    sampler.stop.set()
    sampler.join()
    result = {
        "command": command, "exit_code": code, "seconds": round(time.monotonic() - started, 1),
        "samples": sampler.samples, "actors": len(sampler.tree_peak),
        "actor_peak_rss_gib": round(max(sampler.tree_peak.values(), default=0) / GIB, 3),
        "actor_vm_hwm_gib": round(max(sampler.hwm.values(), default=0) / GIB, 3),
    }
    line = json.dumps(result)
    print(line, file=sys.stderr)
    if args.json:
        args.json.write_text(json.dumps({**result, "series": sampler.series}) + "\n")
    return code


if __name__ == "__main__":
    sys.exit(main())
