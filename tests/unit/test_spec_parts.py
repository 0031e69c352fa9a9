"""`ExtractionSpec`'s parts: each of its settings belongs to exactly one stage's part (engine, prompt, decode,
schema), and each part reads the spec's own values."""

from __future__ import annotations

import dataclasses

from schemas.contract import SchemaContract
from workers.spec import DecodeSpec, EngineSpec, ExtractionSpec, PromptSpec, RetryPolicy, SchemaSpec

PARTS = (EngineSpec, PromptSpec, DecodeSpec, SchemaSpec)


def test_every_setting_is_in_exactly_one_part():
    names = [f.name for part in PARTS for f in dataclasses.fields(part)]
    assert len(names) == len(set(names))
    batch = {"run_id", "id_column", "text_column"}  # what every stage shares: the batch's columns and its run
    assert set(names) | batch == {f.name for f in dataclasses.fields(ExtractionSpec)}


def test_each_part_carries_the_specs_values():
    contract = SchemaContract.from_dict({"type": "object", "properties": {"a": {"type": "string"}}})
    spec = ExtractionSpec(run_id="r", id_column="id", text_column="text", prompt_template="P {document}",
                          contract=contract, model_path="m", model_name="m", max_tokens=64, temperature=0.0,
                          max_model_len=512, backend="guidance", system="S", retry=RetryPolicy(attempts=2),
                          schema_column="s")
    assert spec.engine.backend == "guidance" and spec.engine.max_model_len == 512
    assert spec.prompt.prompt_template == "P {document}" and spec.prompt.system == "S"
    assert spec.decode.max_tokens == 64 and spec.decode.retry.attempts == 2
    assert spec.schema.contract is contract and spec.schema.schema_column == "s"
