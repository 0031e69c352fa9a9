"""The extraction actor's memory during one command, by part, counting only the command's own actors.

It counts only the actors among the command's descendants (the driver's local Ray cluster: raylet, then its
workers); the earlier actor_rss.py, now removed, counted every process on the machine naming `ExtractionActor`,
so a suite beside it added its actors to the peak.
Every `--interval` s it reads each actor's `/proc/PID/status`: `VmRSS`, `VmHWM` (the kernel's high-water
mark, so a spike between polls counts),
`RssAnon`, `RssFile`, `RssShmem`, `Threads`, and adds the RSS of the actor's children. Prints one JSON line
(peaks in GiB, the parts at the peak, the exit code); `--json` also writes the series, to see when it grows.
The actor's peak is `actor_vm_hwm_gib`, its own high-water mark. `actor_peak_rss_gib` adds its children's RSS
(an engine core in a child process, with vLLM's V1 multiprocessing); a child the actor forks for a moment
shares its pages copy-on-write and is counted twice there (seen: 5.47 GiB for one sample of a 2.74 GiB actor).

    nice -n 19 .venv/bin/python lab/experiments/actor_memory.py --json /tmp/mem.json -- \\
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
KEYS = ("VmRSS", "VmHWM", "RssAnon", "RssFile", "RssShmem", "Threads")


def status(pid: int) -> dict[str, int]:
    """The `KEYS` of `/proc/PID/status`, in bytes (`Threads`: a count); empty once the process is gone."""
    found: dict[str, int] = {}
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            key, _, value = line.partition(":")
            if key in KEYS:
                parts = value.split()
                found[key] = int(parts[0]) << 10 if len(parts) > 1 and parts[1] == "kB" else int(parts[0])
    except (OSError, ValueError):
        return {}
    return found


def children_rss(proc: psutil.Process) -> int:
    total = 0
    for child in proc.children(recursive=True):
        try:
            total += child.memory_info().rss
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            pass
    return total


class Sampler(threading.Thread):
    def __init__(self, root: int, interval: float) -> None:
        super().__init__(daemon=True)
        self.root, self.interval = root, interval
        self.stop = threading.Event()
        self.peak: dict[int, dict[str, int]] = {}  # actor pid -> its parts at its highest tree RSS
        self.hwm: dict[int, int] = {}
        self.series: list[dict[str, float]] = []
        self.started = time.monotonic()

    def actors(self) -> list[psutil.Process]:
        try:
            tree = psutil.Process(self.root).children(recursive=True)
        except psutil.NoSuchProcess:
            return []
        found = []
        for proc in tree:
            try:
                if "ExtractionActor" in " ".join(proc.cmdline()):
                    found.append(proc)
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                pass
        return found

    def run(self) -> None:
        while not self.stop.is_set():
            for proc in self.actors():
                parts = status(proc.pid)
                if not parts:
                    continue
                tree = parts.get("VmRSS", 0) + children_rss(proc)
                self.hwm[proc.pid] = max(self.hwm.get(proc.pid, 0), parts.get("VmHWM", 0))
                if tree >= self.peak.get(proc.pid, {}).get("tree", -1):
                    self.peak[proc.pid] = {**parts, "tree": tree}
                self.series.append({"s": round(time.monotonic() - self.started, 2), "pid": proc.pid,
                                    **{k: round(v / GIB, 3) if k != "Threads" else v for k, v in parts.items()},
                                    "tree": round(tree / GIB, 3)})
            self.stop.wait(self.interval)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--interval", type=float, default=0.25)
    parser.add_argument("--json", type=Path, help="also write the result and the series here")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("give the command to run after --")
    started = time.monotonic()
    child = subprocess.Popen(command)
    sampler = Sampler(child.pid, args.interval)
    sampler.start()
    code = child.wait()
    sampler.stop.set()
    sampler.join()
    top = max(sampler.peak.values(), key=lambda p: p["tree"], default={})
    result = {
        "command": command, "exit_code": code, "seconds": round(time.monotonic() - started, 1),
        "actors": len(sampler.peak),
        "actor_peak_rss_gib": round(top.get("tree", 0) / GIB, 3),
        "actor_vm_hwm_gib": round(max(sampler.hwm.values(), default=0) / GIB, 3),
        "at_peak_gib": {k: round(v / GIB, 3) for k, v in top.items() if k not in ("Threads", "tree")},
        "threads_at_peak": top.get("Threads"),
    }
    print(json.dumps(result), file=sys.stderr)
    if args.json:
        args.json.write_text(json.dumps({**result, "series": sampler.series}) + "\n")
    return code


if __name__ == "__main__":
    sys.exit(main())
