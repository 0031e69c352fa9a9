"""The simulated engine's answers (`model.simulated.answers`: mix, valid, gold) and its seeded log-probabilities,
on the sample job's contract (its validators check values against the document): pure logic, no Ray."""

from __future__ import annotations

import json
import random
from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from pipeline.config import ConfigError, load_config
from pipeline.dataflow import build_spec
from pipeline.stage_config import ActorConfig
from tests.conftest import SAMPLE, write_config
from workers.extractor import BatchExtractor
from workers.simulated import CHARS_PER_TOKEN, start_simulated, token_logprobs

DOCS = pq.read_table(SAMPLE).select(["doc_id", "text"])


def _extract(tmp_path: Path, simulated: dict, **overrides):
    tmp_path.mkdir(parents=True, exist_ok=True)
    loaded = load_config(write_config(tmp_path, simulated, **overrides))
    spec = build_spec(ActorConfig.of(loaded), "run-1")
    engine = start_simulated(spec)
    return BatchExtractor(engine, spec, min(spec.max_model_len, engine.max_model_len))(DOCS)


def _reasons(table) -> Counter:
    return Counter(table.column("_reason").to_pylist())


def test_valid_answers_pass_the_sample_validators_where_mix_does_not(tmp_path):
    """The sample's 50 invoices: schema-made records (mix, the default) are refused by the validators that check
    values against the document; `valid` makes them from the document, and every one is a row. The empty scan and
    the too-long contract stay what the pipeline makes of them."""
    contract_refused = {"input.long_documents": "dead_letter"}  # windows are not this test's subject
    mixed = _reasons(_extract(tmp_path / "mix", {}, **contract_refused))
    valid = _extract(tmp_path / "valid", {"answers": "valid"}, **contract_refused)
    assert mixed == {"semantic_invalid": 50, "empty_input": 1, "input_too_long": 1}, mixed
    assert _reasons(valid) == {None: 50, "empty_input": 1, "input_too_long": 1}, _reasons(valid)
    texts = dict(zip(DOCS.column("doc_id").to_pylist(), DOCS.column("text").to_pylist(), strict=True))
    for doc_id, record in zip(valid.column("doc_id").to_pylist(), valid.column("_typed").to_pylist(), strict=True):
        if record is not None and record["invoice_number"] is not None:
            assert record["invoice_number"] in texts[doc_id]  # derived from the document


def test_valid_answers_keep_the_mix_shares(tmp_path):
    reasons = _reasons(_extract(tmp_path, {"answers": "valid", "mix": {"truncated": 0.3, "refused": 0.2}}))
    assert reasons["truncated"] and reasons["engine_error"] and reasons[None], reasons
    assert "semantic_invalid" not in reasons


def test_gold_answers_are_the_gold_records_and_a_document_without_one_is_refused(tmp_path):
    gold = tmp_path / "gold.jsonl"
    picked = DOCS.slice(0, 3).to_pylist()
    outputs = {r["text"]: {"invoice_number": f"G-{i}", "vendor": {"name": None, "address": None}, "issue_date": None,
                           "currency": None, "total": None} for i, r in enumerate(picked)}
    gold.write_text("".join(json.dumps({"document": d, "output": o}) + "\n" for d, o in outputs.items()))
    out = _extract(tmp_path, {"answers": "gold", "outputs": str(gold)})
    by_id = dict(zip(out.column("doc_id").to_pylist(), out.to_pylist(), strict=True))
    for i, r in enumerate(picked):  # the gold record is the output (the validators refuse the made-up number)
        assert json.loads(by_id[r["doc_id"]]["_raw_output"])["invoice_number"] == f"G-{i}"
        assert by_id[r["doc_id"]]["_reason"] == "semantic_invalid"
    others = [row for row in out.to_pylist() if row["doc_id"] not in {r["doc_id"] for r in picked}
              and row["_reason"] not in ("empty_input", "input_too_long")]
    assert others and all(row["_reason"] == "engine_error" and "not in the gold file" in row["_error"]
                          for row in others)


def test_gold_answers_need_a_gold_file(tmp_path):
    with pytest.raises(ConfigError, match="answers: gold needs model.simulated.outputs"):
        load_config(write_config(tmp_path, {"answers": "gold"}))


def test_confidence_is_seeded_per_document_and_seed(tmp_path):
    """With output.confidence (the sample's default) rows carry _confidence from the simulated log-probabilities:
    the same on a rerun, other values under another seed, every value in [0, 1], some leaves unsure."""
    first = _extract(tmp_path / "a", {"answers": "valid"}).column("_confidence").to_pylist()
    again = _extract(tmp_path / "b", {"answers": "valid"}).column("_confidence").to_pylist()
    other = _extract(tmp_path / "c", {"answers": "valid", "seed": 7}).column("_confidence").to_pylist()
    assert first == again and first != other
    values = [v for row in first if row for _, v in row]
    assert values and all(0.0 <= v <= 1.0 for v in values)
    assert min(values) < 0.9 < max(values)


def test_no_confidence_without_logprobs(tmp_path):
    out = _extract(tmp_path, {"answers": "valid"}, **{"output.confidence": False})
    assert out.column("_confidence").null_count == out.num_rows


def test_min_confidence_routes_rows_to_low_confidence_on_the_simulated_engine(tmp_path):
    out = _extract(tmp_path, {"answers": "valid"}, **{"output.min_confidence": 0.5})
    reasons = _reasons(out)
    assert reasons["low_confidence"] and reasons[None], reasons


def test_token_logprobs_spell_the_text():
    text = '{"a":"bravo","n":12}'
    pieces, logprobs = token_logprobs(text, random.Random(1))
    assert "".join(pieces) == text and len(pieces) == len(logprobs) == -(-len(text) // CHARS_PER_TOKEN)
    assert all(v <= 0 for v in logprobs)


def test_valid_answers_a_few_shot_examples_document_with_its_output(tmp_path):
    """A document that is one of the job's few-shot examples is answered with that example's output."""
    from tests.conftest import ROOT, write_docs

    examples = [json.loads(line) for line in (ROOT / "jobs/sample/examples.jsonl").read_text().splitlines()]
    ids = [f"ex-{i}" for i in range(len(examples))]
    docs = write_docs(tmp_path / "docs.parquet", ids, [e["document"] for e in examples])
    loaded = load_config(write_config(tmp_path, {"answers": "valid"}, **{"input.uri": str(docs)}))
    assert loaded.examples  # the sample job shows them to the model
    spec = build_spec(ActorConfig.of(loaded), "run-1")
    engine = start_simulated(spec)
    out = BatchExtractor(engine, spec, 4096)(pq.read_table(docs))
    for example, raw in zip(examples, out.column("_raw_output").to_pylist(), strict=True):
        assert json.loads(raw) == example["output"]
