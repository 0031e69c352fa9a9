"""The full post-check (`schemas.validation`): every keyword, formats on, errors named, nothing fetched."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import jsonschema
import pytest

from schemas.validation import SchemaRefError, checked_formats, draft_name, full_validator, schema_errors
from tests.fixtures.corpora import ROOTS

SUITE_FORMATS = Path("json-schema-test-suite") / "tests" / "draft2020-12" / "optional" / "format"


def errors_of(schema: dict, instance: object) -> list[dict]:
    return schema_errors(full_validator(schema), instance)


@pytest.mark.parametrize(
    ("fmt", "good", "bad"),
    [
        ("date", "2024-02-29", "2024-02-30"),
        ("date-time", "2024-01-31T10:20:30+01:00", "2024-01-31 10:20"),
        ("time", "23:59:60Z", "24:00:00Z"),
        ("email", "ann.lee@example.com", "ann..lee@example.com"),
        ("uri", "https://example.com/a?b=c#d", "example.com/no scheme"),
        ("uri-reference", "../a/b", "a b"),
        ("uuid", "123e4567-e89b-12d3-a456-426614174000", "123e4567-e89b-12d3-a456-42661417400"),
        ("ipv4", "192.168.0.1", "192.168.0.256"),
        ("ipv6", "2001:db8::1", "2001:db8::g"),
        ("hostname", "api.example.com", "-api.example.com"),
        ("duration", "P1Y2M3DT4H", "P1Y2D"),
        ("regex", "^[a-z]+$", "(unclosed"),
    ],
)
def test_formats_are_asserted(fmt: str, good: str, bad: str) -> None:
    schema = {"type": "object", "properties": {"v": {"type": "string", "format": fmt}}}
    assert errors_of(schema, {"v": good}) == []
    (error,) = errors_of(schema, {"v": bad})
    assert error["keyword"] == "format" and error["loc"] == ["v"]
    assert error["schema_path"] == "/properties/v/format"
    assert fmt in checked_formats(schema)


@pytest.mark.parametrize("root", ROOTS)
@pytest.mark.parametrize(
    "name",
    ["date", "date-time", "time", "duration", "email", "hostname", "ipv4", "ipv6", "uri", "uri-reference", "uuid",
     "json-pointer", "relative-json-pointer", "regex"],
)
def test_formats_agree_with_the_official_suite(name: str, root: Path) -> None:
    path = root / SUITE_FORMATS / f"{name}.json"
    disagreements = []
    for group in json.loads(path.read_text()):
        validator = full_validator(group["schema"])
        for case in group["tests"]:
            valid = not schema_errors(validator, case["data"])
            if valid != case["valid"]:
                disagreements.append(case["description"])
    assert disagreements == []


def test_min_length_next_to_pattern_is_enforced() -> None:
    """XGrammar drops minLength/maxLength next to pattern; the post-check must not."""
    schema = {"type": "object", "properties": {"code": {"type": "string", "pattern": "^[A-Z]+$", "minLength": 3,
                                                        "maxLength": 5}}}
    assert errors_of(schema, {"code": "ABCD"}) == []
    assert [e["keyword"] for e in errors_of(schema, {"code": "AB"})] == ["minLength"]
    assert [e["keyword"] for e in errors_of(schema, {"code": "ABCDEFG"})] == ["maxLength"]
    assert sorted(e["keyword"] for e in errors_of(schema, {"code": "ab"})) == ["minLength", "pattern"]


def test_errors_name_path_keyword_and_schema_path_sorted_by_path() -> None:
    schema = {
        "type": "object",
        "properties": {
            "lines": {"type": "array", "items": {"$ref": "#/$defs/line"}},
            "total": {"type": "number", "exclusiveMinimum": 0},
        },
        "required": ["lines", "total"],
        "$defs": {"line": {"type": "object", "properties": {"name": {"type": "string", "maxLength": 3}}}},
    }
    instance = {"total": 0, "lines": [{"name": "ok"}, {"name": "x"}, {"name": "too long"}] + [{"name": "y"}] * 8
                + [{"name": "also too long"}]}
    errors = errors_of(schema, instance)
    assert [e["loc"] for e in errors] == [["lines", "2", "name"], ["lines", "11", "name"], ["total"]]
    assert [e["keyword"] for e in errors] == ["maxLength", "maxLength", "exclusiveMinimum"]
    assert errors[0]["schema_path"] == "/properties/lines/items/$ref/properties/name/maxLength"
    assert errors[2]["schema_path"] == "/properties/total/exclusiveMinimum"
    assert all(e["type"] == e["keyword"] for e in errors)
    assert "is too long" in errors[0]["msg"]


def test_any_of_error_points_at_the_closest_branch() -> None:
    schema = {"type": "object", "properties": {"id": {"anyOf": [{"type": "integer"},
                                                                {"type": "string", "maxLength": 4}]}}}
    (error,) = errors_of(schema, {"id": "abcdefgh"})
    assert error["keyword"] == "anyOf" and error["loc"] == ["id"]
    assert "closest branch" in error["msg"] and "too long" in error["msg"]


def test_keywords_grammar_engines_skip_are_enforced() -> None:
    schema = {
        "type": "object",
        "properties": {"kind": {"enum": ["a", "b"]}, "x": {"type": "integer", "multipleOf": 3, "not": {"const": 9}},
                       "tags": {"type": "array", "uniqueItems": True, "contains": {"const": "t"}}},
        "dependentRequired": {"kind": ["x"]},
        "if": {"properties": {"kind": {"const": "b"}}}, "then": {"required": ["tags"]},
    }
    assert errors_of(schema, {"kind": "a", "x": 3, "tags": ["t"]}) == []
    bad = {"kind": "b", "x": 9, "tags": ["u", "u"]}
    assert {e["keyword"] for e in errors_of(schema, bad)} == {"not", "uniqueItems", "contains"}
    assert {e["keyword"] for e in errors_of(schema, {"kind": "b"})} == {"dependentRequired", "required"}


def test_draft_comes_from_dollar_schema() -> None:
    draft4 = {"$schema": "http://json-schema.org/draft-04/schema#", "type": "number", "minimum": 5,
              "exclusiveMinimum": True}
    assert draft_name(draft4) == "Draft 4" and draft_name({}) == "Draft 2020-12"
    assert errors_of(draft4, 6) == []
    assert [e["keyword"] for e in errors_of(draft4, 5)] == ["minimum"]


def test_invalid_schema_is_refused_up_front() -> None:
    with pytest.raises(jsonschema.SchemaError):
        full_validator({"type": "object", "properties": {"a": {"type": "strin"}}})


class _CountingHandler(BaseHTTPRequestHandler):
    hits = 0

    def do_GET(self) -> None:  # http.server's naming
        type(self).hits += 1
        body = json.dumps({"type": "integer"}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


def test_remote_ref_is_never_fetched() -> None:
    server = HTTPServer(("127.0.0.1", 0), _CountingHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_port}/int.json"
        validator = full_validator({"type": "object", "properties": {"n": {"$ref": url}}})
        with pytest.raises(SchemaRefError, match="remote \\$ref .*not fetched"):
            schema_errors(validator, {"n": "not an integer"})
    finally:
        server.shutdown()
    assert _CountingHandler.hits == 0


def test_unresolvable_local_ref_is_a_schema_fault() -> None:
    validator = full_validator({"type": "object", "properties": {"n": {"$ref": "#/$defs/missing"}}})
    with pytest.raises(SchemaRefError, match="does not resolve"):
        schema_errors(validator, {"n": 1})


def test_meta_schema_ref_resolves_offline() -> None:
    validator = full_validator({"$ref": "https://json-schema.org/draft/2020-12/schema"})
    assert schema_errors(validator, {"type": "string"}) == []
    assert schema_errors(validator, {"type": 5})
