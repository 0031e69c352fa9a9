"""The engine adapter's arguments: our defaults, the user's overrides, CPU vs GPU."""

import sys

import pytest

from workers.engine import engine_arguments


@pytest.mark.slow  # imports vLLM's drafter
def test_the_prompt_lookup_drafter_kernel_is_cached_on_disk_only_when_the_engine_drafts(monkeypatch):
    from numba.core.caching import NullCache
    from vllm.v1.spec_decode import ngram_proposer

    from workers.engine import _cache_drafter_kernel

    kernel = ngram_proposer.batch_propose_numba
    enable = kernel.enable_caching
    calls = []
    monkeypatch.setattr(kernel, "enable_caching", lambda: calls.append("enabled"))
    _cache_drafter_kernel(engine_arguments("m", 2048, 1, {"speculative_config": None}, accelerator=False))
    assert calls == []  # no speculation: vLLM's kernel is left as it ships
    _cache_drafter_kernel(engine_arguments("m", 2048, 1, {}, accelerator=False))
    assert calls == ["enabled"]
    monkeypatch.undo()
    assert kernel.enable_caching == enable
    _cache_drafter_kernel(engine_arguments("m", 2048, 1, {}, accelerator=False))
    assert not isinstance(kernel._cache, NullCache)  # numba keeps the compiled kernel on disk


@pytest.mark.slow  # imports vLLM
def test_the_kernel_rebind_scan_survives_flask_and_puts_every_global_back():
    """vLLM's start-up scan reads `hasattr(value, "__dict__")` of every module global; flask's `current_app`
    raises RuntimeError there (moto's server loads Flask), and the engine failed to start."""
    import flask  # noqa: F401 - its context proxies are module globals now
    from vllm.triton_utils import dispatcher

    from workers.engine import _shield_kernel_rebind

    assert _shield_kernel_rebind() and dispatcher._rebind_kernels._extract_shielded
    assert _shield_kernel_rebind()  # idempotent
    proxy = sys.modules["flask"].current_app
    dispatcher._rebind_kernels([])  # the scan runs over every module and finds nothing to rebind
    assert sys.modules["flask"].current_app is proxy
    with pytest.raises(RuntimeError, match="application context"):
        hasattr(proxy, "__dict__")  # what the unshielded scan met
