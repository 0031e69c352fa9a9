"""One writer per output: a lease object `OUTPUT/_lease.json`, held by a run, a backfill or a retry.

Per output, not per partition: a run keeps one actor pool across all its partitions and a retry rewrites
several, both write `_runs/` and sweep unpublished files (which would delete another writer's files in
flight). Two jobs that want to write disjoint days at once can use two outputs.

Time comes from the store, never from the writer's clock:
- **Local disk**: an exclusive `flock` on `_lease.json`, which the kernel releases when the holding process
  dies (however it dies). A live holder is never taken over; nothing expires. The file records the holder.
- **S3**: the lease object. Created by a conditional PUT (`If-None-Match: *`); renewed every `ttl/3` by a PUT
  `If-Match` its ETag, which moves its `LastModified`. It has expired when the store's own clock (the `Date`
  of the GET that reads it) is `ttl` past its `LastModified`; then a taker replaces it with a PUT `If-Match`
  the ETag it read, so of two takers exactly one wins. A writer's clock running ahead changes nothing.

Fencing: every acquisition raises the lease's `generation` (kept in the record, which is never deleted: a
release marks it released). Before each publish the holder confirms the lease with the store (`ensure()`: on
S3 a conditional renewal, locally that the file it locked is still the one at the path) and stamps the
manifest with its generation; a publish over a manifest of a newer generation is refused
(`pipeline.output.commit.publish`). A record that cannot be read (empty, corrupt, wrongly typed) is one line
naming the file and how to break it (delete the file), never a traceback.

The holder's identity: run id, host, pid, the kernel's boot id, the pid namespace and a random token per
process; a holder on this host is known dead (S3: taken over before its expiry) only when all of host, boot
id and pid namespace are this process's and its pid no longer runs the process that took the lease.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import secrets
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, fields
from datetime import datetime, timezone
from email.utils import parsedate_to_datetime
from typing import Any

import structlog

from pipeline.output.links import refuse_links_in
from pipeline.output.manifest import LeaseLostError
from pipeline.output.metadata import bounded_json
from pipeline.storage import S3Storage, Storage, StorageError, os_error, split_s3

__all__ = ["Lease", "LeaseHeldError", "LeaseLostError", "LeaseRecord"]

log = structlog.get_logger(__name__)

DEFAULT_TTL_S = 300.0
TTL_ENV = "EXTRACT_LEASE_TTL_S"
PROCESS_TOKEN = secrets.token_hex(8)  # this process, whatever its pid means elsewhere


class LeaseHeldError(RuntimeError):
    """Another live writer holds the output's lease, or its lease record cannot be read."""


def _read_first_line(path: str) -> str:
    try:
        with open(path) as handle:
            return handle.readline().strip()
    except OSError:
        return ""


def identity() -> dict[str, str]:
    """What tells this process apart from every other: host, kernel boot, pid namespace, a random token."""
    try:
        pidns = os.readlink("/proc/self/ns/pid")
    except OSError:
        pidns = ""
    return {"host": socket.gethostname(), "boot_id": _read_first_line("/proc/sys/kernel/random/boot_id"),
            "pidns": pidns, "process": PROCESS_TOKEN}


@dataclass
class LeaseRecord:
    holder: str
    host: str
    pid: int
    token: str
    acquired_at: str
    expires_at: str
    expires_unix: float
    generation: int = 0
    boot_id: str = ""
    pidns: str = ""
    process: str = ""
    ttl_s: float = DEFAULT_TTL_S
    renewals: int = 0  # makes each renewal's body (so its ETag) new
    released: bool = False

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2)

    @classmethod
    def from_json(cls, text: str) -> LeaseRecord | None:
        """The record, or None if `text` is not one (not JSON, a key missing, a value of the wrong type)."""
        try:
            raw = bounded_json(text, "lease record")
        except (ValueError, UnicodeDecodeError):
            return None
        kinds = {"holder": str, "host": str, "pid": int, "token": str, "acquired_at": str, "expires_at": str,
                 "expires_unix": (int, float), "generation": int, "boot_id": str, "pidns": str, "process": str,
                 "ttl_s": (int, float), "renewals": int, "released": bool}
        names = {f.name for f in fields(cls)}
        known = {k: v for k, v in raw.items() if k in names}
        for key, kind in kinds.items():
            if key in known and (not isinstance(known[key], kind) or (kind is not bool and
                                                                       isinstance(known[key], bool))):
                return None
        if "ttl_s" in known and not ttl_in_bounds(known["ttl_s"]):
            return None  # NaN, infinite, under a second or over MAX_TTL_S: a lease that never (or always) expires
        try:
            return cls(**known)
        except TypeError:
            return None


