"""Per-leaf confidence from sampled tokens' log-probabilities (workers.confidence)."""

from __future__ import annotations

import math

import pytest

from workers.confidence import leaf_confidence, leaf_spans, minimum, token_offsets


def test_leaf_spans_name_concrete_paths_and_cover_each_literal():
    text = '{"a": "x\\"y", "b": [1, {"c": true}], "d": null, "e": -2.5e3, "f": {}}'
    leaves = leaf_spans(text)
    assert [(p, v) for p, _, _, v in leaves] == [("a", 'x"y'), ("b[0]", 1), ("b[1].c", True), ("e", -2500.0)]
    for _, start, end, value in leaves:
        assert text[start:end] in ('"x\\"y"', "1", "true", "-2.5e3")


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
