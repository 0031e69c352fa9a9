"""The fast CPU bitmask kernel gives XGrammar's own CPU kernel's result, bit for bit, in every calling form."""

import numpy as np
import pytest
import torch
import xgrammar
from xgrammar.kernels.apply_token_bitmask_inplace_cpu import apply_token_bitmask_inplace_cpu as xgrammar_cpu

from workers import bitmask as fast


def grammar_like_bitmask(rows: int, words: int, seed: int) -> torch.Tensor:
    """Rows as a JSON grammar makes them: mostly masked, a few words open, some words partly open, and a row
    with every token allowed (inside a string)."""
    rng = np.random.default_rng(seed)
    bits = np.zeros((rows, words), dtype=np.int32)
    for r in range(rows):
        open_words = rng.choice(words, size=min(words, 5), replace=False)
        bits[r, open_words] = rng.integers(np.iinfo(np.int32).min, np.iinfo(np.int32).max, size=len(open_words),
                                           dtype=np.int32)
    bits[0, :] = -1  # every token allowed
    bits[-1, 0] = np.int32(-(2**31))  # only the top bit of the word: token 31
    return torch.from_numpy(bits)


def both(logits: torch.Tensor, bitmask: torch.Tensor, **kwargs):
    ours, theirs = logits.clone(), logits.clone()
    fast.apply_token_bitmask_inplace_cpu(ours, bitmask, **kwargs)
    xgrammar_cpu(theirs, bitmask, **kwargs)
    return ours, theirs


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_whole_batch_matches_xgrammar(dtype):
    bitmask = grammar_like_bitmask(7, 40, seed=1)
    logits = torch.randn(7, 40 * 32).to(dtype)
    ours, theirs = both(logits, bitmask)
    assert torch.equal(ours, theirs)
    assert torch.isinf(ours).any() and torch.isfinite(ours).any()  # the mask did something, and not everything
    assert torch.isfinite(ours[0]).all()  # the all-allowed row is untouched


def test_indices_mask_only_those_rows():
    bitmask = grammar_like_bitmask(6, 16, seed=2)
    logits = torch.randn(6, 16 * 32)
    for indices in ([1, 4], [5], torch.tensor([0, 2, 3], dtype=torch.int32), []):
        ours, theirs = both(logits, bitmask, indices=indices)
        assert torch.equal(ours, theirs)
    ours, _ = both(logits, bitmask, indices=[1, 4])
    assert torch.equal(ours[[0, 2, 3, 5]], logits[[0, 2, 3, 5]])


def test_vocab_size_and_padding():
    bitmask = grammar_like_bitmask(3, 10, seed=3)
    # logits narrower than the bitmask covers (the model's real vocab is not a multiple of 32)
    ours, theirs = both(torch.randn(3, 300), bitmask)
    assert torch.equal(ours, theirs)
    # logits wider than the bitmask: the tail stays unmasked, as in XGrammar
    ours, theirs = both(torch.randn(3, 330), bitmask)
    assert torch.equal(ours, theirs) and torch.isfinite(ours[:, 320:]).all()
    # an explicit vocab_size
    ours, theirs = both(torch.randn(3, 320), bitmask, vocab_size=250)
    assert torch.equal(ours, theirs) and torch.isfinite(ours[:, 250:]).all()


def test_a_batch_mismatch_is_refused_as_xgrammar_refuses_it():
    bitmask = grammar_like_bitmask(8, 4, seed=6)
    with pytest.raises(ValueError, match="batch size must equal the bitmask's, got 5 vs 8"):
        fast.apply_token_bitmask_inplace_cpu(torch.randn(5, 128), bitmask)
    with pytest.raises(RuntimeError, match="batch size"):
        xgrammar_cpu(torch.randn(5, 128), bitmask)


def test_one_dimensional():
    bitmask = grammar_like_bitmask(2, 8, seed=4)[1]
    ours, theirs = both(torch.randn(8 * 32), bitmask)
    assert torch.equal(ours, theirs)


