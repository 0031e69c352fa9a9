"""One writer per output: a lease object `OUTPUT/_lease.json`, held by a run, a backfill or a retry.

Per output, not per partition: a run keeps one actor pool across all its partitions and a retry rewrites
several, both write `_runs/` and sweep unpublished files (which would delete another writer's files in
flight). Two jobs that want to write disjoint days at once can use two outputs.

- Created atomically: on S3 a conditional PUT (`IfNoneMatch="*"`), locally a hard link of a finished
  temporary file (fails if the name exists). A second writer fails at once with `LeaseHeldError`, which
  names the holder, its host and the expiry (exit code 5).
- Renewed by a daemon thread every `ttl/3` while the process lives (S3: PUT `IfMatch` the lease's ETag).
  If a renewal finds the lease gone or taken, the lease is lost: `ensure()` raises and nothing more is
  published.
- A lease whose holder died expires `ttl` seconds after its last renewal and is taken over: on S3 by a PUT
  `IfMatch` the expired object's ETag (exactly one taker wins), locally by renaming the expired file aside
  and checking it is the one that was read.
"""

from __future__ import annotations

import json
import os
import secrets
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import structlog

from pipeline.storage import S3Storage, Storage, StorageError, split_s3

log = structlog.get_logger(__name__)

DEFAULT_TTL_S = 300.0
TTL_ENV = "EXTRACT_LEASE_TTL_S"


class LeaseHeldError(RuntimeError):
    """Another live writer holds the output's lease."""


class LeaseLostError(RuntimeError):
    """This writer's lease expired and was taken over, or was deleted: it must not publish anything more."""


@dataclass
class LeaseRecord:
    holder: str
    host: str
    pid: int
    token: str
    acquired_at: str
    expires_at: str
    expires_unix: float

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2)

    @classmethod
    def from_json(cls, text: str) -> LeaseRecord | None:
        try:
            return cls(**json.loads(text))
        except (json.JSONDecodeError, TypeError):
            return None


def holder_died(held: LeaseRecord) -> bool:
    """Whether the lease's holder is a process of this host that no longer runs: a driver killed mid-run, whose
    rerun should not wait out the lease. A pid reused by a process started after the lease was taken is not
    the holder. A holder on another host is alive until its lease expires."""
    if held.host != socket.gethostname():
        return False
    import psutil

    try:
        started = psutil.Process(held.pid).create_time()
    except psutil.NoSuchProcess:
        return True
    except psutil.Error:
        return False
    try:
        acquired = datetime.fromisoformat(held.acquired_at).timestamp()
    except ValueError:
        return False
    return started > acquired + 1.0


def _iso(unix: float) -> str:
    return datetime.fromtimestamp(unix, timezone.utc).isoformat(timespec="seconds")


