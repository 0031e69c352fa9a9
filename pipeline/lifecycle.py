"""What a run leaves behind when it dies, and how the next one cleans it up.

A writer holds the output's lease (`pipeline.lease`), so when a run starts, anything another writer left in
the output is a dead writer's:
- hidden temp files of an interrupted write (`.<name>.<pid>.tmp`, `.<name>.<random>.tmp`) are deleted;
- multipart uploads under the output that never completed (S3 keeps and bills them) are aborted;
- run records still saying `running` are marked `failed` ("the driver died"): a run writes its record
  with status `running` when it starts, so even a SIGKILLed run leaves one.
A SIGTERM (a scheduler's stop, `kill`) is turned into an exception in the driver, so the run's own
`finally` writes its record as `failed` before the process exits.

A local Ray cluster started by a driver is recorded (its pids, their start times and the session folder) in
the cache folder; the next run stops the processes of any record whose driver is gone, and only those.
"""

from __future__ import annotations

import atexit
import json
import os
import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import structlog

from pipeline.output.layout import OutputLayout
from pipeline.output.metadata import bounded_json
from pipeline.storage import S3Storage, Storage, StorageError, split_s3
from workers.secrets import redact

log = structlog.get_logger(__name__)

RECENT_RECORDS = 50
STALE_UPLOAD_S = 60.0  # an upload begun this long before our lease cannot be one of ours


class Terminated(BaseException):
    """The driver got SIGTERM: unwinds like KeyboardInterrupt, so `finally` blocks write what they must."""


@contextmanager
def terminating() -> Iterator[None]:
    """Within: SIGTERM raises `Terminated` in the main thread (elsewhere a no-op, as signals need it)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def raise_terminated(signum: int, frame: Any) -> None:
        raise Terminated(f"terminated by signal {signum}")

    previous = signal.signal(signal.SIGTERM, raise_terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def begin(storage: Storage, layout: OutputLayout, record: Any) -> None:
    """At the start of a run that holds the output's lease: clean what dead writers left, then write this
    run's record as `running` (so that a SIGKILL still leaves a record)."""
    clean_temp_files(storage, layout.root)
    abort_stale_uploads(storage, layout.root)
    fail_dead_records(storage, layout, record.run_id)
    storage.write_text(layout.run_manifest(record.run_id), record.to_json())


def clean_temp_files(storage: Storage, root: str, older_than_s: float = STALE_UPLOAD_S) -> int:
    """Delete the hidden `*.tmp` files of interrupted writes under `root` (local output; S3 writes leave none).
    A file written in the last `older_than_s` may be our own lease renewal's, so it is left alone."""
    if isinstance(storage, S3Storage):
        return 0
    removed = 0
    cutoff = time.time() - older_than_s
    for path in storage.list_files(root):
        name = path.rsplit("/", 1)[-1]
        if name.startswith(".") and name.endswith(".tmp"):
            try:
                if os.stat(path).st_mtime < cutoff:
                    os.unlink(path)
                    removed += 1
            except FileNotFoundError:
                pass
    if removed:
        log.info("cleanup.temp_files", removed=removed)
    return removed


def abort_stale_uploads(storage: Storage, root: str, older_than_s: float = STALE_UPLOAD_S) -> int:
    """Abort the multipart uploads under `root` begun before this run (a killed writer's): S3 keeps their parts."""
    if not isinstance(storage, S3Storage):
        return 0
    bucket, prefix = split_s3(root.rstrip("/") + "/")
    try:
        pages = storage.client.get_paginator("list_multipart_uploads").paginate(Bucket=bucket, Prefix=prefix)
        uploads = [u for page in pages for u in page.get("Uploads", [])]
    except Exception as exc:  # noqa: BLE001 - a store without the multipart API: nothing to abort
        log.warning("cleanup.uploads_unlisted", error=str(exc)[:200])
        return 0
    cutoff = time.time() - older_than_s
    aborted = 0
    for upload in uploads:
        if upload["Initiated"].timestamp() < cutoff:
            storage.client.abort_multipart_upload(Bucket=bucket, Key=upload["Key"], UploadId=upload["UploadId"])
            aborted += 1
    if aborted:
        log.info("cleanup.multipart_uploads", aborted=aborted)
    return aborted


