"""`schema_policy.repeated_items`: lists that loop are cut before their first repeat, never into a dead letter."""

from __future__ import annotations

import json

from pipeline.config import parse_config
from schemas.contract import SchemaContract
from schemas.repeats import cut_output, cut_repeats, has_lists
from workers.classify import classify
from workers.engine import Generation


def test_a_list_ends_before_its_first_repeated_item():
    assert cut_repeats(["a", "b", "b", "c", "b"]) == (["a", "b"], 3)
    assert cut_repeats([{"n": 1}, {"n": 1}]) == ([{"n": 1}], 1)
    assert cut_repeats([1, 2, 3]) == ([1, 2, 3], 0)


def test_nested_lists_are_cut_first_and_keys_in_any_order_are_equal():
    record = {"a": [{"x": 1, "y": [5, 5]}, {"y": [5], "x": 1}, {"x": 2}], "b": "s"}
    assert cut_repeats(record) == ({"a": [{"x": 1, "y": [5]}], "b": "s"}, 3)


def test_cut_output_is_none_when_nothing_repeats_or_the_text_does_not_parse():
    assert cut_output('{"a":[1,2]}') is None
    assert cut_output('{"a":[1,') is None
    text, dropped = cut_output('{"a":["x","y","y"]}')
    assert json.loads(text) == {"a": ["x", "y"]} and dropped == 1


def test_has_lists():
    assert has_lists({"properties": {"a": {"type": "array", "items": {"type": "string"}}}})
    assert has_lists({"$defs": {"L": {"type": ["array", "null"]}}})
    assert not has_lists({"properties": {"a": {"type": "string", "enum": [["not", "a", "schema"]]}}})


CONTRACT = SchemaContract.from_dict({
    "type": "object",
    "properties": {"names": {"type": "array", "items": {"type": "string"}},
                   "codes": {"type": "array", "items": {"type": "string"}, "minItems": 3}},
    "required": ["names"],
})


def _gen(text: str) -> Generation:
    return Generation(text=text, finish_reason="stop", prompt_tokens=10, output_tokens=10)


def test_classify_cuts_a_looping_list_and_keeps_the_raw_output():
    raw = '{"names":["Ann","Bo","Bo","Bo"]}'
    outcome = classify(_gen(raw), CONTRACT, {}, repeated_items="cut")
    assert outcome.record == {"names": ["Ann", "Bo"]}
    assert outcome.raw_output == raw
    assert classify(_gen(raw), CONTRACT, {}, repeated_items="keep").record == {"names": ["Ann", "Bo", "Bo", "Bo"]}


def test_a_cut_that_would_fail_the_checks_is_not_made():
    raw = '{"names":["Ann"],"codes":["X","X","X"]}'  # minItems 3: only the output as decoded passes
    assert classify(_gen(raw), CONTRACT, {}, repeated_items="cut").record == {"names": ["Ann"],
                                                                               "codes": ["X", "X", "X"]}


def _config(**policy) -> dict:
    return {"name": "j", "input": {"uri": "in.parquet"}, "output": {"uri": "out"}, "prompt": "p {document}",
            "schema_file": "s.json", "schema_policy": policy}


def test_cut_is_the_default_and_keep_is_the_behaviour_before_the_key():
    assert parse_config(_config()).schema_policy.repeated_items == "cut"
    assert parse_config(_config(repeated_items="keep")).schema_policy.repeated_items == "keep"


def test_the_output_hash_changes_only_where_a_cut_can_act(tmp_path):
    from pipeline.config import load_config

    def hashes(schema: dict) -> tuple[str, str]:
        (tmp_path / "s.json").write_text(json.dumps(schema))
        (tmp_path / "job.yaml").write_text(json.dumps(_config()))
        return tuple(load_config(tmp_path / "job.yaml", {"schema_policy.repeated_items": mode}).output_hash
                     for mode in ("cut", "keep"))

    flat = {"type": "object", "properties": {"a": {"type": "string"}}}
    cut, keep = hashes(flat)
    assert cut == keep
    cut, keep = hashes({"type": "object", "properties": {"a": {"type": "array", "items": {"type": "string"}}}})
    assert cut != keep
