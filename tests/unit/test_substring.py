"""Substring fields: a string the grammar restricts to a run of 1..K words of one cell of the document."""

from __future__ import annotations

import json
import re

import jsonschema
import pytest
import xgrammar as xgr
from xgrammar.testing import _is_grammar_accept_string

import schemas.substring as substring
from schemas.cells import EDGE_PUNCTUATION, sentences_of
from schemas.substring import (
    SUBSTRING_KEY,
    automaton,
    fixed_width_escapes,
    has_substring,
    runs_of,
    substring_node,
    to_ebnf,
)

DOC = ("Acme Office Supply (Oslo)\n77 Market St, San Francisco\n\nDate of issue: May 01, 2026\n"
       "Description | Qty | Amount\nDesign revisions | 6 | $420.60\n"
       'Note: the "rush" fee applies to C:\\orders only.\n')


def schema_with(field: dict) -> dict:
    return {"type": "object", "properties": {"vendor": field, "qty": {"type": "integer"},
                                             "note": {"type": "string", "maxLength": 5}},
            "required": ["vendor", "qty", "note"]}


def accepts(ebnf: str, vendor, qty=1, note="ok") -> bool:
    text = json.dumps({"vendor": vendor, "qty": qty, "note": note}, separators=(",", ":"), ensure_ascii=False)
    return _is_grammar_accept_string(ebnf, text)


@pytest.fixture(scope="module")
def ebnf() -> str:
    return to_ebnf(schema_with(substring_node(DOC, 3, None, nullable=True)))


def reference_runs(document: str, max_words: int, max_length: int | None) -> set[str]:
    """The language, written out: each run as the cell writes it (a cell of a long document is not cut after a
    `label:`), its first word maybe without its leading punctuation, its last word maybe without its trailing
    punctuation or possessive `'s`; words cut at spaces and em dashes."""
    found: set[str] = set()
    for cell in sentences_of(document, labels=False):
        bounds = [m.span() for m in re.finditer(r"[^\s—]+", cell)]
        for i, (start, _) in enumerate(bounds):
            for j in range(i, min(i + max_words, len(bounds))):
                first = cell[start:bounds[i][1]]
                for head in {first, first.lstrip(EDGE_PUNCTUATION)} - {""}:
                    run = head + cell[bounds[i][1]:bounds[j][1]] if j > i else head
                    last = run[len(run) - (bounds[j][1] - bounds[j][0]):] if j > i else run
                    found.add(run)
                    for end in (last.rstrip(EDGE_PUNCTUATION), re.sub(r"['’]s$", "", last.rstrip(EDGE_PUNCTUATION))):
                        if end:
                            found.add(run[:len(run) - len(last)] + end)
    return {r for r in found if max_length is None or len(r) <= max_length}


def test_the_node_is_a_plain_json_serialisable_string_to_a_validator() -> None:
    node = substring_node(DOC, 3, 40, nullable=False)
    assert node["type"] == "string" and set(node) == {"type", SUBSTRING_KEY}
    assert json.loads(json.dumps(node)) == node
    jsonschema.Draft202012Validator(node).validate("anything at all")
    nullable = substring_node(DOC, 3, None, nullable=True)
    assert nullable["anyOf"][1] == {"type": "null"}
    assert has_substring(schema_with(nullable)) and not has_substring(schema_with({"type": "string"}))
    assert substring_node(DOC, 3, None, True) == nullable  # stable: the engine dedups on its JSON


@pytest.mark.parametrize(("max_words", "max_length"), [(1, None), (3, None), (12, None), (12, 9)])
def test_the_automaton_holds_exactly_the_runs(max_words: int, max_length: int | None) -> None:
    auto = automaton(substring.document_cells(DOC), max_words, max_length)
    assert runs_of(auto) == reference_runs(DOC, max_words, max_length)


def test_runs_inside_a_cell_are_accepted_as_written_and_without_edge_punctuation(ebnf: str) -> None:
    for value in ["Acme", "Acme Office Supply", "Supply (Oslo)", "Supply (Oslo", "Oslo", "San Francisco",
                  "77 Market St,", "77 Market St", "May 01, 2026", "Design revisions", "$420.60",
                  'the "rush" fee', '"rush"', "rush", "C:\\orders only.", "C:\\orders only", None,
                  "issue: May"]:  # a long document is prose: a colon does not cut its cells
        assert accepts(ebnf, value), value


def test_crossing_a_cell_too_many_words_or_an_invented_word_is_refused(ebnf: str) -> None:
    for value in ["Supply (Oslo) 77",  # crosses a line
                  "revisions 6", "Qty | Amount",  # crosses a `|` cell break
                  "Acme Office Supply (Oslo)",  # 4 words, K is 3
                  "Acme Bureau", "acme", "Acme  Office", "Acme ", " Acme", "", "San Fran"]:
        assert not accepts(ebnf, value), value


