"""`extract bench --simulate`: the pipeline at corpus scale with the simulated engine (`model.path: simulated`).

Every cell of a grid (documents × actors × partitions) is a real `extract run` (or `extract backfill`, for more
than one partition) in a child process, against a Ray cluster this bench starts on loopback (a head and
`nodes - 1` worker raylets, its own temp dir): the real Ray Data plan, actors, classify, staging and commit;
only the model is simulated (workers.simulated, by default answering at once, so the pipeline is measured).

Per cell: outcomes/s at the driver end to end (documents over the run's wall time, and over the time from the
first outcome to the end), the driver's peak RSS and CPU seconds (its own rusage, `wait4`), CPU µs per outcome,
the peak staging files and bytes (sampled), the time to the first committed partition, plan time (every
partition planned in this process, the `plan_one` the driver calls) and outcomes per node.

In the same bench run, two ceilings:
- `commit_ceiling`: the driver's stage + commit of synthetic outcome tables (one per unit) on local disk, in
  this process, without Ray: outcomes/s, and seconds per partition commit;
- `ray_ceiling`: Ray Data moving outcome-shaped rows (id, status, a 120-byte record) from one dummy actor to a
  driver iterating them, on the same cluster.
Writes DIR/bench-sim.json, DIR/bench-sim.md and DIR/bench-sim.png.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import yaml

from pipeline.lifecycle import terminating
from pipeline.output.layout import OutputLayout
from pipeline.output.slices import Slice, disjoint, parse_slice, unit_file_id
from pipeline.partition import Partition
from pipeline.tools.localcluster import LocalCluster  # also imported from here by tests/ and lab/experiments
from pipeline.tools.machine import describe as describe_machine
from pipeline.tools.machine import machine
from workers.stages import stage_lines

GRIDS: dict[str, dict[str, list[int]]] = {
    "quick": {"docs": [10_000], "actors": [1, 4], "partitions": [1, 10]},
    "medium": {"docs": [10_000, 100_000], "actors": [1, 4, 16], "partitions": [1, 1000]},
    "full": {"docs": [10_000, 100_000, 1_000_000], "actors": [1, 4, 16], "partitions": [1, 1000]},
}
FIRST_DAY = date(2020, 1, 1)
SCHEMA = {"type": "object", "properties": {
    "vendor": {"type": "string", "maxLength": 40}, "invoice": {"type": "string", "maxLength": 20},
    "total": {"type": "number", "minimum": 0}, "items": {"type": "integer", "minimum": 0, "maximum": 1000},
    "due": {"type": "string", "format": "date"}, "currency": {"enum": ["EUR", "USD", "GBP"]}},
    "required": ["vendor", "invoice", "total", "items", "due", "currency"]}
VENDORS = ("Acme Ltd", "Globex GmbH", "Initech SA", "Umbrella plc", "Hooli Inc", "Vandelay Industries")


# -- corpus and config ---------------------------------------------------------------------------------

def document(i: int) -> str:
    return (f"INVOICE INV-{i:08d}\nFrom: {VENDORS[i % len(VENDORS)]}, {10 + i % 90} Market Street\n"
            f"Items: {i % 97} widgets at {1 + i % 13}.50 each\nTotal due: {(i % 97) * (1 + i % 13) + 0.5:.2f} EUR\n"
            f"Due date: 2026-{1 + i % 12:02d}-{1 + i % 28:02d}\nThank you for your business.")


def make_corpus(folder: Path, docs: int, partitions: int) -> dict[str, Any]:
    """`docs` documents (ids d0000000…), in one file, or one file per day for `partitions` days from FIRST_DAY.
    Kept across runs (a marker file holds what it is)."""
    marker = folder / "corpus.json"
    want = {"docs": docs, "partitions": partitions, "format": 1}
    if marker.exists():
        known = json.loads(marker.read_text())
        if all(known.get(k) == v for k, v in want.items()):
            return known
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    per, extra = divmod(docs, partitions)
    start = 0
    for p in range(partitions):
        n = per + (1 if p < extra else 0)
        ids = [f"d{i:07d}" for i in range(start, start + n)]
        table = pa.table({"doc_id": ids, "text": [document(i) for i in range(start, start + n)]})
        target = folder / (f"dt={(FIRST_DAY + timedelta(days=p)).isoformat()}" if partitions > 1 else "")
        target.mkdir(parents=True, exist_ok=True)
        pq.write_table(table, target / "docs.parquet", row_group_size=100_000)
        start += n
    (folder / "schema.json").write_text(json.dumps(SCHEMA))
    info = {**want, "uri": "dt={date}/docs.parquet" if partitions > 1 else "docs.parquet",
            "start": FIRST_DAY.isoformat(), "end": (FIRST_DAY + timedelta(days=partitions - 1)).isoformat()}
    marker.write_text(json.dumps(info))
    return info


def write_config(path: Path, corpus: Path, info: dict[str, Any], output: Path, actors: int, batch_size: int,
                 checkpoint_rows: int, simulated: dict[str, Any], cpus_per_actor: float = 1.0,
                 batches_in_flight: int = 2) -> Path:
    config = {
        "name": "simbench",
        "input": {"uri": str(corpus / info["uri"])},
        "schema_file": str(corpus / "schema.json"),
        "prompt": "Extract the invoice from this document.\n{document}",
        "model": {"path": "simulated", "max_tokens": 256, "max_model_len": 4096,
                  "simulated": {"allow": True, "answers": "valid", **simulated}},  # rows, not dead letters
        "workers": {"actors": actors, "cpus_per_actor": cpus_per_actor, "batch_size": batch_size,
                    "batches_in_flight": batches_in_flight},
        "output": {"uri": str(output), "checkpoint_rows": checkpoint_rows, "confidence": False},
    }
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def driver_command(config: Path, info: dict[str, Any]) -> list[str]:
    if info["partitions"] > 1:
        return [sys.executable, "-m", "pipeline", "backfill", str(config), "--start", info["start"],
                "--end", info["end"]]
    return [sys.executable, "-m", "pipeline", "run", str(config)]


# -- one cell ------------------------------------------------------------------------------------------

def own_peak_rss_kb(pid: int) -> int | None:
    """The process's own RSS high-water mark (`VmHWM`, kB), None where /proc has none. Not `ru_maxrss` from
    `wait4`: Linux counts there the launcher's RSS at the fork (the driver is this process forked, then
    exec'd), so the bench that had built and planned a 10⁶-document corpus reported its own 922 MB as the
    driver's (the driver's own peak was 391 MB)."""
    try:
        with open(f"/proc/{pid}/status") as handle:
            for line in handle:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return None


def own_private_rss_kb(pid: int) -> int | None:
    """The process's RSS without its shared-memory pages (`VmRSS` − `RssShmem`, kB): the object store's pages
    the driver has mapped to read its batches (`RssShmem`) are the store's memory, counted in the driver's RSS
    and its `VmHWM` too; they grow with the documents streamed (≈ 60 MB at 10⁶). None where /proc has none."""
    parts: dict[str, int] = {}
    try:
        with open(f"/proc/{pid}/status") as handle:
            for line in handle:
                key, _, value = line.partition(":")
                if key in ("VmRSS", "RssShmem"):
                    parts[key] = int(value.split()[0])
    except (OSError, ValueError, IndexError):
        return None
    return parts["VmRSS"] - parts.get("RssShmem", 0) if "VmRSS" in parts else None


class _Sampler(threading.Thread):
    """The staging folder's file count and bytes every 0.5 s, and the driver's own RSS high-water mark every
    0.1 s (it only rises, so the last reading before the driver exits is its peak, short of its last 0.1 s)."""

    def __init__(self, pid: int, output: Path) -> None:
        super().__init__(daemon=True)
        self.pid, self.output = pid, output
        self.staging_files = self.staging_bytes = 0
        self.peak_rss_kb: int | None = None
        self.private_peak_kb: int | None = None  # sampled every 0.1 s: a shorter peak can be missed
        self.halt = threading.Event()

    def run(self) -> None:
        staging = staging_dir(self.output)
        ticks = 0
        while not self.halt.wait(0.1):
            peak = own_peak_rss_kb(self.pid)
            if peak:  # 0 or None once the driver is a zombie
                self.peak_rss_kb = max(self.peak_rss_kb or 0, peak)
            private = own_private_rss_kb(self.pid)
            if private:
                self.private_peak_kb = max(self.private_peak_kb or 0, private)
            ticks += 1
            if ticks % 5:
                continue
            files = size = 0
            for root, _, names in os.walk(staging):
                for name in names:
                    try:
                        size += os.stat(os.path.join(root, name)).st_size
                        files += 1
                    except OSError:
                        pass
            self.staging_files, self.staging_bytes = max(self.staging_files, files), max(self.staging_bytes, size)


def run_driver(command: list[str], env: dict[str, str], output: Path, log: Path,
               kill_at: int | None = None) -> dict[str, Any]:
    """Run the driver; its wall time, exit code and own rusage (CPU seconds, peak RSS). With `kill_at`, SIGKILL it
    once that many documents are staged (counted from the staged files' names is not possible: from their rows,
    read back), for the resume measurement."""
    started = time.perf_counter()
    with log.open("w") as handle:
        proc = subprocess.Popen(command, env=env, stdout=handle, stderr=subprocess.STDOUT, cwd=_root())
    sampler = _Sampler(proc.pid, output)
    sampler.start()
    killed_at = None
    if kill_at is not None:
        while proc.poll() is None:
            staged = staged_rows(output)
            if staged >= kill_at:
                os.kill(proc.pid, signal.SIGKILL)
                killed_at = staged
                break
            time.sleep(0.2)
    try:
        _, status, usage = os.wait4(proc.pid, 0)
    except BaseException:  # the bench stopped (SIGTERM, Ctrl-C): its driver goes too, not left on a stopped cluster
        proc.kill()
        proc.wait()
        raise
    wall = time.perf_counter() - started
    sampler.halt.set()
    sampler.join()
    return {"exit": os.waitstatus_to_exitcode(status), "wall_s": round(wall, 3),
            "driver_cpu_s": round(usage.ru_utime + usage.ru_stime, 3),
            "driver_peak_rss_mb": round((sampler.peak_rss_kb or usage.ru_maxrss) / 1024, 1),
            "driver_ru_maxrss_mb": round(usage.ru_maxrss / 1024, 1),  # the launcher's RSS at the fork included
            "driver_private_peak_mb": round(sampler.private_peak_kb / 1024, 1) if sampler.private_peak_kb else None,
            "staging_files_peak": sampler.staging_files, "staging_mb_peak": round(sampler.staging_bytes / 2**20, 2),
            "killed_at_staged": killed_at}


def staged_rows(output: Path, footers: dict[Path, int] | None = None) -> int:
    """Documents staged and not yet committed, plus those committed (from the partition manifests). A unit with a
    file (a split run's, staged by the driver) counts its file's rows; any other counts the rows of its slices (from
    their names, `pipeline.output.slices`), each row once. `footers` caches the unit
    files' row counts across calls."""
    footers = {} if footers is None else footers
    units: dict[str, int] = {}
    slices: dict[str, list[Slice]] = defaultdict(list)
    staging = staging_dir(output)
    for path in staging.rglob("*.*") if staging.exists() else []:  # slices (.arrow; .parquet before) and unit files
        if (found := parse_slice(str(path))) is not None:
            slices[found.unit_id].append(found)
        elif (unit_id := unit_file_id(path.name)) is not None:
            if path not in footers:
                try:
                    footers[path] = pq.ParquetFile(path).metadata.num_rows
                except Exception:  # noqa: BLE001 - a file being written: read at the next call
                    continue
            units[unit_id] = footers[path]
    in_slices = sum(s.rows for unit, found in slices.items() if unit not in units for s in disjoint(found))
    return sum(units.values()) + in_slices + committed_rows(output)


def staging_dir(output: Path) -> Path:
    """The folder holding every partition's staging (OutputLayout names it)."""
    return Path(OutputLayout(str(output)).staging_root(Partition(None, ""))).parent


def committed_rows(output: Path) -> int:
    total = 0
    sample = Path(OutputLayout(str(output)).manifest(Partition(None, "")))
    folder = sample.parent.parent  # the partition manifests' folder
    for path in folder.rglob(sample.name) if folder.exists() else []:
        try:
            manifest = json.loads(path.read_text())
            total += int(manifest.get("input_rows") or 0)
        except (OSError, ValueError):
            pass
    return total


def _root() -> Path:
    return Path(__file__).resolve().parents[2]


def _run_manifest(output: Path) -> dict[str, Any]:
    runs = sorted(Path(OutputLayout(str(output)).runs_root()).glob("*.json"), key=lambda p: p.stat().st_mtime)
    return json.loads(runs[-1].read_text()) if runs else {}


def plan_seconds(config: Path, info: dict[str, Any]) -> float:
    """Every partition planned as the driver plans it (`pipeline.run.plan_one`: the units and `check_ids`)."""
    from pipeline.config import load_config
    from pipeline.partition import partition_for
    from pipeline.run import plan_one

    loaded = load_config(config)
    days = [FIRST_DAY + timedelta(days=p) for p in range(info["partitions"])] if info["partitions"] > 1 else [None]
    started = time.perf_counter()
    for day in days:
        plan_one(loaded, partition_for(loaded.input_uri, day))
    return time.perf_counter() - started


def run_cell(out: Path, cluster: LocalCluster, docs: int, actors: int, partitions: int, batch_size: int,
             checkpoint_rows: int, simulated: dict[str, Any]) -> dict[str, Any]:
    corpus = out / "corpus" / f"{docs}-{partitions}"
    info = make_corpus(corpus, docs, partitions)
    cell = out / f"cell-{docs}-{actors}a-{partitions}p"
    shutil.rmtree(cell, ignore_errors=True)
    cell.mkdir(parents=True)
    output = cell / "output"
    config = write_config(cell / "extract.yaml", corpus, info, output, actors, batch_size, checkpoint_rows, simulated)
    planned = plan_seconds(config, info)
    result = run_driver(driver_command(config, info), cluster.driver_env(), output, cell / "driver.log")
    manifest = _run_manifest(output)
    timings = manifest.get("timings") or {}
    first_output = timings.get("first_output_s")
    total = timings.get("total_s") or result["wall_s"]
    nodes = per_node(manifest.get("actors") or [], total - first_output if first_output is not None else None)
    out_rows = (manifest.get("rows") or 0) + (manifest.get("dead_letters") or 0)
    return {
        "docs": docs, "actors": actors, "partitions": partitions, "exit": result["exit"], "outcomes": out_rows,
        "wall_s": result["wall_s"], "outcomes_per_s": round(out_rows / result["wall_s"], 1) if out_rows else None,
        "steady_outcomes_per_s": round(out_rows / (total - first_output), 1)
        if out_rows and first_output is not None and total > first_output else None,
        "driver_cpu_s": result["driver_cpu_s"],
        "driver_cpu_us_per_outcome": round(result["driver_cpu_s"] / out_rows * 1e6, 2) if out_rows else None,
        "driver_peak_rss_mb": result["driver_peak_rss_mb"], "driver_ru_maxrss_mb": result["driver_ru_maxrss_mb"],
        "driver_private_peak_mb": result.get("driver_private_peak_mb"),
        "plan_s": round(planned, 3),
        "staging_files_peak": result["staging_files_peak"], "staging_mb_peak": result["staging_mb_peak"],
        "first_commit_s": timings.get("first_commit_s"), "first_output_s": first_output,
        "commit_s_per_partition": None, "per_node": nodes,
        "actors_per_node": {node: n["actors"] for node, n in nodes.items()},
        "status": manifest.get("status"), "rows": manifest.get("rows"), "dead_letters": manifest.get("dead_letters"),
        "stage_cpu_ms": manifest.get("stage_cpu_ms"),  # the actors' CPU per document beside the engine (workers.stages)
    }


# -- the two ceilings ----------------------------------------------------------------------------------

def _synthetic_outcomes(plans: list[Any], contract: Any) -> list[tuple[Any, Any, pa.Table]]:
    """Per unit of `plans`: a table of row outcomes for its documents (one template per unit size, its ids set)."""
    import pyarrow.compute as pc

    from workers.classify import Outcome
    from workers.extractor import outcome_table

    record = {"vendor": "Acme Ltd", "invoice": "INV-00000001", "total": 123.5, "items": 12, "due": "2026-01-02",
              "currency": "EUR"}
    templates: dict[int, pa.Table] = {}
    ids_by_file = {f: pq.read_table(f, columns=["doc_id"]).column("doc_id") for p in plans for f in p.files}
    tables = []
    for pinput in plans:
        for unit in pinput.units:
            n = unit.rows
            if n not in templates:
                outcomes = [Outcome(record=dict(record), finish_reason="stop", prompt_tokens=60, output_tokens=30,
                                    raw_output=json.dumps(record)) for _ in range(n)]
                for o in outcomes:
                    o.extra["schema_hash"] = contract.hash
                templates[n] = outcome_table(pa.table({"doc_id": pa.array([""] * n)}), outcomes, contract.layout)
            ids = pc.cast(ids_by_file[unit.path].slice(unit.start, n), pa.string())
            tables.append((pinput, unit, templates[n].set_column(0, "doc_id", ids)))
    return tables


def commit_ceiling(out: Path, docs: int, partitions: int, checkpoint_rows: int) -> dict[str, Any]:
    """The driver's stage + commit of synthetic outcomes on local disk, without Ray: one outcome table per unit
    (built once per unit size, its ids replaced), staged, and each partition committed as the driver does."""
    from pipeline.config import load_config
    from pipeline.output.commit import PartitionCommitter, output_parts
    from pipeline.output.layout import OutputLayout
    from pipeline.partition import partition_for
    from pipeline.run import plan_one
    from pipeline.storage import storage_for

    corpus = out / "corpus" / f"{docs}-{partitions}"
    info = make_corpus(corpus, docs, partitions)
    cell = out / f"ceiling-commit-{docs}-{partitions}p"
    shutil.rmtree(cell, ignore_errors=True)
    cell.mkdir(parents=True)
    config = write_config(cell / "extract.yaml", corpus, info, cell / "output", 1, checkpoint_rows, checkpoint_rows, {})
    loaded = load_config(config)
    days = [FIRST_DAY + timedelta(days=p) for p in range(partitions)] if partitions > 1 else [None]
    plans = [plan_one(loaded, partition_for(loaded.input_uri, d)) for d in days]
    storage = storage_for(loaded.output_uri, loaded.s3_settings)
    committer = PartitionCommitter(storage, OutputLayout(loaded.output_uri), loaded.contract, "simulated",
                                   loaded.output_hash, "ceiling-run", parts=output_parts(loaded.decisive))
    tables = _synthetic_outcomes(plans, loaded.contract)
    commits = []
    started = time.perf_counter()
    for pinput in plans:
        committer.prepare(pinput.partition, fresh=True)
    for pinput, unit, table in tables:
        committer.stage(pinput.partition, unit.id, table)
        if unit is pinput.units[-1]:
            begun = time.perf_counter()
            committer.commit(pinput, started, 0)
            commits.append(time.perf_counter() - begun)
    seconds = time.perf_counter() - started
    return {"docs": docs, "partitions": partitions, "seconds": round(seconds, 3),
            "outcomes_per_s": round(docs / seconds, 1), "commit_s_per_partition": round(sum(commits) / len(commits), 4),
            "commit_s_total": round(sum(commits), 3)}


RAY_CEILING_SCRIPT = r"""
import sys, time, ray, ray.data, pyarrow as pa
n = int(sys.argv[1]); ray.init(logging_level="ERROR")
ctx = ray.data.DataContext.get_current(); ctx.enable_progress_bars = False
ctx.execution_options.preserve_order = False
class Dummy:
    def __call__(self, batch):
        k = batch.num_rows
        return pa.table({"id": pa.array([str(i) for i in batch.column("id").to_pylist()]),
                         "status": pa.array(["row"] * k), "record": pa.array(["x" * 120] * k)})
ds = ray.data.range(n, override_num_blocks=max(1, n // 1000)).map_batches(
    Dummy, batch_size=None, batch_format="pyarrow", concurrency=1, num_cpus=0.5)
start = time.perf_counter(); rows = 0; first = None
for b in ds.iter_batches(batch_format="pyarrow", batch_size=None, prefetch_batches=0):
    first = first or time.perf_counter()
    rows += b.num_rows
end = time.perf_counter()
print(rows, end - start, end - first)
"""


def ray_ceiling(cluster: LocalCluster, rows: int) -> dict[str, Any]:
    """Ray Data moving `rows` outcome-shaped rows from one dummy actor to a driver iterating them."""
    done = subprocess.run([sys.executable, "-c", RAY_CEILING_SCRIPT, str(rows)], env=cluster.driver_env(),
                          capture_output=True, text=True, timeout=1800)
    if done.returncode != 0:
        return {"rows": rows, "error": done.stderr.strip().splitlines()[-1:]}
    count, seconds, streaming = (float(v) for v in done.stdout.strip().splitlines()[-1].split())
    return {"rows": int(count), "seconds": round(seconds, 3), "rows_per_s": round(count / seconds, 1),
            "rows_per_s_after_first": round(count / streaming, 1) if streaming > 0 else None}


# -- the whole bench -----------------------------------------------------------------------------------

@contextmanager
def _stopping(cluster: LocalCluster) -> Iterator[None]:
    try:
        yield
    finally:
        cluster.stop()


def run_simulated_bench(out: Path, grid: dict[str, list[int]], batch_size: int = 500, checkpoint_rows: int = 500,
                        simulated: dict[str, Any] | None = None, nodes: int = 1, ceilings: bool = True,
                        ceiling_rows: int | None = None) -> dict[str, Any]:
    out = out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    simulated = simulated or {}
    most = max(a for _, a, _ in grid_cells(grid))
    # Logical CPUs: every actor asks for one, the read tasks none; the cores are the machine's whatever Ray counts.
    per_node = -(-(most + 1) // nodes)
    cluster = LocalCluster([per_node] * nodes)
    cells: list[dict[str, Any]] = []
    report: dict[str, Any] = {"grid": grid, "batch_size": batch_size, "checkpoint_rows": checkpoint_rows,
                              "simulated": simulated, "nodes": nodes, "cores": os.cpu_count(), "cells": cells,
                              "machine": machine()}
    # A SIGTERM (`kill`, a scheduler's stop) unwinds as an exception, so the cluster this bench started is stopped.
    with terminating(), _stopping(cluster):
        for docs, actors, partitions in grid_cells(grid):
            cell = run_cell(out, cluster, docs, actors, partitions, batch_size, checkpoint_rows, simulated)
            cells.append(cell)
            print(json.dumps(cell), flush=True)
            _write(out, report)
        if ceilings:
            top = ceiling_rows or max(d for d, _, _ in grid_cells(grid))
            report["ray_ceiling"] = ray_ceiling(cluster, top)
            report["commit_ceiling"] = commit_ceiling(out, top, 1, checkpoint_rows)
            most_partitions = max(p for _, _, p in grid_cells(grid))
            if most_partitions > 1:
                report["commit_ceiling_partitions"] = commit_ceiling(out, top, most_partitions, checkpoint_rows)
    report["memory"] = _memory(cells)
    _write(out, report)
    return report


def per_node(actors: list[dict[str, Any]], generating_s: float | None) -> dict[str, dict[str, Any]]:
    """Per node (its id's first 8 characters): the actors it held, the documents they generated (from the run
    record; a batch redone after an actor restart counts twice) and documents/s over the run's time from its first
    output to its end (`generating_s`)."""
    nodes: dict[str, dict[str, Any]] = {}
    for actor in actors:
        node = nodes.setdefault(str(actor.get("node"))[:8], {"actors": 0, "documents": 0})
        node["actors"] += 1
        node["documents"] += int(actor.get("documents") or 0)
    for node in nodes.values():
        node["docs_per_s"] = round(node["documents"] / generating_s, 1) if generating_s else None
    return nodes


def grid_cells(grid: dict[str, Any]) -> list[tuple[int, int, int]]:
    """(docs, actors, partitions) of every cell: `grid["cells"]` as given, else the product of its lists (a
    partition holds at least 10 documents)."""
    if grid.get("cells"):
        return [tuple(c) for c in grid["cells"]]  # type: ignore[misc]
    return [(d, a, p) for d in grid["docs"] for p in grid["partitions"] if p <= d // 10 for a in grid["actors"]]


def _memory(cells: list[dict[str, Any]]) -> dict[str, Any]:
    """Driver peak RSS of the largest corpus over the next largest, same actors and partitions (`VmHWM`; and
    without the object store's shared pages, `private_ratio`)."""
    sizes = sorted({c["docs"] for c in cells})
    if len(sizes) < 2:
        return {}
    small, big = sizes[-2], sizes[-1]
    ratios, private = {}, {}
    for c in cells:
        if c["docs"] != big:
            continue
        base = next((b for b in cells if b["docs"] == small and b["actors"] == c["actors"]
                     and b["partitions"] == c["partitions"]), None)
        if base and base["driver_peak_rss_mb"]:
            key = f"{c['actors']}a-{c['partitions']}p"
            ratios[key] = round(c["driver_peak_rss_mb"] / base["driver_peak_rss_mb"], 3)
            if c.get("driver_private_peak_mb") and base.get("driver_private_peak_mb"):
                private[key] = round(c["driver_private_peak_mb"] / base["driver_private_peak_mb"], 3)
    return {"small": small, "big": big, "rss_ratio": ratios, "private_ratio": private}


COLUMNS = [("docs", "docs"), ("actors", "actors"), ("partitions", "partitions"), ("exit", "exit"),
           ("outcomes/s (wall)", "outcomes_per_s"), ("outcomes/s (first outcome → end)", "steady_outcomes_per_s"),
           ("driver CPU µs/outcome", "driver_cpu_us_per_outcome"), ("driver peak RSS MB", "driver_peak_rss_mb"),
           ("plan s", "plan_s"), ("peak staging files", "staging_files_peak"), ("peak staging MB", "staging_mb_peak"),
           ("first commit s", "first_commit_s"), ("wall s", "wall_s")]


def render_markdown(report: dict[str, Any]) -> str:
    lines = [f"# extract bench --simulate: {report['cores']} cores, {report['nodes']} node(s), batch_size "
             f"{report['batch_size']}, checkpoint_rows {report['checkpoint_rows']}, simulated {report['simulated']}",
             "", describe_machine(report.get("machine")), "",
             "| " + " | ".join(c for c, _ in COLUMNS) + " |", "|---" * len(COLUMNS) + "|"]
    for cell in report["cells"]:
        lines.append("| " + " | ".join("" if cell.get(k) is None else str(cell.get(k)) for _, k in COLUMNS) + " |")
    ray_c, commit_c = report.get("ray_ceiling") or {}, report.get("commit_ceiling") or {}
    if ray_c or commit_c:
        best = max((c.get("outcomes_per_s") or 0 for c in report["cells"]), default=0)
        lines += ["", "| ceiling | outcomes/s | detail |", "|---|---|---|",
                  f"| driver stage + commit, local disk, no Ray | {commit_c.get('outcomes_per_s')} | "
                  f"{commit_c.get('docs')} outcomes, commit {commit_c.get('commit_s_per_partition')} s per partition |"]
        part = report.get("commit_ceiling_partitions")
        if part:
            lines.append(f"| the same over {part['partitions']} partitions | {part.get('outcomes_per_s')} | commit "
                         f"{part.get('commit_s_per_partition')} s per partition |")
        lines += [f"| Ray Data, one dummy actor → driver | {ray_c.get('rows_per_s')} | {ray_c.get('rows')} rows; "
                  f"{ray_c.get('rows_per_s_after_first')}/s from the first batch on |",
                  f"| end to end (best cell, wall) | {best} | |"]
    lines += _per_node_lines(report["cells"])
    for cell in report["cells"]:  # the actors' CPU per document beside the (simulated) engine, by stage
        if cell.get("stage_cpu_ms"):
            lines += ["", f"{cell['docs']} documents, {cell['actors']} actor(s):",
                      *stage_lines(cell["stage_cpu_ms"], (20.0, 50.0, 1000.0))]
    mem = report.get("memory") or {}
    if mem:
        lines += ["", f"Driver peak RSS at {mem['big']} documents over {mem['small']}: {mem['rss_ratio']} "
                  f"(goal <= 1.2); without the object store's shared pages (VmRSS - RssShmem, sampled every "
                  f"0.1 s): {mem.get('private_ratio')}."]
    return "\n".join(lines) + "\n"


def _per_node_lines(cells: list[dict[str, Any]]) -> list[str]:
    """Throughput per node, for each cell whose actors sat on more than one node."""
    spread = [c for c in cells if len(c.get("per_node") or {}) > 1]
    if not spread:
        return []
    lines = ["", "| docs | actors | partitions | node | actors on it | documents | documents/s |", "|---" * 7 + "|"]
    for cell in spread:
        for node, n in sorted(cell["per_node"].items()):
            lines.append(f"| {cell['docs']} | {cell['actors']} | {cell['partitions']} | {node} | {n['actors']} | "
                         f"{n['documents']} | {n['docs_per_s']} |")
    return lines


def render_chart(report: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(12, 4))
    for (actors, partitions) in sorted({(c["actors"], c["partitions"]) for c in report["cells"]}):
        mine = sorted((c for c in report["cells"] if c["actors"] == actors and c["partitions"] == partitions),
                      key=lambda c: c["docs"])
        label = f"{actors} actor(s), {partitions} partition(s)"
        axes[0].plot([c["docs"] for c in mine], [c.get("outcomes_per_s") or 0 for c in mine], "o-", label=label)
        axes[1].plot([c["docs"] for c in mine], [c.get("driver_peak_rss_mb") or 0 for c in mine], "o-", label=label)
    for key, style in (("commit_ceiling", "--"), ("ray_ceiling", ":")):
        value = (report.get(key) or {}).get("outcomes_per_s") or (report.get(key) or {}).get("rows_per_s")
        if value:
            axes[0].axhline(value, linestyle=style, color="grey", label=key.replace("_", " "))
    axes[0].set(xscale="log", yscale="log", xlabel="documents", ylabel="outcomes / s (wall)")
    axes[1].set(xscale="log", xlabel="documents", ylabel="driver peak RSS (MB)")
    axes[0].legend(fontsize=7)
    fig.suptitle("extract bench --simulate")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _write(out: Path, report: dict[str, Any]) -> None:
    (out / "bench-sim.json").write_text(json.dumps(report, indent=2))
    (out / "bench-sim.md").write_text(render_markdown(report))
    if report["cells"]:
        render_chart(report, out / "bench-sim.png")
