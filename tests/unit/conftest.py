from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def native_half_precision(monkeypatch):
    """Unit tests read engine arguments as on a CPU with native bfloat16 and float16 (the model's own dtype kept),
    whatever CPU runs them; `test_precision.py` sets the flags it tests (`workers.engine.precision`)."""
    monkeypatch.setattr("workers.engine.precision.cpu_flags",
                        lambda text=None: frozenset({"avx512_bf16", "avx512_fp16"}))
