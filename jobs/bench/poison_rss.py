"""The extraction actor's peak memory with and without one 51 MB document in the input.

Two runs of the same job through the real command (`extract run`: a local Ray cluster, the bundled model on
vLLM CPU): the first 12 sample invoices, then the same 12 with a 51 MB text (the sample invoices repeated)
among them. While each run goes, every process whose command line names `ExtractionActor` is polled; its peak
RSS is the kernel's high-water mark (`VmHWM` in /proc/PID/status, read on each poll, so a spike between polls
still counts). The big document must be one `input_too_long` dead letter and the actor's peak within 1.5× of
the run without it (before: it was tokenized whole, ~180 MiB per MB of text, and the actor was OOM-killed).

    .venv/bin/python jobs/bench/poison_rss.py [--mb 51] [--docs 12] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil
import pyarrow as pa
import pyarrow.parquet as pq
import yaml

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "jobs" / "sample" / "invoices.parquet"


def _hwm_kib(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def _watch(stop: threading.Event, peaks: dict[int, int]) -> None:
    while not stop.is_set():
        for proc in psutil.process_iter(["pid", "cmdline"]):
            try:
                if "ExtractionActor" in " ".join(proc.info["cmdline"] or []):
                    peaks[proc.pid] = max(peaks.get(proc.pid, 0), _hwm_kib(proc.pid), proc.memory_info().rss >> 10)
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                pass
        stop.wait(0.2)


def _job(folder: Path, docs: int, big_mb: float | None) -> Path:
    sample = pq.read_table(SAMPLE).slice(0, docs)
    ids, texts = sample.column("doc_id").to_pylist(), sample.column("text").to_pylist()
    if big_mb:
        seed = "\n\n".join(t for t in texts if t)
        big = (seed * (int(big_mb * 1e6) // len(seed) + 1))[: int(big_mb * 1e6)]
        ids.insert(docs // 2, "big-document")
        texts.insert(docs // 2, big)
    pq.write_table(pa.table({"doc_id": ids, "text": pa.array(texts, pa.string())}), folder / "docs.parquet")
    config = yaml.safe_load((ROOT / "jobs" / "extract.yaml").read_text())
    config["input"]["uri"] = "docs.parquet"
    config["output"]["uri"] = "out"
    config["model"]["max_tokens"] = 128
    config["model"]["engine_kwargs"]["kv_cache_memory_bytes"] = 256 << 20  # the same fixed cache in both runs
    config["schema"] = "schemas.invoice:Invoice"
    path = folder / "extract.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def _run(folder: Path, docs: int, big_mb: float | None) -> dict:
    folder.mkdir(parents=True, exist_ok=True)
    config = _job(folder, docs, big_mb)
    peaks: dict[int, int] = {}
    stop = threading.Event()
    watcher = threading.Thread(target=_watch, args=(stop, peaks), daemon=True)
    watcher.start()
    started = time.perf_counter()
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("RAY_ADDRESS", None)
    done = subprocess.run([sys.executable, "-m", "pipeline", "run", str(config)], cwd=ROOT, env=env,
                          capture_output=True, text=True)
    seconds = time.perf_counter() - started
    stop.set()
    watcher.join()
    query = subprocess.run([sys.executable, "-m", "pipeline", "query", str(config),
                            "SELECT reason, count(*) AS n FROM dead_letters GROUP BY 1 ORDER BY 1", "--format", "json"],
                           cwd=ROOT, env=env, capture_output=True, text=True)
    reasons = {r["reason"]: r["n"] for r in map(json.loads, query.stdout.splitlines()) if "reason" in r}
    rows = subprocess.run([sys.executable, "-m", "pipeline", "query", str(config), "SELECT count(*) AS n FROM rows",
                           "--format", "json"], cwd=ROOT, env=env, capture_output=True, text=True)
    n_rows = next((json.loads(line)["n"] for line in rows.stdout.splitlines() if line.startswith("{")), None)
    peak_mib = round(max(peaks.values(), default=0) / 1024, 1)
    return {"exit": done.returncode, "seconds": round(seconds, 1), "actor_peak_mib": peak_mib,
            "actors": len(peaks), "rows": n_rows, "dead_letters": reasons,
            "stderr_tail": done.stderr.strip().splitlines()[-1:] if done.returncode else []}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mb", type=float, default=51.0)
    parser.add_argument("--docs", type=int, default=12)
    parser.add_argument("--keep", help="a folder for the two jobs (default: a temporary one)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="poison-rss-") as tmp:
        base = Path(args.keep or tmp)
        without = _run(base / "without", args.docs, None)
        with_big = _run(base / "with", args.docs, args.mb)
    ratio = with_big["actor_peak_mib"] / without["actor_peak_mib"] if without["actor_peak_mib"] else None
    print(json.dumps({"without_big_document": without, f"with_{args.mb:g}_mb_document": with_big,
                      "peak_ratio": round(ratio, 3) if ratio else None}, indent=2))
    return 0 if ratio is not None and ratio <= 1.5 and with_big["dead_letters"].get("input_too_long") else 1


if __name__ == "__main__":
    raise SystemExit(main())
