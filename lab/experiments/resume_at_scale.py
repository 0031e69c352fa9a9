"""Resume at scale (issue 27, item 4): SIGKILL the driver at about half of a simulated corpus, rerun, and measure
what was done twice and how long the rerun takes to start generating.

    nice -n 19 .venv/bin/python lab/experiments/resume_at_scale.py --docs 1000000 --actors 4 --batch-size 1000 \
        --checkpoint-rows 1000 --batches-in-flight 1

A loopback Ray cluster (pipeline.tools.localcluster.LocalCluster), the simulated engine answering at once (or as
--engine JSON says). Both runs log at debug level as JSON lines (EXTRACT_LOG_LEVEL=debug, EXTRACT_LOG_FORMAT=json):
the driver logs every batch it receives (`driver.batch`), each actor every batch it finishes (`actor.batch`, in
its Ray worker log under the cluster's session folder). The first run is SIGKILLed once the staged units plus
committed partitions hold half the documents. Then, once the first run's actors are gone:
- kept: the documents staged or committed (read back from the output): the slices the actors staged as they
  finished their batches (`pipeline.output.slices`; those whose receipts never reached the driver are
  `first_driver.kept_not_received`), or a unit's file;
- finished by the actors and not kept: every `actor.batch` of the first run, less the kept documents; these were
  generated and are generated again by the rerun (in Ray Data's queues or the driver's buffers at the kill, or
  finished by an actor after it);
- interrupted: a batch an actor had in flight at the kill and never finished: started (`actor.batch_start`) and
  not finished, counted exactly. Logs from before that line bound it instead: an actor has at most
  `batches_in_flight` batches in flight, less those it finished after the kill, and redone is at least the first
  figure and at most the sum of both.
The rerun is timed from its launch to each actor ready (the run manifest's `ready_unix`) and to the first batch's
generation start (its earliest `actor.batch` `started_unix`); its manifest is read, the documents it received
counted, and every document checked to be committed exactly once. Writes OUT/resume-DOCS-Aa-Pp.json.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import duckdb

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from pipeline.tools.simbench import (  # noqa: E402 - after the path
    LocalCluster,
    _run_manifest,
    driver_command,
    make_corpus,
    run_driver,
    staged_rows,
    write_config,
)

# -- the logs: pure ------------------------------------------------------------------------------------------

def events(text: str, name: str) -> list[dict[str, Any]]:
    """The JSON log objects of `text` whose event is `name`, each with `unix` (its timestamp) added. A line may hold
    several objects (the driver's own line and an actor's forwarded one, written to one file by two streams);
    what is not JSON (Ray's own lines, a line cut by a SIGKILL) is skipped."""
    decoder, found = json.JSONDecoder(), []
    for line in text.splitlines():
        if f'"{name}"' not in line:
            continue
        at = line.find("{")
        while at != -1:
            try:
                event, end = decoder.raw_decode(line, at)
            except ValueError:
                at = line.find("{", at + 1)
                continue
            at = line.find("{", end)
            if isinstance(event, dict) and event.get("event") == name:
                stamp = event.get("timestamp")
                event["unix"] = datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp() if stamp else None
                found.append(event)
    return found


def redone(batches: list[dict[str, Any]], kill_unix: float, kept: int, actors: int, batches_in_flight: int,
           batch_size: int, starts: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """What the first run generated and the rerun generates again, from its actors' `actor.batch` events (each with
    `actor`, `documents` and `unix`, the time it was logged), the time of the kill and the documents kept.

    Finished and not kept: everything the actors finished, less what was kept (the rerun redoes exactly the
    documents not kept). Interrupted: an actor holds at most `batches_in_flight` batches; one it finished after
    the kill was in flight and is counted as finished, so at most `batches_in_flight - finished after the kill`
    batches of each actor were cut off (an actor that never logged counts fully).

    With `starts` (the first run's `actor.batch_start` events), the interrupted documents are counted: started
    less finished, per actor; `redone` is then exact and the goal is judged on it."""
    finished = sum(int(b["documents"]) for b in batches)
    after: dict[str, int] = {}
    for b in batches:
        if b.get("unix") is not None and b["unix"] > kill_unix:
            after[b["actor"]] = after.get(b["actor"], 0) + 1
    seen = {b["actor"] for b in batches}
    cut_batches = sum(max(0, batches_in_flight - after.get(a, 0)) for a in seen)
    cut_batches += max(0, actors - len(seen)) * batches_in_flight
    not_kept = max(0, finished - kept)
    exact = _interrupted(batches, starts) if starts else {}
    if exact:
        exact["redone"] = not_kept + exact["interrupted"]
    return {**exact, "finished_by_actors": finished, "finished_after_kill": sum(
                int(b["documents"]) for b in batches if b.get("unix") is not None and b["unix"] > kill_unix),
            "finished_not_kept": not_kept, "interrupted_at_most": cut_batches * batch_size,
            "redone_at_least": not_kept, "redone_at_most": not_kept + cut_batches * batch_size,
            "goal_at_most": actors * batch_size,
            "goal_met": (exact["redone"] if exact else not_kept + cut_batches * batch_size) <= actors * batch_size}


def _interrupted(batches: list[dict[str, Any]], starts: list[dict[str, Any]]) -> dict[str, Any]:
    """Documents started and never finished, per actor and in all, and the batches they were in."""
    per_actor: dict[str, list[int]] = {}
    for sign, events_ in ((1, starts), (-1, batches)):
        for event in events_:
            counts = per_actor.setdefault(event["actor"], [0, 0])
            counts[0] += sign * int(event["documents"])
            counts[1] += sign
    cut = {actor: {"documents": d, "batches": b} for actor, (d, b) in sorted(per_actor.items()) if d or b}
    return {"interrupted": sum(c["documents"] for c in cut.values()),
            "interrupted_batches": sum(c["batches"] for c in cut.values()), "interrupted_per_actor": cut}


# -- the runs ------------------------------------------------------------------------------------------------

class _StagedCounter:
    """Documents staged plus committed (`staged_rows`: a unit's file, or else its slices), each unit file's footer
    read once (a poll reads only new files)."""

    def __init__(self, output: Path) -> None:
        self.output, self.footers = output, {}

    def __call__(self) -> int:
        return staged_rows(self.output, self.footers)


def run_and_kill(command: list[str], env: dict[str, str], output: Path, log: Path, kill_at: int,
                 poll_s: float = 0.5) -> dict[str, Any]:
    """The driver, SIGKILLed once `kill_at` documents are staged or committed (polled every `poll_s`)."""
    counter = _StagedCounter(output)
    started = time.time()
    with log.open("w") as handle:
        proc = subprocess.Popen(command, env=env, stdout=handle, stderr=subprocess.STDOUT, cwd=ROOT)
    killed_at = kill_unix = None
    while proc.poll() is None:
        staged = counter()
        if staged >= kill_at:
            os.kill(proc.pid, signal.SIGKILL)
            kill_unix, killed_at = time.time(), staged
            break
        time.sleep(poll_s)
    _, status, _ = os.wait4(proc.pid, 0)
    return {"exit": os.waitstatus_to_exitcode(status), "launch_unix": started, "kill_unix": kill_unix,
            "killed_at_staged_or_committed": killed_at, "wall_s": round(time.time() - started, 2)}


def worker_logs(cluster: LocalCluster) -> str:
    """Every Ray worker's stderr of the cluster's session so far (the actors' structlog lines)."""
    folder = Path(cluster.temp_dir) / "session_latest" / "logs"
    return "\n".join(p.read_text(errors="replace") for p in sorted(folder.glob("worker-*.err")))


def wait_actors_gone(cluster: LocalCluster, since: float, timeout_s: float = 120.0) -> float:
    """Wait until no worker log of the cluster has grown for 5 s (the dead driver's actors are gone, or idle);
    the seconds waited."""
    folder = Path(cluster.temp_dir) / "session_latest" / "logs"
    last_change, sizes = time.time(), {}
    while time.time() - since < timeout_s:
        now = {p: p.stat().st_size for p in folder.glob("worker-*")}
        if now != sizes:
            sizes, last_change = now, time.time()
        elif time.time() - last_change >= 5.0:
            break
        time.sleep(1.0)
    return round(time.time() - since, 1)


def kept_documents(output: Path) -> int:
    return staged_rows(output)


def exactly_once(output: Path) -> tuple[int, int]:
    """Committed rows plus dead letters, and their distinct document ids."""
    return duckdb.connect().execute(
        f"SELECT count(*), count(DISTINCT doc_id) FROM (SELECT doc_id FROM read_parquet('{output}/rows/**/*.parquet')"
        f" UNION ALL SELECT doc_id FROM read_parquet('{output}/dead_letters/**/*.parquet'))").fetchone()


# -- the measurement -----------------------------------------------------------------------------------------

def rerun_start(manifest: dict[str, Any], logs_text: str, launch_unix: float) -> dict[str, Any]:
    """The rerun's start-up: seconds from its launch to each actor ready and to the first generation."""
    ready = sorted(a["ready_unix"] - launch_unix for a in manifest.get("actors") or [] if a.get("ready_unix"))
    batches = [b for b in events(logs_text, "actor.batch") if (b.get("unix") or 0) > launch_unix]
    starts = [b["started_unix"] for b in batches if b.get("started_unix")]
    return {"actors_ready_s": [round(s, 2) for s in ready],
            "first_generation_s": round(min(starts) - launch_unix, 2) if starts else None,
            "batches": len(batches), "documents": sum(int(b["documents"]) for b in batches)}


def measure(args: argparse.Namespace, cell: Path, config: Path, info: dict[str, Any]) -> dict[str, Any]:
    output = cell / "output"
    cluster = LocalCluster([args.actors + 1])
    try:
        env = {**cluster.driver_env(), "EXTRACT_LOG_LEVEL": "debug", "EXTRACT_LOG_FORMAT": "json"}
        first = run_and_kill(driver_command(config, info), env, output, cell / "first.log", args.docs // 2)
        first["waited_for_actors_s"] = wait_actors_gone(cluster, time.time())
        kept = kept_documents(output)
        first_logs = worker_logs(cluster)
        received = sum(int(e["rows"]) for e in events((cell / "first.log").read_text(errors="replace"),
                                                      "driver.batch"))
        first["kept_not_received"] = max(0, kept - received)  # staged by an actor, its receipt never received
        launch = time.time()
        second = run_driver(driver_command(config, info), env, output, cell / "second.log")
        rerun_logs = worker_logs(cluster)
    finally:
        cluster.stop()
    (cell / "first-workers.log").write_text(first_logs)
    manifest = _run_manifest(output)
    batches = events(first_logs, "actor.batch")
    accounting = redone(batches, first["kill_unix"] or launch, kept, args.actors, args.batches_in_flight,
                        args.batch_size, events(first_logs, "actor.batch_start"))
    rerun_received = sum(int(e["rows"]) for e in events((cell / "second.log").read_text(errors="replace"),
                                                        "driver.batch"))
    total, distinct = exactly_once(output)
    return {
        "kept_after_kill": kept, "received_by_driver_before_kill": received,
        "received_not_kept": max(0, received - kept), **accounting,
        "rerun_documents_expected": args.docs - kept, "rerun_documents_received": rerun_received,
        "rerun_exit": second["exit"], "rerun_wall_s": second["wall_s"],
        "rerun_start": rerun_start(manifest, rerun_logs, launch),
        "rerun_first_output_s": (manifest.get("timings") or {}).get("first_output_s"),
        "rerun_timings": manifest.get("timings"), "rerun_actors": manifest.get("actors"),
        "committed": total, "distinct": distinct, "exactly_once": total == distinct == args.docs,
        "first_driver": first, "second_driver": second,
    }


def recount(report: dict[str, Any], cell: Path) -> dict[str, Any]:
    """The report's counts again from the cell's saved logs (first.log, second.log, first-workers.log)."""
    first = events((cell / "first.log").read_text(errors="replace"), "driver.batch")
    second = events((cell / "second.log").read_text(errors="replace"), "driver.batch")
    workers_log = (cell / "first-workers.log").read_text(errors="replace")
    batches, starts = events(workers_log, "actor.batch"), events(workers_log, "actor.batch_start")
    kept = report["kept_after_kill"]
    received = sum(int(e["rows"]) for e in first)
    return {**report, "received_by_driver_before_kill": received, "received_not_kept": max(0, received - kept),
            **redone(batches, report["first_driver"]["kill_unix"], kept, report["actors"],
                     report["batches_in_flight"], report["batch_size"], starts),
            "rerun_documents_received": sum(int(e["rows"]) for e in second)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=100_000)
    parser.add_argument("--actors", type=int, default=4)
    parser.add_argument("--partitions", type=int, default=1)
    parser.add_argument("--batch-size", type=int, default=1000)
    parser.add_argument("--checkpoint-rows", type=int, default=1000)
    parser.add_argument("--batches-in-flight", type=int, default=1)
    parser.add_argument("--engine", default="{}", help="model.simulated settings as JSON")
    parser.add_argument("--out", default="out/bench-resume")
    parser.add_argument("--recount", action="store_true", help="recount an earlier cell's saved logs, no run")
    args = parser.parse_args()
    out = (ROOT / args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    if args.recount:
        name = f"resume-{args.docs}-{args.actors}a-{args.partitions}p"
        report = recount(json.loads((out / f"{name}.json").read_text()), out / name)
        return _write(out / f"{name}.json", report)
    corpus = out / "corpus" / f"{args.docs}-{args.partitions}"
    info = make_corpus(corpus, args.docs, args.partitions)
    name = f"resume-{args.docs}-{args.actors}a-{args.partitions}p"
    cell = out / name
    shutil.rmtree(cell, ignore_errors=True)
    cell.mkdir(parents=True)
    config = write_config(cell / "extract.yaml", corpus, info, cell / "output", args.actors, args.batch_size,
                          args.checkpoint_rows, json.loads(args.engine), batches_in_flight=args.batches_in_flight)
    report = {"docs": args.docs, "actors": args.actors, "partitions": args.partitions, "batch_size": args.batch_size,
              "checkpoint_rows": args.checkpoint_rows, "batches_in_flight": args.batches_in_flight,
              **measure(args, cell, config, info)}
    return _write(out / f"{name}.json", report)


def _write(path: Path, report: dict[str, Any]) -> int:
    path.write_text(json.dumps(report, indent=2))
    print(json.dumps({k: v for k, v in report.items() if not isinstance(v, (dict, list))}, indent=2))
    print(json.dumps({"rerun_start": report["rerun_start"]}))
    return 0 if report["exactly_once"] and report["rerun_exit"] == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
