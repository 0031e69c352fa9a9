"""Ports handed to `ray start`: never the same one twice in a process, even when the kernel offers it again.

CI failed once on `ray start` refusing a worker raylet: its metrics-export and dashboard-agent ports were the same,
because two binds to port 0 in a row had returned the same free port."""

from __future__ import annotations

import re

import pytest

from pipeline.tools import localcluster


class _Kernel:
    """Stands in for binds to port 0: it offers the ports of `offers` in turn, as the kernel may, repeats and all."""

    def __init__(self, offers: list[int]) -> None:
        self.offers = offers

    def socket(self) -> _Kernel:
        return self

    def __enter__(self) -> _Kernel:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def bind(self, address: tuple[str, int]) -> None:
        assert address == ("127.0.0.1", 0)

    def getsockname(self) -> tuple[str, int]:
        return ("127.0.0.1", self.offers.pop(0))


@pytest.fixture
def kernel(monkeypatch: pytest.MonkeyPatch):
    def offering(offers: list[int]) -> _Kernel:
        fake = _Kernel(offers)
        monkeypatch.setattr(localcluster, "socket", fake)
        monkeypatch.setattr(localcluster, "_HANDED_OUT", set())
        return fake
    return offering


def test_a_port_offered_again_is_skipped(kernel) -> None:
    kernel([40001, 40001, 40001, 40002, 40001, 40003])
    assert [localcluster.free_port() for _ in range(3)] == [40001, 40002, 40003]


def test_one_nodes_flags_name_distinct_ports_when_the_kernel_repeats_itself(kernel) -> None:
    kernel([40001, 40001, 40002, 40002, 40003, 40004, 40004, 40005, 40006])
    flags = localcluster.node_port_flags(node_manager=True)
    ports = [int(re.search(r"=(\d+)$", flag).group(1)) for flag in flags]
    assert len(flags) == 6 and len(set(ports)) == 6
    assert any(flag.startswith("--metrics-export-port=") for flag in flags)


def test_it_gives_up_with_a_clear_error_rather_than_looping(kernel) -> None:
    kernel([40001] * 1001)
    assert localcluster.free_port() == 40001
    with pytest.raises(RuntimeError, match="no loopback port left"):
        localcluster.free_port()


def test_real_binds_give_distinct_ports() -> None:
    ports = [localcluster.free_port() for _ in range(200)]
    assert len(set(ports)) == 200