# A lease's time to live: finite, at least a second (renewals every ttl/3), at most a week.
MIN_TTL_S, MAX_TTL_S = 1.0, 7 * 24 * 3600.0


def ttl_in_bounds(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and MIN_TTL_S <= value <= MAX_TTL_S


def ttl_from_env() -> float:
    """EXTRACT_LEASE_TTL_S, or the default; `LeaseHeldError` (exit 5) in one line when it is not a number of
    seconds within the bounds (0 would renew without pause, a negative value would let anyone take the lease)."""
    text = os.environ.get(TTL_ENV)
    if text is None or not text.strip():
        return DEFAULT_TTL_S
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not ttl_in_bounds(value):
        raise LeaseHeldError(f"{TTL_ENV}={text[:40]!r}: the lease's time to live is a number of seconds from "
                             f"{MIN_TTL_S:g} to {MAX_TTL_S:g}; unset it for the default {DEFAULT_TTL_S:g}")
    return value


def holder_died(held: LeaseRecord) -> bool:
    """Whether the lease's holder is a process of this host, boot and pid namespace that no longer runs: a driver
    killed mid-run, whose rerun should not wait out the lease. A pid reused by a process started after the lease
    was taken is not the holder. A holder elsewhere (another host, boot or pid namespace, or a record that does
    not say) is alive until its lease expires."""
    me = identity()
    if held.host != me["host"] or not held.boot_id or held.boot_id != me["boot_id"] or held.pidns != me["pidns"]:
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


def corrupt_message(uri: str, detail: str) -> str:
    remove = f"aws s3 rm {uri}" if uri.startswith("s3://") else f"rm {uri}"
    return (f"output lease {uri} is unreadable ({detail}); if no extract run, backfill or retry is writing this "
            f"output, break the lease with `{remove}` and rerun")


def generation_file(root: str) -> str:
    """Where the output keeps the last lease generation handed out, beside its commits: a lease file deleted
    mid-run does not let the next writer take a generation already given (`published_generation`)."""
    return f"{root.rstrip('/')}/_partitions/_lease_generation"


def published_generation(storage: Storage, root: str) -> int:
    """The newest lease generation the output records (0 if none): in any partition manifest, or handed out (the
    generation file): the floor of the next generation, so a new holder's generation is always a new one."""
    top = 0
    for path in storage.list_files(f"{root.rstrip('/')}/_partitions"):
        if path == generation_file(root):
            top = max(top, _generation_in(storage, path))
        if not path.endswith("/manifest.json"):
            continue
        try:
            value = bounded_json(storage.read_text(path), "partition manifest").get("lease_generation")
        except (ValueError, StorageError, OSError):
            continue
        if isinstance(value, int) and not isinstance(value, bool):
            top = max(top, value)
    return top


def _generation_in(storage: Storage, path: str) -> int:
    try:
        text = storage.read_text(path)
    except (StorageError, OSError):
        return 0
    return int(text) if text.strip().isdigit() and len(text) < 20 else 0


class _LocalBackend:
    """The lease file, locked with `flock` for as long as this process holds the lease."""

    def __init__(self, storage: Storage, path: str) -> None:
        self.storage = storage
        self.path = path
        self.fd: int | None = None

    def acquire(self, make: Callable[[int], LeaseRecord]) -> LeaseRecord:
        os.makedirs(os.path.dirname(self.path) or ".", exist_ok=True)
        refuse_links_in(self._root(), write=True)  # staging, manifests, run records and this file: no link
        for _ in range(5):
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as exc:
                os.close(fd)
                if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                    raise
                raise LeaseHeldError(self._held_message()) from None
            if not self._same_file(fd):  # deleted (the lease broken) between our open and our lock: again
                os.close(fd)
                continue
            previous = LeaseRecord.from_json(os.pread(fd, 1 << 20, 0).decode("utf-8", "replace"))
            floor = max(previous.generation if previous else 0, published_generation(self.storage, self._root()))
            record = make(floor + 1)
            self.fd = fd
            self._write(record)
            return record
        raise LeaseHeldError(f"output lease {self.path}: it kept being replaced while we took it; another writer "
                             "is starting")

    def _root(self) -> str:
        return os.path.dirname(self.path)

    def _same_file(self, fd: int) -> bool:
        try:
            at_path, held = os.stat(self.path), os.fstat(fd)
        except FileNotFoundError:
            return False
        return (at_path.st_dev, at_path.st_ino) == (held.st_dev, held.st_ino)

    def _held_message(self) -> str:
        try:
            with open(self.path, encoding="utf-8", errors="replace") as handle:
                text = handle.read(1 << 20)
        except OSError as exc:
            return corrupt_message(self.path, exc.strerror or str(exc))
        held = LeaseRecord.from_json(text)
        if held is None:
            return corrupt_message(self.path, "locked by a running process, but not a lease record")
        return (f"output {self._root()} is leased by {held.holder} on {held.host} (pid {held.pid}) since "
                f"{held.acquired_at}, for as long as that process runs; wait for it, or write to another output.uri")

    def _write(self, record: LeaseRecord) -> None:
        assert self.fd is not None
        data = record.to_json().encode()
        os.ftruncate(self.fd, 0)
        os.pwrite(self.fd, data, 0)
        os.fsync(self.fd)

    def confirm(self, record: LeaseRecord) -> bool:
        """Whether this process still holds the lease: its locked file is the one at the path."""
        return self.fd is not None and self._same_file(self.fd)

    def renew(self, record: LeaseRecord) -> bool:
        return self.confirm(record)

    def release(self, record: LeaseRecord) -> None:
        if self.fd is None:
            return
        try:
            if self._same_file(self.fd):
                record.released = True
                self._write(record)
        finally:
            os.close(self.fd)  # closing the last descriptor releases the lock
            self.fd = None


class _S3Backend:
    """The lease object, with conditional writes; its age by the store's clock."""

    def __init__(self, storage: S3Storage, uri: str) -> None:
        self.storage = storage
        self.uri = uri
        self.bucket, self.key = split_s3(uri)
        self.etag = ""

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

    def _read(self) -> tuple[str, str, float] | None:
        """(body, ETag, age in seconds by the store's clock: its `Date` less the object's `LastModified`)."""
        from botocore.exceptions import ClientError

        try:
            response = self.storage.client.get_object(Bucket=self.bucket, Key=self.key)
        except ClientError as exc:
            if str(exc.response.get("Error", {}).get("Code", "")) in {"NoSuchKey", "404"}:
                return None
            raise self.storage._error("get lease", self.uri, self.bucket, exc) from None
        body = response["Body"].read().decode("utf-8", "replace")
        date = response.get("ResponseMetadata", {}).get("HTTPHeaders", {}).get("date")
        now = parsedate_to_datetime(date).timestamp() if date else response["LastModified"].timestamp()
        return body, str(response["ETag"]), now - response["LastModified"].timestamp()

    def acquire(self, make: Callable[[int], LeaseRecord], default_ttl: float) -> LeaseRecord:
        for _ in range(5):  # only a race with another taker loops
            current = self._read()
            if current is None:
                record = make(published_generation(self.storage, self.uri.rsplit("/", 1)[0]) + 1)
                if (etag := self._put(record.to_json(), IfNoneMatch="*")) is not None:
                    self.etag = etag
                    return record
                continue
            body, etag, age = current
            held = LeaseRecord.from_json(body)
            if held is None:
                if age <= default_ttl:
                    raise LeaseHeldError(corrupt_message(self.uri, "not a lease record"))
                floor = published_generation(self.storage, self.uri.rsplit("/", 1)[0])
            elif held.released or age > held.ttl_s or holder_died(held):
                floor = held.generation
                if not held.released:
                    log.warning("lease.takeover", holder=held.holder, host=held.host, age_s=round(age, 1))
            else:
                expires = _iso(time.time() + held.ttl_s - age)  # the store's expiry, in this host's terms
                raise LeaseHeldError(
                    f"output {self.uri.rsplit('/', 1)[0]} is leased by {held.holder} on {held.host} (pid {held.pid}) "
                    f"until about {expires} (renewed {age:.0f} s ago by the store's clock); wait for it, or write "
                    "to another output.uri")
            record = make(floor + 1)
            if (new := self._put(record.to_json(), IfMatch=etag)) is not None:
                self.etag = new
                return record
        raise LeaseHeldError(f"output lease {self.uri}: lost five races to take it; another writer is starting")

    def renew(self, record: LeaseRecord) -> bool:
        record.renewals += 1
        etag = self._put(record.to_json(), IfMatch=self.etag)
        if etag is None:
            return False
        self.etag = etag
        return True

    def confirm(self, record: LeaseRecord) -> bool:
        return self.renew(record)  # a conditional write: succeeds only if nobody took the lease since

    def release(self, record: LeaseRecord) -> None:
        record.released = True
        try:
            self._put(record.to_json(), IfMatch=self.etag)  # taken over or gone: not ours to touch
        except StorageError:
            pass


class Lease:
    """`with Lease(storage, layout.lease(), run_id):` holds the output for the block."""

    def __init__(self, storage: Storage, uri: str, holder: str, ttl_s: float | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        self.uri = uri
        self.holder = holder
        self.ttl_s = ttl_s if ttl_s is not None else ttl_from_env()
        if not ttl_in_bounds(self.ttl_s):
            raise LeaseHeldError(f"lease time to live {self.ttl_s!r} s: not from {MIN_TTL_S:g} to {MAX_TTL_S:g}")
        self.storage = storage
        self.clock = clock  # only for the record's informational times; never decides an expiry
        self.backend: Any = _S3Backend(storage, uri) if isinstance(storage, S3Storage) else _LocalBackend(storage, uri)
        self.record: LeaseRecord | None = None
        self.lost: str | None = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def generation(self) -> int | None:
        return self.record.generation if self.record else None

    def _new_record(self, generation: int) -> LeaseRecord:
        now = self.clock()
        me = identity()
        return LeaseRecord(holder=self.holder, host=me["host"], pid=os.getpid(), token=secrets.token_hex(8),
                           acquired_at=_iso(now), expires_at=_iso(now + self.ttl_s), expires_unix=now + self.ttl_s,
                           generation=generation, boot_id=me["boot_id"], pidns=me["pidns"], process=me["process"],
                           ttl_s=self.ttl_s)

    def acquire(self) -> Lease:
        """Take the lease (a free, released or expired one); raise `LeaseHeldError` naming a live holder, or
        naming an unreadable lease file and how to break it."""
        try:
            if isinstance(self.backend, _S3Backend):
                record = self.backend.acquire(self._new_record, self.ttl_s)
            else:
                record = self.backend.acquire(self._new_record)
        except OSError as exc:
            raise os_error("take the lease", self.uri, exc) from None
        self.record, self.lost = record, None
        root = self.uri.rsplit("/", 1)[0]
        self.storage.write_text(generation_file(root), str(record.generation))  # kept beside the commits too
        log.info("lease.acquired", uri=self.uri, generation=record.generation)
        return self

    def renew(self) -> None:
        with self._lock:
            if self.record is None or self.lost:
                return
            if not self.backend.renew(self.record):
                self.lost = f"lease {self.uri} was taken over or deleted; this writer publishes nothing more"
                log.error("lease.lost", uri=self.uri, generation=self.record.generation)

    def ensure(self) -> int:
        """Confirm with the store that this writer still holds the lease (checked before each publish) and return
        its generation; raise `LeaseLostError` if it does not."""
        with self._lock:
            if self.record is not None and not self.lost:
                try:
                    confirmed = self.backend.confirm(self.record)
                except OSError as exc:
                    raise os_error("confirm the lease", self.uri, exc) from None
                if not confirmed:
                    self.lost = f"lease {self.uri} was taken over or deleted; this writer publishes nothing more"
            if self.lost or self.record is None:
                raise LeaseLostError(self.lost or f"lease {self.uri} is not held")
            return self.record.generation

    def release(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        with self._lock:
            # A lost S3 lease is another writer's now: not touched. A local one: our lock is let go either way.
            if self.record is not None and (not self.lost or isinstance(self.backend, _LocalBackend)):
                try:
                    self.backend.release(self.record)
                except OSError as exc:
                    log.warning("lease.release_failed", error=str(exc))
            self.record = None

    def _renew_loop(self) -> None:
        while not self._stop.wait(self.ttl_s / 3):
            try:
                self.renew()
            except (OSError, StorageError) as exc:  # a transient failure: the next renewal tries again
                log.warning("lease.renew_failed", error=str(exc))

    def __enter__(self) -> Lease:
        self.acquire()
        if isinstance(self.backend, _S3Backend):  # a local lock needs no renewal: it lasts as long as the process
            self._thread = threading.Thread(target=self._renew_loop, name="lease-renewal", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
