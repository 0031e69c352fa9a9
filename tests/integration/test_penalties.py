"""The lean penalty kernel (workers/penalties.py) gives vLLM's logits bit for bit, and goes where vLLM's
samplers call it."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.slow  # imports vLLM

VOCAB = 4099


def inputs(seed: int, rows: int = 37, presence: float = 1.0, frequency: float = 0.0, repetition: float = 1.0):
    import torch

    gen = torch.Generator().manual_seed(seed)
    logits = torch.randn(rows, VOCAB, generator=gen) * 8
    logits[torch.rand(rows, VOCAB, generator=gen) < 0.3] = float("-inf")  # a grammar's mask
    logits[0, :5] = -0.0
    outputs = torch.randint(0, VOCAB, (rows, 60), generator=gen)
    outputs[torch.rand(rows, 60, generator=gen) < 0.4] = VOCAB  # vLLM's padding
    outputs[1] = VOCAB  # a row with no output yet
    prompts = torch.randint(0, VOCAB + 1, (rows, 90), generator=gen)
    penalties = torch.full((rows,), presence)
    penalties[2] = 0.0  # a request without a penalty beside ones with it
    return (logits, prompts, outputs, penalties, torch.full((rows,), frequency), torch.full((rows,), repetition))


def vllms(args):
    from vllm.model_executor.layers.utils import apply_penalties

    logits, *rest = args
    return apply_penalties(logits.clone(), *rest)


def leans(args):
    from workers.penalties import lean_penalties

    logits, *rest = args
    return lean_penalties(logits.clone(), *rest)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("presence", [1.0, 0.37, -0.5, 0.0])
def test_the_lean_kernel_gives_vllms_logits_bit_for_bit_with_a_presence_penalty(seed, presence):
    import torch

    args = inputs(seed, presence=presence)
    expected, got = vllms(args), leans(args)
    assert torch.equal(expected.isinf(), got.isinf())
    assert torch.equal(expected.view(torch.int32), got.view(torch.int32))  # every bit, -0.0 included
    if presence:
        assert not torch.equal(got, args[0])  # the penalty did something


@pytest.mark.parametrize("frequency, repetition", [(0.5, 1.0), (0.0, 1.3), (0.2, 0.8)])
def test_other_penalties_go_to_vllms_own_kernel(frequency, repetition):
    import torch

    args = inputs(7, frequency=frequency, repetition=repetition)
    assert torch.equal(vllms(args).view(torch.int32), leans(args).view(torch.int32))


def test_the_kernel_is_put_where_vllms_samplers_call_it_and_taken_back():
    import torch
    from vllm.v1.sample.ops.penalties import apply_all_penalties

    from workers import penalties, vllm_compat

    logits, prompts, outputs, presence, frequency, repetition = inputs(11)
    token_lists = [[int(t) for t in row if t < VOCAB] for row in outputs]
    try:
        assert penalties.use("lean") == "lean"
        assert vllm_compat.hook("penalties") is penalties.lean_penalties
        lean = apply_all_penalties(logits.clone(), prompts, presence, frequency, repetition, token_lists)
    finally:
        penalties.use("vllm")
    assert vllm_compat.hook("penalties") is not penalties.lean_penalties
    own = apply_all_penalties(logits.clone(), prompts, presence, frequency, repetition, token_lists)
    assert torch.equal(own.view(torch.int32), lean.view(torch.int32))
    with pytest.raises(ValueError, match="EXTRACT_PENALTY_KERNEL='fast'"):
        penalties.use("fast")
