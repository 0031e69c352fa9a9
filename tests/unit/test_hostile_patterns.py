"""Bounded regex work in the post-check (issue 19, item 3): catastrophic patterns stay correct and bounded,
and the real-world JSONSchemaBench patterns the ReDoS guard used to refuse are accepted."""

from __future__ import annotations

import ast
import inspect
import json

import jsonschema
import pytest

import schemas.validation
from schemas.limits import check_limits, redos_risk
from schemas.patterns import bounded_search, runs_linear, to_re2
from schemas.validation import full_validator, schema_errors
from tests.fixtures.corpora import SHARED, TINY, needs_shared

BENCH = SHARED / "jsonschemabench-dev" / "schemas"

# 12 of the 14 JSONSchemaBench patterns refused by limits.pattern_redos before RE2 ran the post-check (the other
# two, o13457 and o33032, are long; their files are checked whole below):
# (corpus file, pattern, a value it matches). Each is catastrophic under a backtracking engine.
REAL_WORLD = [
    ("Github_hard/o10515.json", r"(application|audio|image|text|video|message|multipart|model)/.+(;\s*.+=.+)*",
     "text/plain; charset=utf-8"),
    ("Github_hard/o63519.json", r"^[a-z\d_\.-]+@([a-z\d\.-]+\.)+[a-z]+$", "jane.doe@mail.example.com"),
    ("Github_hard/o69972.json", r"^\w+([\.-]?\w+)*@\w+([\.-]?\w+)*(\.\w{2,})+$", "jane.doe@example.co.uk"),
    ("Github_hard/o78043.json", r"^@?[a-z](?:[-\/]?[_a-z0-9]+)*$", "@scope/pkg-name"),
    ("Github_hard/o82821.json", r"^(https?:\/\/)?([\da-z\.-]+)\.([a-z\.]{2,6})([\/\w \.-]*)*\/?$",
     "https://example.com/a/b.html"),
    ("Github_hard/o82827.json", r"^(https?:\/\/)?([\da-z\.-]+)\.([a-z\.]{2,6})([\/\w \.-]*)*\/?$", "example.org/"),
    ("Github_medium/o10310.json", r"^(?:[A-Za-z0-9]+[-]?)+[A-Za-z0-9]$", "my-org-2"),
    ("Github_medium/o42601.json", r"^(https?:\/\/)?([\da-z\.-]+)\.([a-z\.]{2,6})([\/\w \.-]*)*\/?$",
     "http://x.io/path"),
    ("Github_medium/o48073.json", r"^[a-z\d_\.-]+@([a-z\d\.-]+\.)+[a-z]+$", "a_b@c.de"),
    ("Github_medium/o71260.json", r"^([a-z0-9])+((-)?([a-z0-9])+)*$", "web-01"),
    ("Github_medium/o82688.json", r"^(https?:\/\/)?([\da-z\.-]+)\.([a-z\.]{2,6})([\/\w \.-]*)*\/?$",
     "https://a.b.cd/"),
    ("JsonSchemaStore/tizen_workspace.json", r"^((?:.?[0-9]+){3,}(?:[-a-z]+)?)$", "6.0.1-beta"),
]
HOSTILE = ["a" * 1000 + "!", "-" * 999 + "@", "a." * 500 + "@", "0" * 1000 + "#", "a@" + "a." * 499 + "!"]


@pytest.mark.parametrize(("name", "pattern", "good"), REAL_WORLD, ids=[r[0] for r in REAL_WORLD])
def test_real_world_patterns_are_accepted_and_run_bounded(name: str, pattern: str, good: str) -> None:
    assert redos_risk(pattern) and runs_linear(pattern)  # catastrophic when backtracked, linear under RE2
    schema = {"type": "object", "properties": {"v": {"type": "string", "pattern": pattern}}}
    check_limits(schema)
    validator = full_validator(schema)
    assert schema_errors(validator, {"v": good}) == []
    for value in HOSTILE:  # each would take Python's `re` minutes or more
        expected = bounded_search(pattern, value)
        assert [e["keyword"] for e in schema_errors(validator, {"v": value})] == ([] if expected else ["pattern"])


def test_corpus_files_with_such_patterns_are_accepted() -> None:
    """The tiny corpus's schema of four of these patterns, whole (the external files below, when present)."""
    check_limits(json.loads((TINY / "jsonschemabench-dev" / "schemas" / "Github_hard" / "o303.json").read_text()))


@needs_shared
def test_real_world_corpus_files_are_accepted() -> None:
    names = {r[0] for r in REAL_WORLD} | {"Github_ultra/o33032.json", "Github_hard/o13457.json"}
    for name in sorted(names):
        check_limits(json.loads((BENCH / name).read_text()))


@pytest.mark.parametrize("pattern", ["^(a|aa)+$", "^(.*a){12}$"])
def test_the_two_review_patterns_are_correct_on_1000_characters(pattern: str) -> None:
    """120.7 s on 41 characters under Python's `re` in the review; under RE2 these run in linear time."""
    schema = {"type": "object", "properties": {"v": {"type": "string", "pattern": pattern}},
              "patternProperties": {pattern: {"type": "integer"}}, "additionalProperties": False}
    validator = full_validator(schema)
    good, bad = "a" * 1000, "a" * 999 + "!"
    assert schema_errors(validator, {"v": good, good: 1}) == []
    assert [e["keyword"] for e in schema_errors(validator, {"v": bad})] == ["pattern"]
    keywords = sorted(e["keyword"] for e in schema_errors(validator, {bad: 1, good: "x"}))
    assert keywords == ["additionalProperties", "type"]


def test_re2_is_given_ecma_meaning() -> None:
    assert bounded_search(r"^\s$", "\u00a0") and not bounded_search(r"^\S$", "\u2028")
    assert bounded_search(r"^[\S]+$", "ab") and not bounded_search(r"^[\S]+$", "a b")
    assert bounded_search(r"^\u00e9$", "é") and bounded_search(r"^x[\s\S]*$", "x\ny")
    assert not bounded_search(r"^\d$", "٣")  # ECMA \d is ASCII (Python's would match)
    assert not bounded_search(r"^a$", "a\n")  # ECMA $ is the end (Python's matches before a final newline)
    assert to_re2(r"[^\S]") is None and not runs_linear(r"(a)\1") and not runs_linear(r"a(?=b)")


def test_every_jsonschema_module_that_searches_patterns_is_bounded() -> None:
    """A jsonschema upgrade that moves `re.search` into another module must fail here, not go unbounded."""
    searching = set()
    for module in (getattr(jsonschema, name) for name in dir(jsonschema) if name.startswith("_")):
        if inspect.ismodule(module) and module.__name__.startswith("jsonschema."):
            tree = ast.parse(inspect.getsource(module))
            calls = [n for n in ast.walk(tree) if isinstance(n, ast.Attribute) and n.attr == "search"
                     and isinstance(n.value, ast.Name) and n.value.id == "re"]
            if calls:
                searching.add(module.__name__)
    assert searching <= {m.__name__ for m in schemas.validation.PATTERN_MODULES}
    assert searching >= {"jsonschema._keywords", "jsonschema._utils"}