class _LocalBackend:
    def __init__(self, path: str) -> None:
        self.path = Path(path)

    def create(self, text: str) -> str | None:
        """Write the lease if no lease exists; return its version, or None if one exists."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(f".{self.path.name}.{secrets.token_hex(4)}.tmp")
        tmp.write_text(text)
        try:
            os.link(tmp, self.path)
            return "local"
        except FileExistsError:
            return None
        finally:
            tmp.unlink(missing_ok=True)

    def read(self) -> tuple[str, str] | None:
        try:
            return self.path.read_text(), "local"
        except FileNotFoundError:
            return None

    def replace(self, text: str, version: str, expected_token: str, takeover: bool) -> str | None:
        """Overwrite the lease if it still carries `expected_token`. A renewal replaces it in one rename; a
        takeover first renames the expired file aside, so of two takers only one gets it."""
        if not takeover:
            current = self.read()
            if current is None or (record := LeaseRecord.from_json(current[0])) is None or \
                    record.token != expected_token:
                return None
            tmp = self.path.with_name(f".{self.path.name}.{secrets.token_hex(4)}.tmp")
            tmp.write_text(text)
            os.replace(tmp, self.path)
            return "local"
        aside = self.path.with_name(f".{self.path.name}.{secrets.token_hex(4)}.old")
        try:
            os.rename(self.path, aside)
        except FileNotFoundError:
            return None
        record = LeaseRecord.from_json(aside.read_text())
        if record is None or record.token != expected_token:  # not the lease we read: put it back
            try:
                os.link(aside, self.path)
            except FileExistsError:
                pass
            aside.unlink(missing_ok=True)
            return None
        aside.unlink(missing_ok=True)
        return self.create(text)

    def delete(self, version: str, token: str) -> None:
        current = self.read()
        if current and (record := LeaseRecord.from_json(current[0])) and record.token == token:
            self.path.unlink(missing_ok=True)


class _S3Backend:
    def __init__(self, storage: S3Storage, uri: str) -> None:
        self.storage = storage
        self.uri = uri
        self.bucket, self.key = split_s3(uri)

    def _put(self, text: str, **condition: str) -> str | None:
        from botocore.exceptions import ClientError

        try:
            response = self.storage.client.put_object(Bucket=self.bucket, Key=self.key, Body=text.encode(),
                                                      **condition)
        except ClientError as exc:
            code = str(exc.response.get("Error", {}).get("Code", ""))
            if code in {"PreconditionFailed", "412", "ConditionalRequestConflict", "409", "NoSuchKey", "404"}:
                return None
            raise self.storage._error("put lease", self.uri, self.bucket, exc) from None
        return str(response["ETag"])

    def create(self, text: str) -> str | None:
        return self._put(text, IfNoneMatch="*")

    def read(self) -> tuple[str, str] | None:
        from botocore.exceptions import ClientError

        try:
            response = self.storage.client.get_object(Bucket=self.bucket, Key=self.key)
        except ClientError as exc:
            if str(exc.response.get("Error", {}).get("Code", "")) in {"NoSuchKey", "404"}:
                return None
            raise self.storage._error("get lease", self.uri, self.bucket, exc) from None
        return response["Body"].read().decode(), str(response["ETag"])

    def replace(self, text: str, version: str, expected_token: str, takeover: bool) -> str | None:
        return self._put(text, IfMatch=version)

    def delete(self, version: str, token: str) -> None:
        from botocore.exceptions import ClientError

        try:
            self.storage.client.delete_object(Bucket=self.bucket, Key=self.key, IfMatch=version)
        except ClientError:
            pass  # taken over or gone: not ours to delete


class Lease:
    """`with Lease(storage, layout.lease(), run_id):` holds the output for the block."""

    def __init__(self, storage: Storage, uri: str, holder: str, ttl_s: float | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        self.uri = uri
        self.holder = holder
        self.ttl_s = ttl_s if ttl_s is not None else float(os.environ.get(TTL_ENV, DEFAULT_TTL_S))
        self.clock = clock
        self.backend: Any = _S3Backend(storage, uri) if isinstance(storage, S3Storage) else _LocalBackend(uri)
        self.record: LeaseRecord | None = None
        self.version = ""
        self.lost: str | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _new_record(self) -> LeaseRecord:
        now = self.clock()
        return LeaseRecord(holder=self.holder, host=socket.gethostname(), pid=os.getpid(),
                           token=self.record.token if self.record else secrets.token_hex(8),
                           acquired_at=self.record.acquired_at if self.record else _iso(now),
                           expires_at=_iso(now + self.ttl_s), expires_unix=now + self.ttl_s)

    def acquire(self) -> Lease:
        """Take the lease, or an expired one; raise `LeaseHeldError` naming a live holder."""
        for _ in range(5):  # only a race with another taker loops
            record = self._new_record()
            version = self.backend.create(record.to_json())
            if version is None:
                current = self.backend.read()
                if current is None:
                    continue  # released between our create and our read
                held = LeaseRecord.from_json(current[0])
                if held is not None and held.expires_unix > self.clock() and not holder_died(held):
                    raise LeaseHeldError(
                        f"output {self.uri.rsplit('/', 1)[0]} is leased by {held.holder} on {held.host} "
                        f"(pid {held.pid}) until {held.expires_at}; wait for it, or write to another output.uri")
                log.warning("lease.takeover", holder=held.holder if held else "?",
                            expired_at=held.expires_at if held else "?")
                version = self.backend.replace(record.to_json(), current[1], held.token if held else "", True)
                if version is None:
                    continue
            self.record, self.version = record, version
            log.info("lease.acquired", uri=self.uri, expires_at=record.expires_at)
            return self
        raise LeaseHeldError(f"output lease {self.uri}: lost five races to take it; another writer is starting")

    def renew(self) -> None:
        if self.record is None or self.lost:
            return
        record = self._new_record()
        version = self.backend.replace(record.to_json(), self.version, self.record.token, False)
        if version is None:
            self.lost = f"lease {self.uri} was taken over or deleted"
            log.error("lease.lost", uri=self.uri)
            return
        self.record, self.version = record, version

    def ensure(self) -> None:
        """Raise `LeaseLostError` if this writer no longer holds the lease (checked before each publish)."""
        if self.lost:
            raise LeaseLostError(self.lost)

    def release(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if self.record is not None and not self.lost:
            self.backend.delete(self.version, self.record.token)
        self.record = None

    def _renew_loop(self) -> None:
        while not self._stop.wait(self.ttl_s / 3):
            try:
                self.renew()
            except (OSError, StorageError) as exc:  # a transient failure: the next renewal tries again
                log.warning("lease.renew_failed", error=str(exc))

    def __enter__(self) -> Lease:
        self.acquire()
        self._thread = threading.Thread(target=self._renew_loop, name="lease-renewal", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
