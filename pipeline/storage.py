"""Where files live: a local folder or S3 (or an S3-compatible store), behind one small interface.

Paths are URIs: `/abs/path` or `s3://bucket/key`. boto3 does listing, small objects (manifests,
markers, and the slices actors stage: one PUT or GET each) and deletes; pyarrow's filesystem reads and
writes the other Parquet files (it is what Ray Data reads with).

S3 endpoint: `storage.endpoint_url` in the config, else AWS_ENDPOINT_URL_S3, else AWS_ENDPOINT_URL.
Credentials come from the standard AWS chain and are never logged or written anywhere.
Transient errors (5xx, throttling, timeouts) are retried with backoff by both clients; a permanent
error (no such bucket, access denied) raises `StorageError` at once, naming the bucket and operation.
Locally, an OS error of a write (a read-only folder, a full disk, a permission refused) is a `StorageError`
naming the path and the cause, and every file a commit writes is fsynced (file and folder) before it is
renamed into place, so a manifest is never durable before the files it names.
"""

from __future__ import annotations

import fnmatch
import os
import shutil
import tempfile
import threading
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlparse

import pyarrow.fs as pafs

RETRY_ATTEMPTS = 8
PERMANENT_S3_ERRORS = {"NoSuchBucket", "AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch",
                       "AllAccessDisabled", "InvalidBucketName", "403", "AuthorizationHeaderMalformed"}


def _file_mode() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


FILE_MODE = _file_mode()  # what open() gives a new file here (the data files pyarrow writes have it)


class StorageError(RuntimeError):
    """A storage operation failed for good (after retries, or at once for a permanent error)."""


def os_error(operation: str, uri: str, exc: OSError) -> StorageError:
    """One line for an OS error of a local write: the path, the cause and what to check."""
    import errno

    cause = exc.strerror or str(exc)
    if exc.filename and str(exc.filename) != uri:
        cause = f"{cause} ({exc.filename})"
    hint = {errno.ENOSPC: "free space on the output's disk", errno.EDQUOT: "raise the disk quota",
            errno.EFBIG: "the file size limit (ulimit -f) was reached", errno.EROFS: "the file system is read-only",
            errno.EACCES: "check the folder's permissions", errno.EPERM: "check the folder's permissions"}
    extra = hint.get(exc.errno or 0)
    return StorageError(f"cannot {operation} {uri}: {cause}" + (f" ({extra})" if extra else ""))


