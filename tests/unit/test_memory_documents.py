"""The CPU KV budget holds no more sequences than the run has documents (issue 27: memory sized to the work)."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

from workers.memory import (
    CPU_BLOCK_SIZE,
    GIB,
    KvNeed,
    KvShape,
    documents_of,
    kv_budget,
    sample_document,
    sequences_sized,
)

SMOL = KvShape(layers=30, kv_heads=3, head_dim=64, dtype_bytes=2)
BLOCK = CPU_BLOCK_SIZE
INVOICE = KvNeed(prompt_tokens=1258, max_tokens=512, lookahead=8, source="test", shared_tokens=1014)


def test_a_run_of_fewer_documents_than_sequences_in_flight_is_sized_for_its_documents():
    few = dataclasses.replace(INVOICE, documents=52)
    budget = kv_budget(SMOL, 4096, 64, free=64 * GIB, need=few, share_prefix=True)
    assert budget.sequences == 52
    assert budget.need == (52 * 7 + 7 + 1) * BLOCK * SMOL.bytes_per_token
    assert budget.describe()["kv_sequences"] == 52


def test_more_documents_than_sequences_or_an_unknown_count_keeps_the_sequences_in_flight():
    assert kv_budget(SMOL, 4096, 64, free=64 * GIB, need=dataclasses.replace(INVOICE, documents=10**6)).sequences == 64
    assert kv_budget(SMOL, 4096, 64, free=64 * GIB, need=INVOICE).sequences == 64
    assert kv_budget(SMOL, 4096, 64, free=64 * GIB).sequences == 64  # no need: max_model_len sizing, as before
    assert sequences_sized(64, dataclasses.replace(INVOICE, documents=0)) == 64  # zero: not a count
    assert sequences_sized(0, None) == 1


def test_one_document_still_gets_one_full_length_sequence():
    one = dataclasses.replace(INVOICE, documents=1)
    budget = kv_budget(SMOL, 4096, 64, free=64 * GIB, need=one, share_prefix=True)
    assert budget.sequences == 1
    assert budget.bytes == (4096 // BLOCK + 1) * BLOCK * SMOL.bytes_per_token  # vLLM's floor wins


def test_the_units_rows_are_the_documents_unless_a_unit_does_not_say():
    assert documents_of([SimpleNamespace(rows=40), SimpleNamespace(rows=12)]) == 52
    assert documents_of([SimpleNamespace(rows=40), SimpleNamespace(path="x", row_group=0)]) is None
    assert documents_of([]) is None
    assert sample_document(["a" * 10, "b" * 20], documents=52).documents == 52
    assert sample_document(["a" * 10]).documents is None
