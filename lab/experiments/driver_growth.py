"""What grows at the driver per document (issue 57, item 1): one simulated run in this process, sampled as it streams.

    PYTHONPATH=$PWD .venv/bin/python jobs/bench/driver_growth.py --docs 20000 --out /tmp/growth

The driver's loop is watched from `Progress.update` (called once per outcome batch): every `--every` batches the
driver's private RSS (VmRSS less the object store's shared pages) and the live Python objects by type are recorded.
The report names the types whose count grew most between the first sample after the first outcome and the last,
per batch, and the RSS growth per document. Defaults are the job's: batch size 16, unit 256.
"""

from __future__ import annotations

import argparse
import gc
import json
import resource
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from pipeline.tools.simbench import make_corpus, write_config  # noqa: E402 - after the path


def private_kb(key: str = "private") -> int:
    parts = {}
    with open("/proc/self/status") as handle:
        for line in handle:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "RssShmem", "VmHWM"):
                parts[key] = int(value.split()[0])
    return parts["VmHWM"] if key == "VmHWM" else parts["VmRSS"] - parts.get("RssShmem", 0)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--docs", type=int, default=20_000)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--checkpoint-rows", type=int, default=256)
    parser.add_argument("--every", type=int, default=200, help="batches between samples")
    parser.add_argument("--out", default="/tmp/driver-growth")
    args = parser.parse_args()
    out = Path(args.out)
    corpus = out / "corpus"
    info = make_corpus(corpus, args.docs, 1)
    import shutil

    shutil.rmtree(out / "output", ignore_errors=True)
    config = write_config(out / "extract.yaml", corpus, info, out / "output", 1, args.batch_size,
                          args.checkpoint_rows, {})
    from pipeline.config import load_config
    from pipeline.progress import Progress
    from pipeline.run import run_job

    samples: list[dict[str, Any]] = []
    calls = [0]
    original = Progress.update

    def update(self: Progress, done: int, dead: int) -> None:
        original(self, done, dead)
        calls[0] += 1
        if calls[0] % args.every == 1:
            types = Counter(type(o).__name__ for o in gc.get_objects())
            samples.append({"batches": calls[0], "done": done, "private_kb": private_kb(),
                            "hwm_kb": private_kb("VmHWM"), "types": types, "unix": time.time()})

    Progress.update = update  # type: ignore[method-assign]
    manifest = run_job(load_config(config))
    usage = resource.getrusage(resource.RUSAGE_SELF)
    outcomes = manifest.rows + manifest.dead_letters
    report = growth(args, samples, {"private_kb": private_kb(), "hwm_kb": private_kb("VmHWM"), "outcomes": outcomes,
                                    "driver_cpu_s": round(usage.ru_utime + usage.ru_stime, 2),
                                    "cpu_us_per_outcome": round((usage.ru_utime + usage.ru_stime) / outcomes * 1e6, 1)
                                    if outcomes else None})
    (out / "growth.json").write_text(json.dumps(report, indent=1))
    print(json.dumps({k: v for k, v in report.items() if k != "samples"}, indent=1))


def growth(args: argparse.Namespace, samples: list[dict[str, Any]], end: dict[str, int]) -> dict[str, Any]:
    """Bytes per document and objects per batch, between the first samples after the first outcome and the last."""
    first, last = samples[1] if len(samples) > 2 else samples[0], samples[-1]
    batches = last["batches"] - first["batches"]
    docs = last["done"] - first["done"]
    growth = Counter(last["types"])
    growth.subtract(first["types"])
    return {
        "docs": args.docs, "batch_size": args.batch_size, "checkpoint_rows": args.checkpoint_rows,
        "between": [first["done"], last["done"]],
        "private_kb": [first["private_kb"], last["private_kb"]],
        "bytes_per_doc": round((last["private_kb"] - first["private_kb"]) * 1024 / max(docs, 1), 1),
        "objects_per_batch": {k: round(v / max(batches, 1), 2) for k, v in growth.most_common(25)},
        "end": end,
        "samples": [{k: v for k, v in s.items() if k != "types"} for s in samples],
    }


if __name__ == "__main__":
    main()
