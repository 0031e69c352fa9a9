"""Where Ray Data's scheduling thread spends the driver's CPU (issue 57): one simulated run in this process at the
defaults (batch 16, unit 256, one actor), with the executor's scheduling-loop step, task dispatch and completed-task
processing wrapped and timed by `time.thread_time` (that thread's own CPU). Prints looks, looks per second, CPU per
look besides dispatch and completion, and CPU per task dispatched (two per unit: a read task and an actor call).

    PYTHONPATH=$PWD .venv/bin/python lab/experiments/driver_looks.py --docs 20000 --out /tmp/looks

Uses Ray Data's private names (`StreamingExecutor._scheduling_loop_step`, `OpState.dispatch_next_task`,
`process_completed_tasks`): a lab script, not the product, so outside the Ray door (`workers.ray_compat`).
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from pipeline.tools.simbench import make_corpus, write_config  # noqa: E402 - after the path


def timed(owner: Any, name: str, counts: dict[str, float], key: str) -> None:
    """Wrap `owner.name` to add its calls to counts[key] and its thread CPU to counts[key + '_cpu']."""
    original = getattr(owner, name)

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        started = time.thread_time()
        try:
            return original(*args, **kwargs)
        finally:
            counts[key] += 1
            counts[key + "_cpu"] += time.thread_time() - started

    setattr(owner, name, wrapper)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--docs", type=int, default=20_000)
    parser.add_argument("--out", default="/tmp/driver-looks")
    args = parser.parse_args()
    out = Path(args.out)
    info = make_corpus(out / "corpus", args.docs, 1)
    shutil.rmtree(out / "output", ignore_errors=True)
    config = write_config(out / "extract.yaml", out / "corpus", info, out / "output", 1, 16, 256, {})
    from ray.data._internal.execution import streaming_executor, streaming_executor_state

    counts = {k: 0.0 for k in ("looks", "looks_cpu", "dispatch", "dispatch_cpu", "completed", "completed_cpu")}
    timed(streaming_executor.StreamingExecutor, "_scheduling_loop_step", counts, "looks")
    timed(streaming_executor_state.OpState, "dispatch_next_task", counts, "dispatch")
    timed(streaming_executor, "process_completed_tasks", counts, "completed")
    from pipeline.config import load_config
    from pipeline.run import run_job

    started = time.time()
    manifest = run_job(load_config(config))
    wall = time.time() - started
    usage = resource.getrusage(resource.RUSAGE_SELF)
    looks = max(counts["looks"], 1)
    own = counts["looks_cpu"] - counts["dispatch_cpu"] - counts["completed_cpu"]
    cpu = usage.ru_utime + usage.ru_stime
    print(json.dumps({"docs": args.docs, "wall_s": round(wall, 1), "process_cpu_s": round(cpu, 2),
                      **{k: round(v, 3) for k, v in counts.items()}, "looks_per_s": round(counts["looks"] / wall, 2),
                      "ms_per_look_besides": round(own / looks * 1000, 3),
                      "ms_per_dispatch": round(counts["dispatch_cpu"] / max(counts["dispatch"], 1) * 1000, 3),
                      "outcomes": manifest.rows + manifest.dead_letters}, indent=1))


if __name__ == "__main__":
    main()
