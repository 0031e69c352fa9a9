"""Transient S3 errors are retried with backoff; permanent ones fail at once, naming the bucket.

A fault-injecting HTTP proxy on loopback sits in front of moto's real S3 API: it answers the first
requests with 503 SlowDown (or always 403 AccessDenied for one bucket) and forwards the rest.
"""

from __future__ import annotations

import http.client
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlparse

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipeline.storage import S3Settings, S3Storage, StorageError
from tests.conftest import s3_client

SLOW_DOWN = (b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>SlowDown</Code>'
             b"<Message>Please reduce your request rate.</Message></Error>")
DENIED = (b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>AccessDenied</Code>'
          b"<Message>Access Denied</Message></Error>")


class _FaultHandler(BaseHTTPRequestHandler):
    """Forwards each request to the proxy's upstream, or answers it with the fault the proxy is set to inject."""

    proxy: FaultProxy
    protocol_version = "HTTP/1.1"  # answers `Expect: 100-continue`, which the AWS C++ SDK sends

    def log_message(self, *args) -> None:
        pass

    def _body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() != "chunked":
            return self.rfile.read(int(self.headers.get("Content-Length") or 0))
        chunks = []
        while True:
            size = int(self.rfile.readline().split(b";")[0].strip(), 16)
            if size == 0:
                self.rfile.readline()
                return b"".join(chunks)
            chunks.append(self.rfile.read(size))
            self.rfile.readline()

    def _handle(self) -> None:
        body = self._body()
        with self.proxy.lock:
            self.proxy.requests += 1
            inject = self.proxy.fail_next > 0
            if inject:
                self.proxy.fail_next -= 1
                self.proxy.failures += 1
        if self.path.lstrip("/").split("/", 1)[0].split("?")[0] == self.proxy.denied_bucket:
            return self._reply(403, DENIED)
        if inject:
            return self._reply(503, SLOW_DOWN)
        conn = http.client.HTTPConnection(self.proxy.upstream.hostname, self.proxy.upstream.port, timeout=30)
        headers = {k: v for k, v in self.headers.items()
                   if k.lower() not in {"host", "transfer-encoding", "expect", "content-length"}}
        headers["Host"] = self.proxy.upstream.netloc
        headers["Content-Length"] = str(len(body))
        conn.request(self.command, self.path, body=body, headers=headers)
        response = conn.getresponse()
        data = response.read()
        self.send_response(response.status)
        for key, value in response.getheaders():
            if key.lower() not in {"transfer-encoding", "connection", "content-length"}:
                self.send_header(key, value)
        # A HEAD answer carries the object's length, not its own (empty) body's.
        length = response.getheader("Content-Length") if self.command == "HEAD" else None
        self.send_header("Content-Length", length or str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def _reply(self, status: int, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/xml")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _handle


class FaultProxy:
    def __init__(self, upstream: str) -> None:
        self.upstream = urlparse(upstream)
        self.fail_next = 0
        self.denied_bucket = "locked"
        self.requests = 0
        self.failures = 0
        self.lock = threading.Lock()
        handler = type("Handler", (_FaultHandler,), {"proxy": self})
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()


@pytest.fixture(scope="module")
def proxy(s3_endpoint):
    client = s3_client(s3_endpoint)
    client.create_bucket(Bucket="flaky")
    client.create_bucket(Bucket="locked")
    fault = FaultProxy(s3_endpoint)
    yield fault
    fault.close()


@pytest.fixture
def no_retry_waits(monkeypatch):
    """botocore's waits between attempts taken out; which errors it retries, and how often, are left as they are.
    The product's client (`retries: adaptive`, 8 attempts) waits after each SlowDown (up to 1, 2, 4 s: a
    throttling error's backoff) and its rate limiter then holds the next requests: 13-18 s of this test's wall on
    2 cores (2026-12-07), for nothing the test checks (a timed assertion would not belong here anyway). Neither wait
    is a botocore setting: both are patched here, by name, so a botocore that renames them fails this test."""
    from botocore.retries import bucket, standard

    monkeypatch.setattr(standard.ExponentialBackoff, "delay_amount", lambda self, context: 0.0)
    monkeypatch.setattr(bucket.TokenBucket, "acquire", lambda self, amount=1, block=True: True)


def test_boto3_operations_retry_through_slowdowns(proxy, no_retry_waits):
    storage = S3Storage(S3Settings(endpoint_url=proxy.url, region="us-east-1"))
    proxy.fail_next, proxy.failures = 3, 0
    storage.write_text("s3://flaky/a/manifest.json", '{"ok": true}')
    assert proxy.failures == 3
    proxy.fail_next = 2
    assert storage.read_text("s3://flaky/a/manifest.json") == '{"ok": true}'
    proxy.fail_next = 2
    assert storage.list_files("s3://flaky/a/") == ["s3://flaky/a/manifest.json"]


def test_pyarrow_reads_and_writes_retry_through_slowdowns(proxy):
    storage = S3Storage(S3Settings(endpoint_url=proxy.url, region="us-east-1"))
    fs = storage.arrow_fs()
    table = pa.table({"doc_id": ["x", "y"], "text": ["one", "two"]})
    proxy.fail_next, proxy.failures = 2, 0
    pq.write_table(table, "flaky/docs/part-0.parquet", filesystem=fs)
    proxy.fail_next = 2
    assert pq.read_table("flaky/docs/part-0.parquet", filesystem=fs).equals(table)
    assert proxy.failures == 4


def test_permanent_error_fails_at_once_naming_the_bucket(proxy):
    storage = S3Storage(S3Settings(endpoint_url=proxy.url, region="us-east-1"))
    before = proxy.requests
    with pytest.raises(StorageError, match="AccessDenied.*'locked'"):
        storage.read_text("s3://locked/secret.json")
    assert proxy.requests - before == 1  # not retried
    with pytest.raises(StorageError, match="AccessDenied.*'locked'"):
        storage.check_writable("s3://locked/out")
