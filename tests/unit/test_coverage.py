"""Compile coverage (`workers.compiler`), the pure part: which backend enforces which keyword. The real
compilations in a child process are in tests/integration/test_coverage.py."""

from __future__ import annotations

import pytest

from workers.compiler import enforced_by, unenforced_keywords


def test_enforced_by_names_formats_nothing_checks() -> None:
    schema = {"$schema": "http://json-schema.org/draft-07/schema#", "type": "object",
              "properties": {"tag": {"type": "string", "format": "phone-number"}, "d": {"format": "date"}}}
    text = enforced_by(schema, [])
    assert text.startswith("post-check: JSON Schema Draft 7 validator (jsonschema)")
    assert "phone-number at /properties/tag/format" in text and "date" not in text
    template = {"type": "object", "properties": {"u": {"type": "string", "format": "uri-template"}}}
    assert "uri-template" in enforced_by(template, [])  # jsonschema has no checker for it here...
    assert "uri-template" not in enforced_by(template, [], "xgrammar")  # ...but XGrammar's grammar enforces it


def test_unenforced_keywords_follow_the_table() -> None:
    schema = {
        "type": "object",
        "properties": {
            "when": {"if": {"minimum": 5}, "then": {"maximum": 9}, "type": "integer"},
            "alt": {"oneOf": [{"type": "string"}, {"type": "integer"}]},
            "code": {"type": "string", "pattern": "^[A-Z]+$"},
        },
        "dependentSchemas": {"when": {"required": ["alt"]}},
    }
    assert unenforced_keywords(schema, "xgrammar") == [
        ("dependentSchemas", "/dependentSchemas"), ("oneOf", "/properties/alt/oneOf"), ("if", "/properties/when/if")]
    assert unenforced_keywords(schema, "guidance") == []  # guidance refuses those keywords outright instead
    with pytest.raises(ValueError, match="unknown backend"):
        unenforced_keywords(schema, "outlines")


