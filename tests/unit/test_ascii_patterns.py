"""A pattern reaches the grammar backend in ASCII (`schemas.patterns.with_ascii_patterns`): XGrammar 0.2.8 reads a
raw non-ASCII character inside a negated class wrongly and then admits a quote in the string's JSON text, which lets
the model close the string inside the value (invalid JSON)."""

from __future__ import annotations

import json
import re

import pytest

from schemas.patterns import ascii_pattern, with_ascii_patterns
from workers.engine.outputs import grammar_spec

NOT_CHINESE = "^[^\u4e00-\u9fff]{1,20}$"  # written with the raw characters, as a user's schema may


def test_the_escaped_pattern_means_the_same() -> None:
    escaped = ascii_pattern(NOT_CHINESE)
    assert escaped == "^[^\\u4e00-\\u9fff]{1,20}$" and escaped.isascii()
    for value in ("Quantum Echo", "量子", "a\u4e00b", "é", ""):
        assert bool(re.fullmatch(NOT_CHINESE, value)) == bool(re.fullmatch(escaped, value))
    assert ascii_pattern("^caf\u00e9$") == "^caf\\u00e9$" and ascii_pattern("^\U0001f600$") == "^\U0001f600$"


def test_only_pattern_values_change_and_an_ascii_schema_is_the_same_object() -> None:
    plain = {"type": "object", "properties": {"pattern": {"type": "string", "pattern": "^[a-z]+$"},
                                              "name": {"type": "string", "description": "名前"}}}
    assert with_ascii_patterns(plain) is plain
    data = {"const": {"pattern": "é"}, "enum": [{"pattern": "é"}], "default": {"pattern": "é"}}
    assert with_ascii_patterns(data) is data  # values, not schemas
    named = {"properties": {"enum": {"type": "string", "pattern": NOT_CHINESE}}}  # a property named `enum`
    assert with_ascii_patterns(named)["properties"]["enum"]["pattern"] == ascii_pattern(NOT_CHINESE)
    schema = {"type": "object", "properties": {"t": {"anyOf": [{"type": "string", "pattern": NOT_CHINESE},
                                                                {"type": "null"}], "description": "名前"}}}
    escaped = with_ascii_patterns(schema)
    assert escaped["properties"]["t"]["anyOf"][0]["pattern"] == ascii_pattern(NOT_CHINESE)
    assert escaped["properties"]["t"]["description"] == "名前" and schema["properties"]["t"]["anyOf"][0][
        "pattern"] == NOT_CHINESE  # the given schema is not changed


def test_xgrammar_keeps_the_json_valid_under_the_schema_a_request_carries() -> None:
    xgr = pytest.importorskip("xgrammar")
    from xgrammar.testing import _is_grammar_accept_string

    schema = {"type": "object", "properties": {"t": {"type": "string", "pattern": NOT_CHINESE}}, "required": ["t"]}

    def accepts(spec: str) -> dict[str, bool]:
        grammar = xgr.Grammar.from_json_schema(spec, any_whitespace=False)
        return {v: _is_grammar_accept_string(grammar, '{"t": "' + v + '"}')
                for v in ("Quantum Echo", 'Movie"s "object', "量子")}

    assert accepts(json.dumps(schema))['Movie"s "object'], "XGrammar reads raw classes right now: drop this"
    assert accepts(grammar_spec(schema)) == {"Quantum Echo": True, 'Movie"s "object': False, "量子": False}


def test_the_ebnf_of_a_schema_with_a_substring_node_reads_accented_values_as_written() -> None:
    """XGrammar prints `á` as `\\xe1` and reads `\\xe1f` back as U+0E1F: `to_ebnf` writes such escapes `\\u00e1`.
    Before, `Gráficas` was refused and `Grฟicas` admitted (issue 54's blind euro job: 4 of 42 vendors)."""
    xgrammar = pytest.importorskip("xgrammar")
    from xgrammar.testing import _is_grammar_accept_string as accepts

    from schemas.substring import LITERALS_KEY, fixed_width_escapes, to_ebnf

    schema = {"type": "object", "required": ["vendor", "total"], "properties": {
        "vendor": {"enum": ["Gráficas Navarro S.L.", "Lindenstraße 4", "Asesoría", "ÿ0"]},
        "total": {"enum": [131.1, 4923.23], LITERALS_KEY: ["131.1", "4923.23"]}}}
    grammar = xgrammar.Grammar.from_ebnf(to_ebnf(schema))
    for vendor in ("Gráficas Navarro S.L.", "Lindenstraße 4", "Asesoría", "ÿ0"):
        assert accepts(grammar, json.dumps({"vendor": vendor, "total": 131.1}, ensure_ascii=False,
                                           separators=(",", ":"))), vendor
    for wrong in ("Gr\u0e1ficas Navarro S.L.", "Lindenstra\u0dfe 4", "Asesor\u0eda"):
        assert not accepts(grammar, json.dumps({"vendor": wrong, "total": 131.1}, ensure_ascii=False,
                                               separators=(",", ":"))), wrong
    assert fixed_width_escapes(r'"\\xe1" "\xe1f" [^"\\\x00-\x1f]') == r'"\\xe1" "\u00e1f" [^"\\\u0000-\u001f]'