def fail_dead_records(storage: Storage, layout: OutputLayout, run_id: str) -> int:
    """Mark `failed` every run record but ours still saying `running`: under the lease, its writer is dead."""
    marked = 0
    records = sorted(p for p in storage.list_files(layout.runs_root()) if p.endswith(".json"))
    for path in records[-RECENT_RECORDS:]:  # run ids sort by start time: a dead run is among the latest
        if path.endswith(f"/{run_id}.json"):
            continue
        try:
            record = bounded_json(storage.read_text(path), "run record")  # a deep or huge one is left alone
        except (ValueError, StorageError, OSError):
            continue
        if isinstance(record, dict) and record.get("status") == "running":
            record["status"] = "failed"
            record["error"] = record.get("error") or f"the run's driver died before it finished (found by {run_id})"
            record["finished_at"] = record.get("finished_at") or datetime.now(timezone.utc).isoformat()
            storage.write_text(path, json.dumps(redact(record), indent=2, default=str))
            marked += 1
    if marked:
        log.warning("cleanup.dead_runs", marked_failed=marked)
    return marked


# -- the local Ray cluster a driver starts ------------------------------------------------------------------


def _records_dir() -> Path:
    from workers.bundled_model import cache_root

    return cache_root() / "ray-drivers"


def _started(pid: int) -> float | None:
    import psutil

    try:
        return psutil.Process(pid).create_time()
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return None


class ClusterStartError(RuntimeError):
    """Ray could not start this driver's local cluster, or reach the one at RAY_ADDRESS: the machine, not the job
    (`extract` says it in one line, exit 3, as for an engine that cannot start)."""

    @classmethod
    def of(cls, error: BaseException, address: str | None) -> ClusterStartError:
        first = next((line.strip() for line in str(error).splitlines() if line.strip()), type(error).__name__)
        if address:
            return cls(f"Ray: could not connect to the cluster at RAY_ADDRESS={address}: {first}")
        return cls(f"Ray: could not start a local cluster: {first}")


def probe_address(address: str, timeout_s: float = 5.0) -> None:
    """`ClusterStartError` at once if nothing listens at a `host:port` RAY_ADDRESS (Ray's own connect retries a dead
    address for minutes before it gives up). Other forms (`auto`, `ray://...`) are left to Ray."""
    import socket

    host, sep, port = address.strip().rpartition(":")
    if not sep or not host or "/" in address or not port.isdigit():
        return
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s).close()
    except OSError as exc:
        raise ClusterStartError(f"Ray: could not connect to the cluster at RAY_ADDRESS={address}: nothing answers "
                                f"at {host}:{port} ({exc.strerror or type(exc).__name__}); is the cluster up "
                                f"(`ray status`), or unset RAY_ADDRESS to run on a local cluster") from exc


def record_ray_processes(session_dir: str | None = "") -> Path | None:
    """Note the processes of the local Ray cluster this driver started (its child processes), to be stopped
    by a later run if this driver dies without stopping them."""
    import psutil

    if session_dir == "":  # the session of the cluster this process started
        from workers.ray_compat import session_dir as ray_session_dir

        session_dir = ray_session_dir()
    me = psutil.Process(os.getpid())
    pids = [{"pid": p.pid, "started": p.create_time()} for p in me.children(recursive=True)]
    if not pids:
        return None
    folder = _records_dir()
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{os.getpid()}.json"
    path.write_text(json.dumps({"driver": {"pid": os.getpid(), "started": me.create_time()},
                                "session_dir": session_dir, "processes": pids}))
    atexit.register(forget_ray_processes)  # a driver that exits normally stops its cluster itself
    return path


def forget_ray_processes() -> None:
    (_records_dir() / f"{os.getpid()}.json").unlink(missing_ok=True)


def stop_orphaned_ray(records: Path | None = None) -> int:
    """Stop the recorded Ray processes of drivers that are gone: a recorded pid is killed only if the process
    still has its recorded start time (so a reused pid is never touched); also any process whose command line
    names the dead driver's own session folder."""
    import psutil

    folder = records or _records_dir()
    stopped = 0
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        try:
            record = json.loads(path.read_text())
            driver = record["driver"]
        except (OSError, ValueError, KeyError, TypeError):
            path.unlink(missing_ok=True)
            continue
        if _started(driver["pid"]) == driver["started"]:
            continue  # that driver is alive: its cluster is its own business
        victims = [psutil.Process(p["pid"]) for p in record.get("processes", []) if _started(p["pid"]) == p["started"]]
        session = record.get("session_dir")
        if session:
            for proc in psutil.process_iter(["cmdline"]):
                if proc.pid not in {v.pid for v in victims} and session in " ".join(proc.info["cmdline"] or []):
                    victims.append(proc)
        for proc in victims:
            try:
                proc.kill()
                stopped += 1
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                pass
        path.unlink(missing_ok=True)
    if stopped:
        log.warning("cleanup.orphaned_ray", stopped=stopped)
    return stopped
