"""A `driver_threads.py` run split into its parts: the driver's CPU before the first outcome (start-up, the plan,
Ray's connection), while streaming (to the progress line showing every document done; per thread, ms/s and µs
per outcome) and after (the commit, the exit). Reads OUT/result.json, OUT/cpu-series.json and OUT/cell/driver.log.

    python lab/experiments/driver_split.py OUT
"""

from __future__ import annotations

import datetime
import json
import re
import sys
from collections import defaultdict
from pathlib import Path


def split(out: Path) -> str:
    series_file = json.loads((out / "cpu-series.json").read_text())
    result = json.loads((out / "result.json").read_text())
    names, series, timings = series_file["names"], series_file["series"], result["timings"]
    log = (out / "cell" / "driver.log").read_text().splitlines()

    def unix(line: str) -> float:
        return datetime.datetime.fromisoformat(line[:26]).timestamp()

    offset = result["wall_s"] - timings["total_s"]  # the driver's start before its own clock's
    ray_line = next(line for line in log if "stage='starting Ray'" in line)
    t0 = unix(ray_line) - timings["stage.starting_Ray_s"] + offset
    total = result["outcomes"]
    end = unix(next(line for line in log if re.search(rf"done={total}\b", line))) - t0
    start = timings["first_output_s"] + offset
    a = min(series, key=lambda s: abs(s[0] - start))
    b = min(series, key=lambda s: abs(s[0] - end))
    per: dict[str, float] = defaultdict(float)
    for tid, cpu in b[1].items():
        per[names.get(tid, "?")] += cpu - a[1].get(tid, 0)
    seconds, streaming = b[0] - a[0], sum(per.values())
    outcomes = total * seconds / (end - start)
    lines = [f"{out}: driver CPU {result['driver_cpu_s']} s, {result['driver_cpu_us_per_outcome']} µs/outcome",
             f"  before the first outcome (t < {a[0]} s): {sum(a[1].values()):.2f} s",
             f"  streaming: {streaming:.2f} s over {seconds:.1f} s = {streaming / seconds * 1000:.1f} ms/s, "
             f"{streaming / outcomes * 1e6:.1f} µs/outcome at {outcomes / seconds:.0f} outcomes/s",
             f"  after (t > {b[0]} s: the commit, the exit): {result['driver_cpu_s'] - sum(b[1].values()):.2f} s"]
    lines += [f"    {name[:40]:40s} {cpu:.2f} s {cpu / seconds * 1000:.1f} ms/s"
              for name, cpu in sorted(per.items(), key=lambda kv: -kv[1])[:14]]
    return "\n".join(lines)


if __name__ == "__main__":
    print(split(Path(sys.argv[1])))