def test_other_fields_keep_the_plain_json_schema_grammar(ebnf: str) -> None:
    assert accepts(ebnf, "Acme", qty=-12, note="12345")
    assert not accepts(ebnf, "Acme", qty=1.5)
    assert not accepts(ebnf, "Acme", note="123456")  # the other string's maxLength holds
    compact = json.dumps({"vendor": "Acme", "qty": 1, "note": "ok"})  # with spaces: not the engine's JSON
    assert not _is_grammar_accept_string(ebnf, compact)
    plain = schema_with({"type": "string"})
    expected = xgr.Grammar.from_json_schema(json.dumps(plain), any_whitespace=False, separators=(",", ":"))
    assert to_ebnf(plain).strip() == fixed_width_escapes(str(expected)).strip()  # `\xHH` as `\u00HH`: the same
    assert str(xgr.Grammar.from_ebnf(to_ebnf(plain))).strip() == str(expected).strip()  # grammar, read back


def test_max_length_is_exact_in_characters() -> None:
    ebnf = to_ebnf(schema_with(substring_node(DOC, 12, 13, nullable=False)))
    assert not accepts(ebnf, "Acme Offi")  # not a word boundary
    assert accepts(ebnf, "Acme Office")  # 11 characters
    assert not accepts(ebnf, "Acme Office Supply")  # 18 characters
    assert not accepts(ebnf, None)


