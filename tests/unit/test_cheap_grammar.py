"""schemas.cheap_grammar: XGrammar EBNF rewritten to compile faster, admitting exactly the same strings and, at every
step of a decode, exactly the same tokens."""

from __future__ import annotations

import json
import re

import pytest

from schemas.cheap_grammar import CHUNK, cheap_grammar, chunk_repetitions, chunked, long_strings, shared_rules

CLASS = r'c ::= (([^\"\\\r\n]))'


def _accepts(ebnf: str, text: str) -> bool:
    xgrammar = pytest.importorskip("xgrammar")
    from xgrammar.testing import _is_grammar_accept_string

    return _is_grammar_accept_string(xgrammar.Grammar.from_ebnf(ebnf), text)


@pytest.mark.parametrize(("low", "high"), [(0, 8), (0, 9), (0, 11), (0, 80), (3, 80), (5, 17), (8, 8), (13, 13),
                                           (0, 200), (7, 9)])
def test_a_chunked_repetition_admits_the_same_lengths(low: int, high: int) -> None:
    ebnf = f'root ::= (("\\"" c{{{low}, {high}}} "\\""))\n{CLASS}\n'
    rewritten = chunk_repetitions(ebnf)
    assert f"c{{{low}, {high}}}" not in rewritten  # rewritten, not left alone
    for length in range(high + 3):
        text = '"' + "ab"[length % 2] * length + '"'
        assert _accepts(rewritten, text) == (low <= length <= high), (low, high, length)


def test_the_formula_counts_every_length_once_in_its_range() -> None:
    """`chunked`'s expression, read as sets of lengths (a pure check of the formula, no XGrammar)."""

    def lengths(expr: str, k: int) -> set[int]:
        out = {0}
        for alt_a, alt_b in re.findall(r"\(\((.*?)\) \| \((.*?)\)\)", expr):
            out = {a + b for a in out for b in _seq(alt_a, k) | _seq(alt_b, k)}
        fixed = expr.split("((", 1)[0] if "((" in expr else expr
        return {a + b for a in _seq(fixed.strip("( )"), k) for b in out}

    def _seq(seq: str, k: int) -> set[int]:
        total = {0}
        for name, low, high in re.findall(r"(\w+)\{(\d+), (\d+)\}", seq):
            unit = k if name.endswith(f"_k{k}") else 1
            total = {t + unit * n for t in total for n in range(int(low), int(high) + 1)}
        return total

    for k in (2, 3, 4, 8):
        for low in range(0, 12):
            for high in range(max(low, 2 * k), 40):
                assert lengths(chunked("c", f"c_k{k}", low, high, k), k) == set(range(low, high + 1)), (k, low, high)


def test_short_repetitions_and_other_rules_are_left_alone() -> None:
    ebnf = (f'root ::= (("\\"" c{{0, {2 * CHUNK - 1}}} "\\"" d{{0, 40}} e{{1, -1}}))\n{CLASS}\n'
            'd ::= (("ab"))\ne ::= (([0-9]))\n')
    assert chunk_repetitions(ebnf) == ebnf


def test_a_rule_name_inside_a_literal_is_not_rewritten() -> None:
    ebnf = f'root ::= (("c{{0, 80}}" c{{0, 80}}))\n{CLASS}\n'
    rewritten = chunk_repetitions(ebnf)
    assert '"c{0, 80}"' in rewritten and " c{0, 80}" not in rewritten
    assert _accepts(rewritten, "c{0, 80}" + "x" * 80) and not _accepts(rewritten, "c{0, 80}" + "x" * 81)


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


def test_shared_rules_repeat_until_no_two_bodies_are_the_same() -> None:
    ebnf = 'root ::= ((p "," q))\np ::= ((a))\nq ::= ((b))\na ::= (("1"))\nb ::= (("1"))\n'
    assert shared_rules(ebnf).splitlines() == ['root ::= ((p "," p))', 'p ::= ((a))', 'a ::= (("1"))']


def test_long_strings_finds_string_bounds_of_eight_or_more() -> None:
    assert long_strings({"type": "object", "properties": {"a": {"type": "array",
                                                                "items": {"type": "string", "maxLength": 80}}}})
    assert long_strings({"anyOf": [{"type": "string", "minLength": 10}, {"type": "null"}]})
    assert not long_strings({"type": "string", "maxLength": 7})
    assert not long_strings({"enum": [{"maxLength": 80}], "const": {"maxLength": 90}})
    assert not long_strings({"type": "array", "maxItems": 80})


def _schema() -> dict:
    runs = ["Title", "Title to", "Title to the", "5.", "Late payments", "Neither party"]
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
    cheap = cheap_grammar(plain)
    assert not re.search(r"\{\d+, (?:80|12)\}", cheap) and len(cheap) < len(plain)
    for n in (0, 1, 79, 80, 81):
        for code in ("null", '"' + "9" * 8 + '"', '"' + "9" * 9 + '"', '"' + "9" * 12 + '"', '"' + "9" * 13 + '"'):
            value = {"customer": "Title to", "vendor": {"name": None, "address": "5."}, "items": ["a" * n, "b"]}
            text = json.dumps(value, separators=(",", ":"))[:-1] + f',"code":{code}}}'
            assert _accepts(cheap, text) == _accepts(plain, text), (n, code)


def test_every_step_of_a_decode_allows_the_same_tokens() -> None:
    """The bundled model's tokenizer, the JSON Schema compiled as vLLM compiles it and the cheap EBNF as a request
    carries it: the token mask after every token of an output (up to the 80-character bound, where only the
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
    cheap = compiler.compile_grammar(cheap_grammar(to_ebnf(schema)))
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


def test_a_request_carries_the_cheap_grammar_only_where_xgrammar_compiles_a_long_string() -> None:
    pytest.importorskip("vllm")
    from schemas.substring import to_ebnf
    from workers.engine.outputs import grammar_spec, structured_params

    long = _schema()
    short = {"type": "object", "properties": {"a": {"type": "string", "maxLength": 7}}, "required": ["a"]}
    sent = structured_params(long, "xgrammar")
    assert sent.json is None and sent.grammar == cheap_grammar(to_ebnf(long))
    assert structured_params(short, "xgrammar").json == grammar_spec(short)
    assert structured_params(long, "guidance").json == grammar_spec(long)
