"""A required name the schema does not declare: the grammar closes objects, so the contract declares it
(`schemas.declared`), with the schema JSON Schema gives it there; validation's verdict does not change."""

import json

import jsonschema
import pytest
import xgrammar
from xgrammar.testing import _is_grammar_accept_string

from schemas.contract import SchemaContract
from schemas.declared import declare_required
from schemas.lint import lint

# DeepJSONEval's shape: `characteristics` requires two names it does not declare
PLANT = {"type": "object", "required": ["characteristics"], "properties": {"characteristics": {
    "type": "object", "required": ["morphology", "appearance"],
    "properties": {"morphology": {"type": "object", "properties": {"leaf": {"type": "string"}}}}}}}
FULL = {"characteristics": {"morphology": {"leaf": "fern"}, "appearance": {"colour": "green"}}}
NESTED_WRONG = {"characteristics": {"morphology": {"leaf": "fern", "appearance": {}}}}


def grammar_accepts(schema, instance) -> bool:
    grammar = xgrammar.Grammar.from_json_schema(json.dumps(schema), any_whitespace=False)
    return _is_grammar_accept_string(grammar, json.dumps(instance))  # XGrammar's separators: ", " and ": "


def test_the_closed_grammar_of_the_schema_as_written_refuses_every_valid_output():
    jsonschema.validate(FULL, PLANT)  # valid JSON Schema-wise
    assert not grammar_accepts(PLANT, FULL)


def test_declared_the_grammar_writes_the_name_and_still_requires_it():
    declared = declare_required(PLANT)
    assert declared["properties"]["characteristics"]["properties"]["appearance"] == {}
    assert grammar_accepts(declared, FULL)
    assert not grammar_accepts(declared, NESTED_WRONG)  # still required where the schema requires it


@pytest.mark.parametrize("instance", [FULL, NESTED_WRONG, {"characteristics": {"morphology": {}, "appearance": 3}},
                                      {"characteristics": {"appearance": None}}, {}])
def test_validation_gives_the_same_verdict_before_and_after(instance):
    before = jsonschema.Draft202012Validator(PLANT).is_valid(instance)
    assert jsonschema.Draft202012Validator(declare_required(PLANT)).is_valid(instance) == before


def test_the_name_takes_additional_or_pattern_properties_schema_and_never_under_false():
    typed = {"type": "object", "required": ["n"], "additionalProperties": {"type": "integer"}}
    assert declare_required(typed)["properties"] == {"n": {"type": "integer"}}
    pattern = {"type": "object", "required": ["x_n"], "patternProperties": {"^x_": {"type": "string"}},
               "additionalProperties": {"type": "integer"}}
    assert declare_required(pattern)["properties"] == {"x_n": {"type": "string"}}
    closed = {"type": "object", "required": ["n"], "additionalProperties": False}
    assert declare_required(closed) is closed


def test_a_schema_that_declares_every_required_name_is_the_same_object():
    fine = {"type": "object", "required": ["a"], "properties": {"a": {"type": "string"}},
            "$defs": {"x": {"type": "object", "properties": {}}}}
    assert declare_required(fine) is fine


def test_the_contract_declares_and_lint_says_so(tmp_path):
    contract = SchemaContract.from_dict(PLANT)
    assert "appearance" in contract.json_schema["properties"]["characteristics"]["properties"]
    assert contract.check(json.dumps(FULL)) == FULL
    found = [w for w in lint(PLANT) if w.code == "undeclared_required"]
    assert [w.path for w in found] == ["characteristics.appearance"]
    closed = {"type": "object", "required": ["n"], "properties": {}, "additionalProperties": False}
    assert "no output can pass" in [w for w in lint(closed) if w.code == "undeclared_required"][0].message
