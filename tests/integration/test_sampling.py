"""`model.sampling`: SamplingParams by name, validated before Ray starts, and passed to every request."""

from __future__ import annotations

import pytest


@pytest.mark.slow  # imports vLLM
def test_the_engine_passes_them_to_vllm_sampling_params() -> None:
    pytest.importorskip("vllm")
    from workers.engine import VllmEngine

    engine = VllmEngine.__new__(VllmEngine)  # no LLM: only what builds a request's SamplingParams
    engine.use_sampling({"repetition_penalty": 1.2, "seed": 3})
    params = engine._sampling({"type": "object"}, 64, 0.0)
    assert params.repetition_penalty == 1.2 and params.seed == 3 and params.max_tokens == 64
    fresh = VllmEngine.__new__(VllmEngine)
    assert fresh._sampling(None, 8, 0.0).repetition_penalty == 1.0  # none set: vLLM's own


