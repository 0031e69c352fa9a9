"""schemas.cheap_grammar: XGrammar EBNF rewritten to compile faster, admitting exactly the same strings and, at every
step of a decode, exactly the same tokens."""

from __future__ import annotations

import json

import pytest

from schemas.cheap_grammar import repeated_enums, shared_rules


def _accepts(ebnf: str, text: str) -> bool:
    xgrammar = pytest.importorskip("xgrammar")
    from xgrammar.testing import _is_grammar_accept_string

    return _is_grammar_accept_string(xgrammar.Grammar.from_ebnf(ebnf), text)


def test_rules_written_twice_are_written_once_and_root_is_kept() -> None:
    ebnf = ('root ::= ((a "," b "," w))\n'
            'a ::= (("\\"x\\"") | ("\\"y a\\""))\n'
            'b ::= (("\\"x\\"") | ("\\"y a\\""))\n'
            'w ::= ((b) | ("null"))\n')
    shared = shared_rules(ebnf)
    assert shared.splitlines() == ['root ::= ((a "," a "," w))', 'a ::= (("\\"x\\"") | ("\\"y a\\""))',
                                   'w ::= ((a) | ("null"))']
    for text in ('"x","y a","x"', '"y a","x",null', '"x","x","y"', '"x","y b",null'):
        assert _accepts(shared, text) == _accepts(ebnf, text), text


def test_a_rule_name_inside_a_literal_or_a_class_is_not_renamed() -> None:
    ebnf = 'root ::= ((a " b " b [b]))\na ::= (("x"))\nb ::= (("x"))\n'
    assert shared_rules(ebnf).splitlines() == ['root ::= ((a " b " a [b]))', 'a ::= (("x"))']


def test_shared_rules_repeat_until_no_two_bodies_are_the_same() -> None:
    ebnf = 'root ::= ((p "," q))\np ::= ((a))\nq ::= ((b))\na ::= (("1"))\nb ::= (("1"))\n'
    assert shared_rules(ebnf).splitlines() == ['root ::= ((p "," p))', 'p ::= ((a))', 'a ::= (("1"))']


def test_repeated_enums_finds_a_long_enum_written_twice() -> None:
    runs = [f"run {i}" for i in range(40)]
    nullable = {"anyOf": [{"enum": list(runs)}, {"type": "null"}]}
    assert repeated_enums({"properties": {"a": {"enum": runs}, "b": nullable}})
    assert not repeated_enums({"properties": {"a": {"enum": runs}, "b": {"enum": runs[:-1]}}})
    assert not repeated_enums({"properties": {"a": {"enum": runs[:8]}, "b": {"enum": runs[:8]}}})
    assert not repeated_enums({"properties": {"a": {"enum": runs}}})


def _schema() -> dict:
    runs = ["Title", "Title to", "Title to the", "5.", "Late payments", "Neither party"] + [f"{i}." for i in range(40)]
    text = {"anyOf": [{"enum": runs}, {"type": "null"}]}
    return {"type": "object", "properties": {
        "customer": text, "vendor": {"type": "object", "properties": {"name": text, "address": text},
                                     "required": ["name", "address"]},
        "items": {"type": "array", "items": {"type": "string", "maxLength": 80}, "maxItems": 6},
        "code": {"anyOf": [{"type": "string", "maxLength": 12, "minLength": 9}, {"type": "null"}]}},
        "required": ["customer", "vendor", "items", "code"]}


def test_the_rewritten_json_schema_grammar_admits_the_same_strings() -> None:
    from schemas.substring import to_ebnf

    plain = to_ebnf(_schema())
    cheap = shared_rules(plain)
    assert len(cheap) < len(plain) - 2 * len("|".join(_schema()["properties"]["customer"]["anyOf"][0]["enum"]))
    for n in (0, 1, 79, 80, 81):
        for code in ("null", '"' + "9" * 8 + '"', '"' + "9" * 9 + '"', '"' + "9" * 12 + '"', '"' + "9" * 13 + '"'):
            value = {"customer": "Title to", "vendor": {"name": None, "address": "5."}, "items": ["a" * n, "b"]}
            text = json.dumps(value, separators=(",", ":"))[:-1] + f',"code":{code}}}'
            assert _accepts(cheap, text) == _accepts(plain, text), (n, code)


def test_every_step_of_a_decode_allows_the_same_tokens() -> None:
    """The bundled model's tokenizer, the JSON Schema compiled as vLLM compiles it and the EBNF a request carries
    (its enum written once): the token mask after every token of an output (up to the 80-character bound, where only the
    closing quote may follow) is the same."""
    xgrammar = pytest.importorskip("xgrammar")
    transformers = pytest.importorskip("transformers")
    torch = pytest.importorskip("torch")
    from schemas.substring import to_ebnf
    from workers.bundled_model import prepare

    tokenizer = transformers.AutoTokenizer.from_pretrained(str(prepare()))
    info = xgrammar.TokenizerInfo.from_huggingface(tokenizer)
    compiler = xgrammar.GrammarCompiler(info, max_threads=2, cache_enabled=False)
    schema = _schema()
    plain = compiler.compile_json_schema(json.dumps(schema), any_whitespace=False, separators=(",", ":"))
    cheap = compiler.compile_grammar(shared_rules(to_ebnf(schema)))
    output = json.dumps({"customer": "Title to the", "vendor": {"name": None, "address": "Neither party"},
                         "items": ["Widget, blue (large) " * 3 + "x" * 17, "Hinge 4mm"], "code": "AB-123456"},
                        separators=(",", ":"))
    assert len(json.loads(output)["items"][0]) == 80
    ids = tokenizer.encode(output, add_special_tokens=False)
    matchers = [xgrammar.GrammarMatcher(plain), xgrammar.GrammarMatcher(cheap)]
    masks = [xgrammar.allocate_token_bitmask(1, info.vocab_size) for _ in matchers]
    for step, token in enumerate([*ids, None]):
        for matcher, mask in zip(matchers, masks, strict=True):
            matcher.fill_next_token_bitmask(mask)
        assert torch.equal(masks[0], masks[1]), f"masks differ after {step} tokens"
        if token is not None:
            assert all(m.accept_token(token) for m in matchers), step
    assert all(m.is_terminated() or m.accept_token(tokenizer.eos_token_id) for m in matchers)


def test_a_request_carries_shared_rules_only_where_xgrammar_would_compile_an_enum_twice() -> None:
    pytest.importorskip("vllm")
    from schemas.substring import to_ebnf
    from workers.engine.outputs import grammar_spec, structured_params

    long = _schema()
    short = {"type": "object", "properties": {"a": {"type": "string", "maxLength": 80}}, "required": ["a"]}
    sent = structured_params(long, "xgrammar")
    assert sent.json is None and sent.grammar == shared_rules(to_ebnf(long))
    assert structured_params(short, "xgrammar").json == grammar_spec(short)
    assert structured_params(long, "guidance").json == grammar_spec(long)
