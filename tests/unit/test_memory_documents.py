"""The CPU KV budget holds no more sequences than the run has requests (issue 27: memory sized to the work): its
documents, each counted once per window where documents are read in windows (issue 56)."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import pytest

import workers.engine.imports
from schemas.contract import SchemaContract
from workers.memory import (
    CPU_BLOCK_SIZE,
    GIB,
    KvNeed,
    KvSample,
    KvShape,
    documents_of,
    kv_budget,
    measure_need,
    sample_document,
    sequences_sized,
    windows_of,
)
from workers.spec import ExtractionSpec
from workers.windows import WindowPolicy

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


def test_a_document_read_in_windows_counts_once_per_window():
    # The bench's long arm: 6 documents of 4 windows each are 24 requests, not 6 sequences (with 6 the engine
    # ran 6-9 sequences a step and preempted; issue 56).
    six = dataclasses.replace(INVOICE, documents=6, windows=4)
    assert sequences_sized(16, six) == 16
    assert sequences_sized(64, six) == 24
    assert sequences_sized(64, dataclasses.replace(six, windows=1)) == 6


def test_windows_of_a_document():
    assert windows_of(400, 512, 0.1) == 1  # fits one window
    assert windows_of(512, 512, 0.1) == 1
    assert windows_of(513, 512, 0.1) == 2
    assert windows_of(1892, 512, 0.1) == 4  # 512, then 460 new tokens a window: 512 + 3 × 460
    assert windows_of(1893, 512, 0.1) == 5
    assert windows_of(2000, 500, 0.0) == 4
    assert windows_of(10, 0, 0.1) == 1  # no room for a window: not windows (the document is refused)


def words(tokenizer, prompt) -> list[int]:  # a token per word: the sizing arithmetic, not a tokenizer's
    return list(range(len(str(prompt).split())))


@pytest.mark.parametrize(("long_documents", "window_tokens", "documents_words", "expected"), [
    ("windows", 100, 370, (4, 100 + 2)),  # 100 + 3 × 90 = 370 words: 4 windows of 100
    ("windows", 100, 60, (1, 60 + 2)),  # fits one window
    ("windows", None, 370, (2, 2 + 248)),  # auto: as many as fit beside the prompt and max_tokens (248)
    ("dead_letter", 100, 370, (1, 370 + 2)),  # refused, not windowed: the prompt as it is
])
def test_the_sizing_document_says_how_many_windows_a_document_makes(tmp_path, monkeypatch, long_documents,
                                                                    window_tokens, documents_words, expected):
    (tmp_path / "config.json").write_text("{}")
    monkeypatch.setattr(workers.engine.imports, "model_tokenizer", lambda path: None)
    contract = SchemaContract.from_model_ref("tests.fixtures.models:Ticket")
    document = " ".join(["word"] * documents_words)
    spec = ExtractionSpec(run_id="r", id_column="id", text_column="text", prompt_template="Read: {document} now",
                          contract=contract, model_path=str(tmp_path), model_name="m", max_tokens=50,
                          temperature=0.0, max_model_len=300, long_documents=long_documents,
                          windows=WindowPolicy(window_tokens=window_tokens),
                          kv_sample=KvSample(document=document, chars=len(document), percentile=95, rows=6,
                                             longest_chars=len(document), documents=6))
    need = measure_need(spec, str(tmp_path), words)
    assert need is not None
    assert (need.windows, need.prompt_tokens) == expected
    assert need.documents == 6
