"""Per-leaf confidence from sampled tokens' log-probabilities (workers.confidence)."""

from __future__ import annotations

import math

import pytest

from workers.confidence import leaf_confidence, leaf_spans, minimum, token_offsets


def test_leaf_spans_name_concrete_paths_and_cover_each_literal():
    text = '{"a": "x\\"y", "b": [1, {"c": true}], "d": null, "e": -2.5e3, "f": {}}'
    leaves = leaf_spans(text)
    assert [(p, v) for p, _, _, v in leaves] == [("a", 'x"y'), ("b[0]", 1), ("b[1].c", True), ("e", -2500.0)]
    for _, start, end, _ in leaves:
        assert text[start:end] in ('"x\\"y"', "1", "true", "-2.5e3")


def test_a_raw_control_character_in_a_string_is_read_as_the_contract_reads_it():
    """A `maxLength` string's grammar admits a raw tab (schemas.contract.parse_output): its leaf is still found."""
    assert [(p, v) for p, _, _, v in leaf_spans('{"a": "x\ty", "b": 2}')] == [("a", "x\ty"), ("b", 2)]
    assert [p for p, _, _, _ in leaf_spans('{"k\ty": 1}')] == ["k\ty"]  # a key of an open object, the same way


@pytest.mark.parametrize("bad", ['{"a": }', '{"a": 1', '{"a": 1} x', '[1,]'])
def test_leaf_spans_refuse_what_is_not_one_json_value(bad):
    with pytest.raises(ValueError):
        leaf_spans(bad)


def test_a_leaf_is_the_joint_probability_of_its_tokens_and_the_one_that_ends_it():
    pieces = ['{"', 'name', '":', ' "', 'Bob', ' Jones', '",', ' "', 'total', '":', ' 4', '2', '}']
    logps = [0.0, 0.0, 0.0, -0.1, -0.2, -0.3, -0.4, 0.0, 0.0, 0.0, -0.5, -0.6, -0.7]
    text = "".join(pieces)
    conf = leaf_confidence(text, pieces, logps)
    # "Bob Jones" spans ' "', 'Bob', ' Jones', '",'; 42 spans ' 4', '2' and the closing '}'
    assert conf["name"] == pytest.approx(math.exp(-0.1 - 0.2 - 0.3 - 0.4), abs=1e-6)
    assert conf["total"] == pytest.approx(math.exp(-0.5 - 0.6 - 0.7), abs=1e-6)
    assert minimum(conf) == conf["total"]
    assert minimum({}) is None


def test_tokens_that_do_not_spell_the_text_claim_nothing():
    assert token_offsets(["{", "}"], "{}") == [0, 1]
    assert token_offsets(["{", "\ufffd"], '{"') is None
    assert leaf_confidence('{"a":1}', ['{"a":', "1", "}"], [0.0, -1.0]) is None  # lengths differ
    assert leaf_confidence('{"a":1', ['{"a":', "1"], [0.0, -1.0]) is None  # does not parse


def test_a_row_under_min_confidence_is_a_dead_letter_that_keeps_its_record():
    from schemas.contract import SchemaContract
    from workers.classify import classify
    from workers.engine import Generation

    contract = SchemaContract.from_dict({"type": "object", "properties": {"a": {"type": "string"},
                                                                          "b": {"type": "integer"}}})
    pieces = ['{"a":', '"x"', ',"b":', '7', "}"]
    gen = Generation("".join(pieces), "stop", 5, 5, token_pieces=tuple(pieces),
                     token_logprobs=(0.0, math.log(0.9), 0.0, math.log(0.4), 0.0))
    kept = classify(gen, contract, {"document": "a x, b 7"}, min_confidence=0.3)
    assert kept.is_row and kept.confidence == pytest.approx({"a": 0.9, "b": 0.4})
    assert kept.spans == {"a": [(2, 3)], "b": [(7, 8)]}
    low = classify(gen, contract, {"document": "a x, b 7"}, min_confidence=0.5)
    assert not low.is_row and low.reason == "low_confidence"
    assert low.error["field"] == "b" and low.error["record"] == {"a": "x", "b": 7}
    assert classify(gen, contract, {}).is_row  # no threshold: a row, whatever its confidence


def test_min_confidence_needs_confidence_and_enters_the_hash_only_when_set():
    from pipeline.config import ConfigError, load_config

    base = load_config("jobs/extract.yaml")
    assert load_config("jobs/extract.yaml", {"output.confidence": False}).output_hash == base.output_hash
    assert load_config("jobs/extract.yaml", {"output.min_confidence": 0.2}).output_hash != base.output_hash
    with pytest.raises(ConfigError, match="output.min_confidence needs output.confidence"):
        load_config("jobs/extract.yaml", {"output.confidence": False, "output.min_confidence": 0.2})


def test_output_calibration_is_read_relative_to_the_config_and_checked(tmp_path):
    import json
    import shutil

    import yaml

    from pipeline.config import ConfigError, load_config
    from pipeline.dataflow import build_spec
    from pipeline.stage_config import ActorConfig

    root = __import__("pathlib").Path(__file__).resolve().parents[2]
    raw = yaml.safe_load((root / "jobs/extract.yaml").read_text())
    raw["input"]["uri"] = str(root / "jobs/sample/invoices.parquet")
    raw.pop("examples", None)
    shutil.copytree(root / "jobs/sample", tmp_path / "sample")
    raw["output"]["calibration"] = "cal.json"
    (tmp_path / "extract.yaml").write_text(yaml.safe_dump(raw))
    (tmp_path / "cal.json").write_text(json.dumps({"format": 1, "fields": {"*": {"raw": [0.2], "calibrated": [0.5]}}}))
    loaded = load_config(tmp_path / "extract.yaml")
    assert build_spec(ActorConfig.of(loaded), "r").calibration["fields"]["*"]["calibrated"] == [0.5]
    (tmp_path / "cal.json").write_text("{}")
    with pytest.raises(ConfigError, match="output.calibration: .*cal.json: not a calibration file"):
        build_spec(ActorConfig.of(load_config(tmp_path / "extract.yaml")), "r")
