"""A CPU actor gives malloc's free pages back to the kernel, and its KV cache holds no more sequences than the
engine runs at once (issue 27: an actor's peak RSS)."""

from __future__ import annotations

import ctypes
import json
import os
import sys

import pytest

from workers.memory import (
    CPU_BLOCK_SIZE,
    GIB,
    KvNeed,
    KvShape,
    cpu_kv_arguments,
    keep_trimmed,
    release_free_memory,
)

glibc_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="malloc_trim is glibc's")
SMOL = KvShape(layers=30, kv_heads=3, head_dim=64, dtype_bytes=2)


def _rss() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


@glibc_only
def test_freed_small_allocations_go_back_to_the_kernel():
    libc = ctypes.CDLL("libc.so.6")
    libc.malloc.restype = ctypes.c_void_p
    libc.malloc.argtypes = [ctypes.c_size_t]
    libc.free.argtypes = [ctypes.c_void_p]
    size, count = 64 << 10, 1600  # 100 MiB in chunks below malloc's mmap threshold: it keeps them when freed
    chunks = [libc.malloc(size) for _ in range(count)]
    for chunk in chunks:
        ctypes.memset(chunk, 1, size)
    for chunk in chunks[:-1]:  # the last one stays: free() cannot shrink the heap past it on its own
        libc.free(chunk)
    held = _rss()
    assert release_free_memory() is True
    assert held - _rss() > 50 << 20
    libc.free(chunks[-1])


@glibc_only
def test_an_actor_keeps_trimming_on_a_daemon_thread_unless_told_not_to():
    thread = keep_trimmed(60.0)
    assert thread is not None and thread.daemon and thread.is_alive()
    assert keep_trimmed(0) is None


def test_the_kv_cache_holds_no_more_sequences_than_max_num_seqs(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"num_hidden_layers": 30, "num_attention_heads": 9,
                                                      "num_key_value_heads": 3, "head_dim": 64,
                                                      "torch_dtype": "bfloat16"}))
    need = KvNeed(prompt_tokens=1258, max_tokens=512, lookahead=8, shared_tokens=1014, documents=52)
    per_token = SMOL.bytes_per_token * CPU_BLOCK_SIZE
    _, queued = cpu_kv_arguments(str(tmp_path), 4096, 64, {}, free=64 * GIB, need=need, share_prefix=True)
    args, capped = cpu_kv_arguments(str(tmp_path), 4096, 64, {"max_num_seqs": 16}, free=64 * GIB, need=need,
                                    share_prefix=True)
    assert (queued.sequences, capped.sequences) == (52, 16)  # the run's documents, then the engine's limit
    assert args["kv_cache_memory_bytes"] == capped.bytes == (16 * 7 + 7 + 1) * per_token
    assert cpu_kv_arguments(str(tmp_path), 4096, 8, {"max_num_seqs": 16}, free=64 * GIB, need=need,
                            share_prefix=True)[1].sequences == 8  # fewer in flight than the limit: those