def test_install_routes_cpu_calls_and_leaves_other_backends_to_xgrammar(monkeypatch):
    from workers import vllm_compat

    monkeypatch.setattr(vllm_compat, "_swapped", {})
    original = xgrammar.apply_token_bitmask_inplace
    monkeypatch.setattr(xgrammar, "apply_token_bitmask_inplace", original)
    assert fast.install() and fast.install()  # idempotent
    assert xgrammar.apply_token_bitmask_inplace is fast.apply_token_bitmask_inplace
    assert vllm_compat.original_mask_kernel() is original

    calls = []
    monkeypatch.setattr(fast, "apply_token_bitmask_inplace_cpu", lambda *a: calls.append("fast"))
    bitmask = grammar_like_bitmask(2, 4, seed=5)
    logits = torch.randn(2, 128)
    xgrammar.apply_token_bitmask_inplace(logits, bitmask)
    assert calls == ["fast"]
    expected = logits.clone()
    xgrammar_cpu(expected, bitmask)
    xgrammar.apply_token_bitmask_inplace(logits, bitmask, backend="torch_native")  # not ours: XGrammar's
    assert calls == ["fast"] and torch.equal(logits, expected)


def test_use_switches_kernels_and_names_a_bad_one(monkeypatch):
    from workers import vllm_compat

    monkeypatch.setattr(vllm_compat, "_swapped", {})
    original = xgrammar.apply_token_bitmask_inplace
    monkeypatch.setattr(xgrammar, "apply_token_bitmask_inplace", original)
    assert fast.use("fast") == "fast" and xgrammar.apply_token_bitmask_inplace is fast.apply_token_bitmask_inplace
    assert fast.use("xgrammar") == "xgrammar" and xgrammar.apply_token_bitmask_inplace is original
    with pytest.raises(ValueError, match="EXTRACT_MASK_KERNEL='triton'"):
        fast.use("triton")


# -- the bitmask layout's versions (issue 53 item 4): the version strings are faked, the libraries are the real ones --


def test_the_installed_grammar_libraries_are_versions_the_kernel_was_checked_against():
    from workers import vllm_compat

    vllm_compat.check_bitmask_layout()  # this environment's XGrammar and llguidance
    assert vllm_compat.installed_package("xgrammar") is not None


@pytest.mark.parametrize(("package", "version"), [("xgrammar", "0.3.0"), ("xgrammar", "0.2.7"),
                                                  ("llguidance", "1.8.1")])
def test_an_unknown_grammar_library_version_is_one_line_naming_it_and_the_range(package, version):
    from workers import vllm_compat

    versions = {"xgrammar": "0.2.8", "llguidance": "1.7.6", package: version}
    with pytest.raises(vllm_compat.VllmCompatError) as refused:
        vllm_compat.check_bitmask_layout(versions.get)
    line = str(refused.value)
    supported = vllm_compat.BITMASK_LAYOUT_VERSIONS[package][0]
    assert "\n" not in line and f"{package} {version} is installed" in line and f"{package}{supported}" in line


def test_an_absent_library_fills_no_bitmask_and_is_not_refused():
    from workers import vllm_compat

    vllm_compat.check_bitmask_layout({"xgrammar": "0.2.8"}.get)  # no llguidance installed


def test_the_kernel_is_not_swapped_in_under_an_unknown_xgrammar(monkeypatch):
    from workers import vllm_compat

    fast.uninstall()
    own = xgrammar.apply_token_bitmask_inplace
    real = vllm_compat.installed_package
    monkeypatch.setattr(vllm_compat, "installed_package", lambda name: "0.3.0" if name == "xgrammar" else real(name))
    with pytest.raises(vllm_compat.VllmCompatError, match=r"xgrammar 0\.3\.0 is installed"):
        fast.install()
    assert xgrammar.apply_token_bitmask_inplace is own
    monkeypatch.undo()
    assert fast.install() and xgrammar.apply_token_bitmask_inplace is not own
    fast.uninstall()
