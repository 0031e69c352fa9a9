"""`model.sampling`: SamplingParams by name, validated before Ray starts, and passed to every request."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from pipeline.config import ConfigError, load_config
from pipeline.dataflow import build_spec
from pipeline.stage_config import ActorConfig

ROOT = Path(__file__).resolve().parents[2]


def config(tmp_path: Path, sampling: dict) -> Path:
    raw = yaml.safe_load((ROOT / "jobs/extract.yaml").read_text())
    raw["input"]["uri"] = str(ROOT / "jobs/sample/invoices.parquet")
    raw.pop("examples", None)
    raw["model"]["sampling"] = sampling
    path = tmp_path / "extract.yaml"
    path.write_text(yaml.safe_dump(raw))
    (tmp_path / "schemas").symlink_to(ROOT / "schemas")
    return path


def test_known_names_reach_the_spec(tmp_path: Path) -> None:
    loaded = load_config(config(tmp_path, {"repetition_penalty": 1.1, "top_p": 0.9, "seed": 7, "stop": ["\n\n"]}))
    sampling = {"repetition_penalty": 1.1, "top_p": 0.9, "seed": 7, "stop": ["\n\n"]}
    # output.confidence, the default
    assert build_spec(ActorConfig.of(loaded), "r").sampling == {**sampling, "logprobs": 0}
    loaded = load_config(loaded.path, {"output.confidence": False})
    assert build_spec(ActorConfig.of(loaded), "r").sampling == sampling


@pytest.mark.parametrize("sampling, message", [
    ({"repetition_penalti": 1.1}, "model.sampling.repetition_penalti: unknown key"),
    ({"top_p": 0}, "model.sampling.top_p: Input should be greater than 0"),
    ({"repetition_penalty": "high"}, "model.sampling.repetition_penalty"),
])
def test_an_unknown_or_ill_typed_name_fails_with_one_line(tmp_path: Path, sampling: dict, message: str) -> None:
    with pytest.raises(ConfigError) as err:
        load_config(config(tmp_path, sampling))
    assert message in str(err.value) and "\n" not in str(err.value)


def test_grammar_bounds_close_unbounded_strings_and_lists_in_a_copy_only() -> None:
    from schemas.bounds import grammar_schema

    schema = {"type": "object", "properties": {
        "free": {"type": "string"}, "short": {"type": "string", "maxLength": 5}, "day": {"type": "string",
                                                                                     "format": "date"},
        "kind": {"enum": ["a", "b"]}, "tags": {"type": "array", "items": {"type": ["string", "null"]}},
        "nested": {"anyOf": [{"$ref": "#/$defs/N"}, {"type": "null"}]}},
        "$defs": {"N": {"type": "object", "properties": {"note": {"type": "string"}}}}}
    bounded = grammar_schema(schema, 64, 8)
    props = bounded["properties"]
    assert props["free"]["maxLength"] == 64 and props["short"]["maxLength"] == 5 and "maxLength" not in props["day"]
    assert props["tags"]["maxItems"] == 8 and props["tags"]["items"]["maxLength"] == 64
    assert bounded["$defs"]["N"]["properties"]["note"]["maxLength"] == 64
    assert "maxLength" not in schema["properties"]["free"]  # the user's schema stays as written
    assert grammar_schema(schema, None, None) is schema
