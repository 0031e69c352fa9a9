"""The simulated engine (`model.path: simulated`, workers.simulated) and its config: pure logic, no Ray."""

from __future__ import annotations

import dataclasses
import json
import threading
from pathlib import Path

import pyarrow as pa
import pytest
import yaml

from pipeline.config import ConfigError, load_config
from pipeline.dataflow import build_spec
from pipeline.stage_config import ActorConfig
from schemas.contract import SchemaContract
from workers.classify import classify
from workers.extractor import BatchExtractor
from workers.simulated import CHARS_PER_TOKEN, record_for, start_simulated

SCHEMA = {"type": "object", "properties": {
    "title": {"type": "string", "maxLength": 40}, "amount": {"type": "number", "minimum": 0},
    "count": {"type": "integer", "minimum": 1, "maximum": 9}, "kind": {"enum": ["a", "b"]},
    "due": {"type": "string", "format": "date"}, "tags": {"type": "array", "items": {"type": "string"}},
    "note": {"anyOf": [{"type": "string"}, {"type": "null"}]}}, "required": ["title", "amount", "count"]}


def _config(tmp_path: Path, **model) -> Path:
    (tmp_path / "schema.json").write_text(json.dumps(SCHEMA))
    raw = {"name": "sim", "input": {"uri": "docs.parquet"}, "schema_file": "schema.json",
           "prompt": "Extract.\n{document}\nDone.", "output": {"uri": "out"},
           "model": {"path": "simulated", "simulated": {"allow": True}, **model}}
    path = tmp_path / "extract.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def _extractor(tmp_path: Path, **simulated):
    loaded = load_config(_config(tmp_path), {f"model.simulated.{k}": v for k, v in simulated.items()})
    spec = build_spec(ActorConfig.of(loaded), "run-1")
    engine = start_simulated(spec)
    return loaded, spec, engine, BatchExtractor(engine, spec, min(spec.max_model_len, engine.max_model_len))


def test_generated_records_pass_the_schema():
    contract = SchemaContract.from_dict(SCHEMA, default_name="t", source="test")
    import random

    for seed in range(50):
        record = record_for(SCHEMA, random.Random(seed))
        assert contract.check(json.dumps(record), {"document": ""}) is not None


def test_every_document_a_row_by_default_and_the_same_on_rerun(tmp_path):
    _, _, _, extractor = _extractor(tmp_path)
    batch = pa.table({"doc_id": [f"d{i}" for i in range(20)], "text": [f"document number {i}" for i in range(20)]})
    first = extractor(batch)
    assert first.column("_kind").to_pylist() == ["row"] * 20
    again = extractor(batch)
    assert first.column("_typed").to_pylist() == again.column("_typed").to_pylist()


def test_the_mix_runs_every_path_of_classify(tmp_path):
    _, _, _, extractor = _extractor(tmp_path, mix={"truncated": 0.25, "invalid": 0.25, "refused": 0.25})
    n = 400
    batch = pa.table({"doc_id": [str(i) for i in range(n)], "text": [f"text {i} " * 3 for i in range(n)]})
    reasons = extractor(batch).column("_reason").to_pylist()
    seen = {r for r in reasons}
    assert {None, "truncated", "invalid_json", "schema_violation", "engine_error"} <= seen, seen
    for kind, count in ((None, n / 4), ("truncated", n / 4)):
        assert 0.1 * n < sum(r == kind for r in reasons) < 0.4 * n, (kind, count)


def test_gold_outputs_are_matched_by_document(tmp_path):
    gold = tmp_path / "gold.jsonl"
    records = {f"doc {i}": {"title": f"T{i}", "amount": i, "count": 1} for i in range(5)}
    gold.write_text("".join(json.dumps({"document": d, "output": r}) + "\n" for d, r in records.items()))
    _, _, _, extractor = _extractor(tmp_path, outputs=str(gold))
    batch = pa.table({"doc_id": list(range(5)), "text": list(records)})
    out = extractor(batch).column("_typed").to_pylist()
    assert [o["title"] for o in out] == [f"T{i}" for i in range(5)]


