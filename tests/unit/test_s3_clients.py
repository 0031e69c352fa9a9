"""An `S3Storage` used from several threads at once makes one boto3 client and one pyarrow filesystem.

An actor's batches in flight each write their slice through the storage the driver pickled to it, and a commit reads
on 8 threads: each thread that found no client made one of its own, all at once from boto3's default session, which
is not safe to share between threads. Nothing here talks to a server: making a client sends no request."""

from __future__ import annotations

import pickle
import threading
from collections.abc import Callable
from typing import Any

import pytest

from pipeline.storage import S3Settings, S3Storage

THREADS = 8


def _at_once(make: Callable[[], Any]) -> list[Any]:
    """`make()` on `THREADS` threads released together; what each got."""
    barrier = threading.Barrier(THREADS)
    got: list[Any] = []
    errors: list[BaseException] = []

    def one() -> None:
        barrier.wait()
        try:
            got.append(make())
        except BaseException as exc:  # noqa: BLE001 - reported by the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=one) for _ in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    return got


@pytest.fixture
def storage(monkeypatch: pytest.MonkeyPatch) -> S3Storage:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "test")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "test")
    # As an actor gets it: pickled by the driver, without its client or filesystem.
    return pickle.loads(pickle.dumps(S3Storage(S3Settings("http://127.0.0.1:9", "us-east-1"))))


@pytest.mark.parametrize("round_", range(3))  # the first round also makes boto3's default session
def test_threads_that_find_no_client_all_use_the_one_made(storage: S3Storage, round_: int) -> None:
    clients = _at_once(lambda: storage.client)
    assert len({id(c) for c in clients}) == 1
    assert clients[0] is storage.client


def test_threads_that_find_no_filesystem_all_use_the_one_made(storage: S3Storage) -> None:
    filesystems = _at_once(storage.arrow_fs)
    assert len({id(f) for f in filesystems}) == 1
    assert filesystems[0] is storage.arrow_fs()