def fsync_path(path: str | Path, directory: bool = False) -> None:
    """Flush a file's (or a folder's entries') data to disk."""
    fd = os.open(path, os.O_RDONLY | (os.O_DIRECTORY if directory else 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@dataclass(frozen=True)
class S3Settings:
    endpoint_url: str | None = None
    region: str | None = None

    @classmethod
    def resolve(cls, endpoint_url: str | None = None, region: str | None = None) -> S3Settings:
        endpoint = endpoint_url or os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
        region = region or os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
        return cls(endpoint_url=endpoint or None, region=region or None)


def is_s3(uri: str) -> bool:
    return uri.startswith("s3://")


def join(base: str, *parts: str) -> str:
    out = base.rstrip("/")
    for part in parts:
        if part:
            out = f"{out}/{part.strip('/')}"
    return out


def has_glob(uri: str) -> bool:
    return any(ch in uri for ch in "*?[")


class Storage(Protocol):
    def list_files(self, prefix: str) -> list[str]: ...
    def exists(self, uri: str) -> bool: ...
    def read_text(self, uri: str) -> str: ...
    def write_text(self, uri: str, text: str) -> None: ...
    def read_bytes(self, uri: str) -> bytes: ...
    def write_bytes(self, uri: str, data: bytes) -> None: ...
    def delete(self, uri: str) -> None: ...
    def delete_prefix(self, prefix: str) -> None: ...
    def glob(self, pattern: str) -> list[str]: ...
    def arrow_fs(self) -> pafs.FileSystem: ...
    def arrow_path(self, uri: str) -> str: ...
    def check_writable(self, prefix: str) -> None: ...
    def atomic_output(self, uri: str, scratch: str | None = None) -> AbstractContextManager[str]: ...
    def size(self, uri: str) -> int | None: ...
    def read_chunks(self, uri: str) -> Iterator[bytes]: ...
    def is_link(self, uri: str) -> bool: ...


class LocalStorage:
    def list_files(self, prefix: str) -> list[str]:
        root = Path(prefix)
        if root.is_file():
            return [str(root)]
        if not root.is_dir():
            return []
        return sorted(str(p) for p in root.rglob("*") if p.is_file())

    def exists(self, uri: str) -> bool:
        return os.path.exists(uri)

    def read_text(self, uri: str) -> str:
        try:
            return Path(uri).read_text()
        except UnicodeDecodeError as exc:
            raise StorageError(f"cannot read {uri}: not UTF-8 text ({exc.reason})") from None
        except OSError as exc:
            raise os_error("read", uri, exc) from None

    def write_text(self, uri: str, text: str) -> None:
        self.write_bytes(uri, text.encode())

    def read_bytes(self, uri: str) -> bytes:
        try:
            return Path(uri).read_bytes()
        except OSError as exc:
            raise os_error("read", uri, exc) from None

    def write_bytes(self, uri: str, data: bytes) -> None:
        """Written whole to a hidden temporary file beside `uri`, fsynced, and renamed onto it (the folder fsynced):
        a reader sees the old file or the new one."""
        path = Path(uri)
        tmp = ""
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
            os.chmod(tmp, FILE_MODE)  # mkstemp makes 0600: manifests get the mode of the data files beside them
            os.replace(tmp, path)
            fsync_path(path.parent, directory=True)  # the rename itself is durable
        except OSError as exc:
            if tmp:
                Path(tmp).unlink(missing_ok=True)
            raise os_error("write", uri, exc) from None

    def delete(self, uri: str) -> None:
        try:
            Path(uri).unlink(missing_ok=True)
        except OSError as exc:
            raise os_error("delete", uri, exc) from None

    def size(self, uri: str) -> int | None:
        """The file's size in bytes, None if there is no such file."""
        try:
            st = os.stat(uri)
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise os_error("stat", uri, exc) from None
        return st.st_size if os.path.isfile(uri) else None

    def read_chunks(self, uri: str) -> Iterator[bytes]:
        try:
            with open(uri, "rb") as handle:
                while piece := handle.read(8 << 20):
                    yield piece
        except OSError as exc:
            raise os_error("read", uri, exc) from None

    def is_link(self, uri: str) -> bool:
        return os.path.islink(uri)

    def delete_prefix(self, prefix: str) -> None:
        shutil.rmtree(prefix, ignore_errors=True)

    def glob(self, pattern: str) -> list[str]:
        import glob

        return sorted(p for p in glob.glob(pattern, recursive=True) if os.path.isfile(p))

    def arrow_fs(self) -> pafs.FileSystem:
        return pafs.LocalFileSystem()

    def arrow_path(self, uri: str) -> str:
        return uri

    def check_writable(self, prefix: str) -> None:
        """Create the output folder and write (then delete) a probe file in it: a read-only output fails here,
        before a run takes the lease or starts Ray."""
        try:
            Path(prefix).mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StorageError(f"cannot create output folder {prefix}: {exc.strerror}") from None
        try:
            fd, probe = tempfile.mkstemp(dir=prefix, prefix=".extract-probe-", suffix=".tmp")
            os.close(fd)
            os.unlink(probe)
        except OSError as exc:
            raise StorageError(f"output folder {prefix} is not writable: {exc.strerror} (check its permissions "
                               "and free space, or set output.uri to another folder)") from None

    @contextmanager
    def atomic_output(self, uri: str, scratch: str | None = None) -> Iterator[str]:
        """A temporary path beside `uri` (hidden, not *.parquet), fsynced and renamed onto it when the block
        succeeds (then the folder is fsynced). An OS error of the write is a `StorageError`."""
        path = Path(uri)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        try:
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise os_error("create the folder of", uri, exc) from None
            try:
                yield str(tmp)
            except OSError as exc:  # the block's own write (pyarrow's message does not name the file)
                raise os_error("write", uri, exc) from None
            try:
                fsync_path(tmp)
                os.replace(tmp, path)
                fsync_path(path.parent, directory=True)
            except OSError as exc:
                raise os_error("write", uri, exc) from None
        finally:
            try:
                tmp.unlink(missing_ok=True)
            except OSError:
                pass


def split_s3(uri: str) -> tuple[str, str]:
    parsed = urlparse(uri)
    return parsed.netloc, parsed.path.lstrip("/")


# Held while an `S3Storage` makes its boto3 client or pyarrow filesystem. A storage is used from several threads at
# once: an actor's batches in flight each write their slice (`pipeline.output.slices`), a commit reads on 8 threads.
# Each thread that found no client made one (8 at once, measured), and boto3 makes them all from its default session,
# which is not safe to use from several threads at once (boto/boto3#1592, #2750). One lock for the process, as that
# session is the process's.
_MAKING_CLIENTS = threading.Lock()


class S3Storage:
    def __init__(self, settings: S3Settings) -> None:
        self.settings = settings
        self._client: Any = None
        self._fs: pafs.S3FileSystem | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {"settings": self.settings, "_client": None, "_fs": None}

    @property
    def client(self) -> Any:
        if self._client is None:
            with _MAKING_CLIENTS:  # threads that find no client yet make one, not one each (see `_MAKING_CLIENTS`)
                if self._client is None:
                    self._client = self._new_client()
        return self._client

    def _new_client(self) -> Any:
        import boto3
        from botocore.config import Config

        return boto3.client(
            "s3",
            endpoint_url=self.settings.endpoint_url,
            region_name=self.settings.region,
            config=Config(retries={"max_attempts": RETRY_ATTEMPTS, "mode": "adaptive"},
                          connect_timeout=10, read_timeout=60),
        )

    @staticmethod
    def _error(operation: str, uri: str, bucket: str, exc: Any, codes: dict[str, str] | None = None) -> StorageError:
        """The StorageError for a botocore ClientError; `codes` renames bare HTTP codes (HEAD has no body)."""
        code = str(exc.response.get("Error", {}).get("Code", ""))
        code = (codes or {}).get(code, code)
        if code in PERMANENT_S3_ERRORS:
            return StorageError(f"S3 {operation} {uri}: {code} (bucket {bucket!r})")
        return StorageError(f"S3 {operation} {uri}: {code or exc}")

    def _call(self, operation: str, uri: str, fn: Any, **kwargs: Any) -> Any:
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            return fn(**kwargs)
        except ClientError as exc:
            raise self._error(operation, uri, kwargs.get("Bucket", "?"), exc) from None
        except BotoCoreError as exc:
            raise StorageError(f"S3 {operation} {uri}: {exc}") from None

    def list_files(self, prefix: str) -> list[str]:
        bucket, key = split_s3(prefix)
        paginator = self.client.get_paginator("list_objects_v2")
        out: list[str] = []
        key_prefix = key if not key or key.endswith("/") else key + "/"
        exact = self.exists(prefix) if key and not key.endswith("/") else False
        if exact:
            return [prefix]
        pages = self._call("list", prefix, lambda **kw: list(paginator.paginate(**kw)), Bucket=bucket,
                           Prefix=key_prefix)
        for page in pages:
            out.extend(f"s3://{bucket}/{obj['Key']}" for obj in page.get("Contents", []))
        return sorted(out)

    def exists(self, uri: str) -> bool:
        from botocore.exceptions import ClientError

        bucket, key = split_s3(uri)
        try:
            self.client.head_object(Bucket=bucket, Key=key)
            return True
        except ClientError as exc:
            if str(exc.response.get("Error", {}).get("Code", "")) in {"404", "NoSuchKey", "NotFound"}:
                return False
            raise self._error("head", uri, bucket, exc) from None

    def read_text(self, uri: str) -> str:
        return self.read_bytes(uri).decode()

    def write_text(self, uri: str, text: str) -> None:
        self.write_bytes(uri, text.encode())

    def read_bytes(self, uri: str) -> bytes:
        """The object in one GET (pyarrow's reader makes two or three requests of a Parquet file: its size, its
        footer, its columns)."""
        bucket, key = split_s3(uri)
        return self._call("get", uri, lambda **kw: self.client.get_object(**kw)["Body"].read(), Bucket=bucket,
                          Key=key)

    def write_bytes(self, uri: str, data: bytes) -> None:
        bucket, key = split_s3(uri)  # a single PUT: readers see the old object or the new one
        self._call("put", uri, self.client.put_object, Bucket=bucket, Key=key, Body=data)

    def size(self, uri: str) -> int | None:
        from botocore.exceptions import ClientError

        bucket, key = split_s3(uri)
        try:
            return int(self.client.head_object(Bucket=bucket, Key=key)["ContentLength"])
        except ClientError as exc:
            if str(exc.response.get("Error", {}).get("Code", "")) in {"404", "NoSuchKey", "NotFound"}:
                return None
            raise self._error("head", uri, bucket, exc) from None

    def read_chunks(self, uri: str) -> Iterator[bytes]:
        bucket, key = split_s3(uri)
        body = self._call("get", uri, self.client.get_object, Bucket=bucket, Key=key)["Body"]
        yield from body.iter_chunks(8 << 20)

    def is_link(self, uri: str) -> bool:
        return False  # S3 has no links

    def delete(self, uri: str) -> None:
        bucket, key = split_s3(uri)
        self._call("delete", uri, self.client.delete_object, Bucket=bucket, Key=key)

    def delete_prefix(self, prefix: str) -> None:
        bucket, _ = split_s3(prefix)
        keys = [split_s3(u)[1] for u in self.list_files(prefix)]
        for start in range(0, len(keys), 1000):
            chunk = [{"Key": k} for k in keys[start:start + 1000]]
            self._call("delete", prefix, self.client.delete_objects, Bucket=bucket,
                       Delete={"Objects": chunk, "Quiet": True})

    def glob(self, pattern: str) -> list[str]:
        bucket, key = split_s3(pattern)
        literal = key
        for i, ch in enumerate(key):
            if ch in "*?[":
                literal = key[:i]
                break
        base = literal.rsplit("/", 1)[0] if "/" in literal else ""
        candidates = self.list_files(f"s3://{bucket}/{base}/" if base else f"s3://{bucket}/")
        return [c for c in candidates if fnmatch.fnmatchcase(split_s3(c)[1], key)]

    def arrow_fs(self) -> pafs.FileSystem:
        if self._fs is None:
            with _MAKING_CLIENTS:
                if self._fs is None:
                    self._fs = self._new_arrow_fs()
        return self._fs

    def _new_arrow_fs(self) -> pafs.S3FileSystem:
        kwargs: dict[str, Any] = {
            "retry_strategy": pafs.AwsStandardS3RetryStrategy(max_attempts=RETRY_ATTEMPTS),
            "connect_timeout": 10,
            "request_timeout": 60,
        }
        if self.settings.region:
            kwargs["region"] = self.settings.region
        endpoint = self.settings.endpoint_url
        if endpoint:
            # pyarrow ignores AWS_ENDPOINT_URL: pass the host and scheme explicitly.
            parsed = urlparse(endpoint)
            kwargs["endpoint_override"] = parsed.netloc or parsed.path
            kwargs["scheme"] = parsed.scheme or "https"
            kwargs.setdefault("region", "us-east-1")
            kwargs["force_virtual_addressing"] = False
        return pafs.S3FileSystem(**kwargs)

    def arrow_path(self, uri: str) -> str:
        bucket, key = split_s3(uri)
        return f"{bucket}/{key}"

    def check_writable(self, prefix: str) -> None:
        from botocore.exceptions import ClientError

        bucket, _ = split_s3(prefix)
        try:
            self.client.head_bucket(Bucket=bucket)
        except ClientError as exc:
            named = {"404": "NoSuchBucket", "403": "AccessDenied"}
            raise self._error("head bucket", prefix, bucket, exc, named) from None

    @contextmanager
    def atomic_output(self, uri: str, scratch: str | None = None) -> Iterator[str]:
        """A scratch key to write; copied onto `uri` only when the block succeeds.

        The copy (server-side, multipart for large objects) makes the new object visible in one step,
        so readers of `uri` see the old object or the new one. A failed block leaves `uri` untouched.
        """
        import uuid

        bucket, key = split_s3(uri)
        base = scratch.rstrip("/") if scratch else f"s3://{bucket}/_tmp"
        tmp = f"{base}/{uuid.uuid4().hex}-{key.rsplit('/', 1)[-1]}"
        try:
            yield tmp
            tmp_bucket, tmp_key = split_s3(tmp)
            self._call("copy", uri, self.client.copy, CopySource={"Bucket": tmp_bucket, "Key": tmp_key},
                       Bucket=bucket, Key=key)
        finally:
            try:
                self.delete(tmp)
            except StorageError:
                pass


def storage_for(uri: str, settings: S3Settings | None = None) -> Storage:
    if is_s3(uri):
        return S3Storage(settings or S3Settings.resolve())
    if "://" in uri and not uri.startswith("file://"):
        raise StorageError(f"{uri}: unsupported scheme (use a local path or s3://bucket/prefix)")
    return LocalStorage()