def test_trivial_tokenizer_and_context_check(tmp_path):
    _, spec, engine, extractor = _extractor(tmp_path)
    assert len(engine.prompt_token_ids("x" * 40)) == 40 // CHARS_PER_TOKEN
    long = "y " * (spec.max_model_len * CHARS_PER_TOKEN // 2 + 10)
    table = extractor(pa.table({"doc_id": ["a"], "text": [long]}))
    assert table.column("_kind").to_pylist() == ["row"] and table.column("_windows").to_pylist()[0] > 1
    refusing = BatchExtractor(engine, dataclasses.replace(spec, long_documents="dead_letter"), spec.max_model_len)
    table = refusing(pa.table({"doc_id": ["a"], "text": [long]}))
    assert table.column("_reason").to_pylist() == ["input_too_long"]


def test_latency_scheduler_answers_concurrent_callers(tmp_path):
    _, _, engine, extractor = _extractor(tmp_path, tokens_per_s=5000.0, ttft_s=0.001, max_seqs=4)
    done, hooks = [], []
    engine.on_request_done = lambda out: hooks.append(len(out.outputs[0].token_ids))

    def one(k):
        batch = pa.table({"doc_id": [f"{k}-{i}" for i in range(8)], "text": [f"doc {k} {i}" for i in range(8)]})
        done.append(extractor(batch).num_rows)

    threads = [threading.Thread(target=one, args=(k,)) for k in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    engine.close()
    assert done == [8, 8, 8] and len(hooks) == 24


def test_classify_sees_truncation_as_truncated(tmp_path):
    _, spec, engine, _ = _extractor(tmp_path, mix={"truncated": 1.0})
    generation = engine.generate([engine.prompt_token_ids("Extract.\nsome text\nDone.")], None, 64, 0.0)[0]
    assert classify(generation, spec.contract, {"document": "some text"}, False).reason == "truncated"


def test_config_refuses_without_allow_and_other_mistakes(tmp_path):
    path = _config(tmp_path)
    with pytest.raises(ConfigError, match="model.simulated.allow"):
        load_config(path, {"model.simulated.allow": False})
    with pytest.raises(ConfigError, match="model.constrained"):
        load_config(path, {"model.constrained": True})
    with pytest.raises(ConfigError, match="only with model.path: simulated"):
        load_config(path, {"model.path": "bundled"})
    with pytest.raises(ConfigError, match="add up to more than 1"):
        load_config(path, {"model.simulated.mix": {"truncated": 0.6, "refused": 0.6}})
    with pytest.raises(ConfigError, match="no such file"):
        load_config(path, {"model.simulated.outputs": "missing.jsonl"})
    loaded = load_config(path, {"model.simulated.tokens_per_s": 100})
    assert loaded.model_path == "simulated" and not loaded.config.model.constrained
    assert loaded.config.model.engine_kwargs["simulated"]["tokens_per_s"] == 100
    assert "allow" not in loaded.config.model.engine_kwargs["simulated"]


def test_no_model_memory_imports(tmp_path):
    import subprocess
    import sys

    code = ("import sys, workers.simulated; bad = [m for m in ('torch', 'vllm') if m in sys.modules]; "
            "print(','.join(bad))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_an_output_longer_than_max_tokens_is_cut_off_as_truncated(tmp_path):
    _, spec, engine, _ = _extractor(tmp_path)
    prompt = "Extract.\nanother text\nDone."
    full = engine.generate([engine.prompt_token_ids(prompt)], None, 4096, 0.0)[0]
    assert full.finish_reason == "stop"
    budget = max(1, full.output_tokens // 2)
    cut = engine.generate([engine.prompt_token_ids(prompt)], None, budget, 0.0)[0]
    assert cut.finish_reason == "length" and cut.output_tokens == budget
    assert cut.text == full.text[:budget * CHARS_PER_TOKEN]
    assert classify(cut, spec.contract, {"document": "another text"}, False).reason == "truncated"
