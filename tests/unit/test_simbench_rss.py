"""The simulated bench's driver peak RSS is the driver's own, not its launcher's (Linux's `ru_maxrss` from
`wait4` counts the launcher's RSS at the fork)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from pipeline.tools.simbench import own_peak_rss_kb

pytestmark = pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="needs Linux /proc")


def test_own_peak_rss_of_this_process() -> None:
    assert (own_peak_rss_kb(os.getpid()) or 0) > 0


def test_a_child_peak_is_its_own_not_the_launchers() -> None:
    ballast = bytearray(200 * 2**20)
    ballast[::4096] = b"\x01" * len(ballast[::4096])  # resident: 200 MiB in this process
    child = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    try:
        own = own_peak_rss_kb(child.pid)  # the child waits for its stdin to close: alive here
    finally:
        assert child.stdin is not None
        child.stdin.close()
    _, _, usage = os.wait4(child.pid, 0)
    del ballast
    assert own is not None and own < 100 * 1024
    assert usage.ru_maxrss >= 200 * 1024  # what the bench used to report as the driver's
    assert own_peak_rss_kb(child.pid) is None  # reaped


def test_private_rss_leaves_out_shared_memory_pages() -> None:
    import mmap

    from pipeline.tools.simbench import own_private_rss_kb

    # Written 1 MiB at a time: one 64 MiB bytes object is 64 MiB of private memory too, which the allocator of a
    # process that has run the integration tests (torch, vLLM loaded) kept (the whole 64 MiB counted, in a CI run).
    chunk = b"\x01" * 2**20
    before = own_private_rss_kb(os.getpid())
    shared = mmap.mmap(-1, 64 * 2**20, flags=mmap.MAP_SHARED)  # shared anonymous: counted in RssShmem
    for _ in range(64):
        shared.write(chunk)
    try:
        after = own_private_rss_kb(os.getpid())
        assert before is not None and after is not None
        assert after - before < 32 * 1024  # the 64 MiB of shared pages are not in it
        assert (own_peak_rss_kb(os.getpid()) or 0) - before >= 60 * 1024  # they are in VmHWM
    finally:
        shared.close()
