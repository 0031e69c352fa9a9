"""The rank counter's kernel body and its cache fallback (workers/engine/cpu.py), without vLLM: numpy in, the
counts `(x >= values).sum(-1)` gives out. tests/integration/test_logprob_ranks.py checks it against vLLM's own."""

from __future__ import annotations

import numpy as np
import pytest

from workers.engine import cpu


def test_the_body_counts_ties_and_minus_infinity_as_at_least():
    x = np.array([[0.0, -1.0, -np.inf, 0.0], [-np.inf, -np.inf, -np.inf, -np.inf]], dtype=np.float32)
    values = np.array([[0.0], [-np.inf]], dtype=np.float32)
    out = np.zeros(2, dtype=np.int64)
    cpu.count_each_row(x, values, out)  # plain Python
    assert out.tolist() == [2, 4] == (x >= values).sum(-1).tolist()


def test_without_a_writable_cache_folder_the_kernel_still_compiles(monkeypatch):
    import numba

    real = numba.njit
    calls = []

    def njit(*functions, **options):
        if functions:  # numba's own uses while compiling, not ours
            return real(*functions, **options)
        calls.append(options)
        if options.get("cache"):
            raise RuntimeError("cannot cache function 'count_each_row': no locator available for file 'x'")
        return real(**options)

    monkeypatch.setattr(numba, "njit", njit)
    monkeypatch.setattr(cpu, "_count_kernel", None)
    kernel = cpu._kernel()
    assert [c.get("cache", False) for c in calls] == [True, False]
    x = np.random.default_rng(0).standard_normal((3, 50)).astype(np.float32)
    values = x[:, :1].copy()
    out = np.zeros(3, dtype=np.int64)
    kernel(x, values, out)
    assert out.tolist() == (x >= values).sum(-1).tolist()
    monkeypatch.setattr(cpu, "_count_kernel", None)  # the next caller gets the cached one again


def test_a_drafter_cache_numba_cannot_place_is_no_cache_and_a_missing_hook_still_fails(monkeypatch):
    from workers import vllm_compat

    def refuse():
        raise RuntimeError("cannot cache function 'batch_propose_numba': no locator available")

    monkeypatch.setattr(vllm_compat, "hook", lambda name: refuse)
    assert vllm_compat.cache_drafter_kernel() is False

    def missing(name):
        raise vllm_compat.VllmCompatError(f"hook {name}: gone")

    monkeypatch.setattr(vllm_compat, "hook", missing)
    with pytest.raises(vllm_compat.VllmCompatError, match="drafter_kernel_cache"):
        vllm_compat.cache_drafter_kernel()
