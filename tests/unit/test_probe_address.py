"""A RAY_ADDRESS where nothing listens is one clear error at once, not minutes of Ray's own connect retries."""

from __future__ import annotations

import socket

import pytest

from pipeline.lifecycle import ClusterStartError, probe_address


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]  # closed when the block ends: nothing listens there


def test_a_dead_address_fails_at_once_naming_it():
    port = _closed_port()
    with pytest.raises(ClusterStartError, match=rf"RAY_ADDRESS=127.0.0.1:{port}: nothing answers at 127.0.0.1:{port}"):
        probe_address(f"127.0.0.1:{port}", timeout_s=2)


def test_a_listening_address_passes():
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        probe_address(f"127.0.0.1:{server.getsockname()[1]}", timeout_s=2)


@pytest.mark.parametrize("address", ["auto", "local", "ray://127.0.0.1:1", "http://127.0.0.1:1", "127.0.0.1:x"])
def test_other_forms_are_left_to_ray(address):
    probe_address(address, timeout_s=0.5)  # no probe, no error: Ray decides what they mean