def test_wide_states_are_split_and_keep_their_language(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(substring, "MAX_FAN_OUT", 2)
    document = "alpha beta gamma delta alpine alps beta-2 gamma ray"
    ebnf = to_ebnf(schema_with(substring_node(document, 2, None, nullable=False)))
    for value in ["alpha", "alps", "alpine alps", "beta-2 gamma", "gamma ray", "ray"]:
        assert accepts(ebnf, value), value
    for value in ["alp", "alpha gamma", "beta ray", "gamma ray ray"]:
        assert not accepts(ebnf, value), value


def test_two_fields_one_document_share_nothing_but_work() -> None:
    schema = {"type": "object", "properties": {"a": substring_node(DOC, 2, None, False),
                                               "b": substring_node(DOC, 1, None, False)},
              "required": ["a", "b"]}
    ebnf = to_ebnf(schema)
    xgr.Grammar.from_ebnf(ebnf)
    assert _is_grammar_accept_string(ebnf, '{"a":"Market St,","b":"Qty"}')
    assert not _is_grammar_accept_string(ebnf, '{"a":"Qty","b":"Market St,"}')


def test_the_word_bound_shrinks_to_fit_the_grammar_budget() -> None:
    line = " ".join(f"w{i}" for i in range(100))  # one long cell of distinct words: about 100 * K states
    autos = {k: automaton([line], k, None) for k in (1, 3, 6, 12)}
    assert autos[12].size > autos[6].size > autos[3].size > autos[1].size
    assert all(substring.state_bound(line, k) >= auto.size for k, auto in autos.items())
    sizes = {k: substring.grammar_bytes(auto) for k, auto in autos.items()}
    assert substring.fit_max_words(line, 12, max_bytes=sizes[12]) == 12
    assert substring.fit_max_words(line, 12, max_bytes=sizes[12] - 1) == 6
    assert substring.fit_max_words(line, 12, max_bytes=sizes[3]) == 3
    assert substring.fit_max_words(line, 12, max_bytes=10) is None


def test_a_node_held_at_two_places_and_two_nullable_fields_of_a_long_document_both_build() -> None:
    """One node object at two places (a deep copy keeps the sharing) and two nullable text fields grounded in
    one long document each become the substring rules, for EBNF and for a backend without EBNF."""
    from schemas.grounding import MAX_CANDIDATES, ground, spans
    from schemas.substring import without_substrings

    node = substring_node("alpha beta gamma", 2)
    shared = {"type": "object", "properties": {"a": node, "b": node}, "required": ["a", "b"]}
    assert "XSUBSTRING_SENTINEL" not in to_ebnf(shared)
    assert without_substrings(shared)["properties"]["b"] == {"type": "string"}
    words = [f"w{i}" for i in range(400)]
    document = " ".join(words)
    assert len(spans(document)) > MAX_CANDIDATES
    nullable = {"anyOf": [{"type": "string"}, {"type": "null"}]}
    schema = {"type": "object", "properties": {"x": nullable, "y": dict(nullable)}, "required": ["x", "y"]}
    grounded = ground(schema, document, mode="auto")
    assert has_substring(grounded) and "XSUBSTRING_SENTINEL" not in to_ebnf(grounded)
    assert not has_substring(without_substrings(grounded))


def test_a_grounded_decimal_is_spliced_as_the_document_writes_it_not_as_17_digits() -> None:
    """XGrammar writes the float enum value 8.7 as 8.6999999999999993 (ten tokens more); a grounded number
    node carries its candidates' exact literals, which `to_ebnf` splices in instead."""
    from schemas.grounding import ground
    from schemas.substring import without_substrings

    schema = {"type": "object", "properties": {"score": {"type": "number", "x-grounded": "number"}},
              "required": ["score"]}
    grounded = ground(schema, "Rated 8.7 by critics and 9 by fans.")
    assert grounded["properties"]["score"] == {"enum": [8.7, 9], "x-literals": ["8.7", "9"]}
    grammar = xgr.Grammar.from_ebnf(to_ebnf(grounded))
    assert _is_grammar_accept_string(grammar, '{"score":8.7}') and _is_grammar_accept_string(grammar, '{"score":9}')
    assert not _is_grammar_accept_string(grammar, '{"score":8.6999999999999993}')
    assert without_substrings(grounded)["properties"]["score"] == {"enum": [8.7, 9]}
    assert "x-literals" not in json.dumps(ground(schema, "Rated 8 by critics and 9 by fans."))  # integers: as is


ZH = ("在浩瀚的电影宇宙中，这部由传奇导演大卫·芬奇倾力执导的作品《索恩之影》于2023年上映。"
      "游戏名称“量子跃迁：奇点危机”搭载HarmonyOS Next系统，售价¥499。")


def zh_schema(field: dict) -> dict:
    return {"type": "object", "properties": {"director": field}, "required": ["director"]}


def test_a_script_without_spaces_runs_over_its_characters_within_one_clause() -> None:
    """Issue 54 (DeepJSONEval zh dev): a Chinese name or title is a run of characters, not of space-delimited
    words; a run may start and end at any character, holds a Latin run whole, and never crosses a full-width
    comma or stop."""
    node = substring_node(ZH, 24, None, unit="char")
    assert node[SUBSTRING_KEY]["unit"] == "char"
    ebnf = to_ebnf(zh_schema(node))

    def ok(value: str) -> bool:
        return _is_grammar_accept_string(ebnf, json.dumps({"director": value}, ensure_ascii=False,
                                                          separators=(",", ":")))

    for value in ("大卫·芬奇", "《索恩之影》", "索恩之影", "量子跃迁：奇点危机", "HarmonyOS Next", "HarmonyOS"):
        assert ok(value), value
    too_long = "这部由传奇导演大卫·芬奇倾力执导的作品《索恩之影》于2023年上映"  # 30 characters
    for value in ("Director", too_long, "宇宙中，这部", "Harmony", "芬奇导演"):
        assert not ok(value), value


def test_a_spaced_documents_payload_is_as_before_units() -> None:
    """The word unit writes no `unit` key, so the grammars (and their cache keys) of every spaced document are
    those of before."""
    assert "unit" not in substring_node(DOC, 3, None)[SUBSTRING_KEY]
    assert runs_of(automaton(["大卫·芬奇执导"], 2, None, "char")) == {"大", "大卫", "卫", "卫·", "·", "·芬", "芬",
                                                                      "芬奇", "奇", "奇执", "执", "执导", "导"}


def _emitted(auto: substring.Automaton) -> int:
    return sum(len(rule) + 1 for rule in substring.automaton_rules(auto, "substr0_"))


@pytest.mark.parametrize(("cells", "max_words", "max_length", "unit"), [
    (substring.document_cells(DOC), 12, None, "word"),
    (substring.document_cells(DOC), 3, 9, "word"),
    (["alpha beta gamma delta alpine alps beta-2 gamma ray al a b c d e f g h"], 2, None, "word"),  # a wide root
    ([], 12, None, "word"),  # no word at all: the root has no edges
    (substring.document_cells(ZH, unit="char"), 24, None, "char"),
    (substring.document_cells(ZH, unit="char"), 6, 5, "char"),
])
def test_the_grammars_size_is_counted_as_its_rules_are_written(cells, max_words, max_length, unit) -> None:
    """`grammar_bytes` counts the narrow states' rules without writing them: the count is the written size."""
    auto = automaton(cells, max_words, max_length, unit)
    assert substring.grammar_bytes(auto) == _emitted(auto)


@pytest.mark.parametrize("unit", ["word", "char"])
def test_the_automaton_is_minimal(unit: str) -> None:
    """Every state is reachable, and no two states have the same edges: in an acyclic automaton whose states all
    accept (or lead to one that does), that is minimality. A repeated phrase and clause share their states."""
    document = (ZH + "\n" + ZH) if unit == "char" else (DOC + "\nDesign revisions again. Design revisions | 6 |")
    auto = automaton(substring.document_cells(document, unit=unit), 12, None, unit)
    assert len({tuple(edges) for edges in auto.edges}) == auto.size
    seen, stack = {substring.ROOT}, [substring.ROOT]
    while stack:
        for _, target in auto.edges[stack.pop()]:
            if target not in seen:
                seen.add(target)
                stack.append(target)
    assert set(range(auto.size)) - seen <= {substring.FINAL}  # the final state is reached only by an end


def test_a_rows_grammar_reuses_the_automaton_its_grounding_fitted() -> None:
    """`fit_max_words` builds the automaton of the bound it picks; `to_ebnf` finds it in the cache, not anew."""
    document = " ".join(f"v{i}" for i in range(50))
    substring._automaton.cache_clear()
    words = substring.fit_max_words(document, 12)
    built = substring._automaton.cache_info().misses
    to_ebnf(schema_with(substring_node(document, words, None)))
    assert substring._automaton.cache_info().misses == built
    assert substring._automaton.cache_info().hits >= 1
