"""The rank counter of CPU engines (`workers.engine.cpu.count_at_least`, a numba kernel) gives the counts of vLLM's
compiled `batched_count_greater_than`, and goes where vLLM's sampler calls it (on CPU only)."""

from __future__ import annotations

import pytest

from workers import vllm_compat
from workers.engine.cpu import count_at_least

pytestmark = pytest.mark.slow  # imports vLLM, and torch compiles vLLM's kernel once

VOCAB = 49152  # the bundled model's


@pytest.fixture
def restored():
    vllm_compat.restore_logprob_ranks()
    yield
    vllm_compat.restore_logprob_ranks()


def logprobs(seed: int, rows: int):
    import torch

    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(rows, VOCAB, generator=gen).log_softmax(-1)
    x[torch.rand(rows, VOCAB, generator=gen) < 0.5] = float("-inf")  # the grammar's mask (raw log-probabilities)
    picked = torch.randint(0, VOCAB, (rows,), generator=gen)
    x[0, picked[0]] = x[0].max()  # a sampled token that is the top one
    if rows > 2:
        x[1, :7] = x[1, picked[1]]  # ties with the sampled token: counted, as >= counts them
        x[2, picked[2]] = float("-inf")  # a sampled token the mask forbids: every entry counts
    return x, picked


@pytest.mark.parametrize("rows", [1, 2, 80])
def test_the_numba_counter_gives_vllms_counts(restored, rows):
    import torch

    compiled = vllm_compat.original_logprob_ranks()
    x, picked = logprobs(rows, rows)
    values = x.gather(-1, picked.unsqueeze(-1))
    ours, theirs = count_at_least(x, values), compiled(x, values)
    assert ours.dtype == theirs.dtype and ours.shape == theirs.shape == (rows,)
    assert torch.equal(ours, theirs)
    assert int(ours[0]) >= 1
    if rows > 2:
        assert int(ours[2]) == VOCAB
    # a view that is not contiguous (another numba specialisation) and a dtype numpy lacks (the torch fallback)
    wide = torch.cat([x, x], dim=1)[:, ::2]
    assert torch.equal(count_at_least(wide, values), compiled(wide, values))
    half = x.to(torch.bfloat16)
    assert torch.equal(count_at_least(half, values.to(torch.bfloat16)), (half >= values.to(torch.bfloat16)).sum(-1))


def test_it_goes_where_the_sampler_calls_it_and_only_on_cpu(restored):
    import torch
    from vllm.v1.sample import sampler

    from workers.engine import cpu_patches, engine_arguments

    compiled = sampler.batched_count_greater_than
    x, picked = logprobs(7, 16)
    before = sampler.Sampler.gather_logprobs(x, 2, picked)
    applied = cpu_patches(engine_arguments("m", 2048, 1, {}, accelerator=True), accelerator=True)
    assert applied["logprob_ranks"] == "vllm" and sampler.batched_count_greater_than is compiled
    applied = cpu_patches(engine_arguments("m", 2048, 1, {}, accelerator=False, free_memory=8 << 30), False)
    assert applied["logprob_ranks"] == "numba" and sampler.batched_count_greater_than is count_at_least
    after = sampler.Sampler.gather_logprobs(x, 2, picked)
    for a, b in zip(before, after, strict=True):  # token ids, log-probabilities, ranks (and fields left None)
        assert (a is None and b is None) or torch.equal(a, b)
    assert int(after[2].min()) >= 1
    vllm_compat.restore_logprob_ranks()
    assert sampler.batched_count_greater_than is compiled
