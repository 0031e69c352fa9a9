"""The schema toolkit: JSON pointers (`schemas.pointer`), the walker and declared types (`schemas.walk`), and the
one `$ref` resolver (`schemas.refs`) every schema walker in the house goes through."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from schemas.arrow import UnsupportedSchemaError, record_layout
from schemas.pointer import escape_pointer, follow_pointer, pointer, pointer_parts, unescape_pointer
from schemas.refs import RefIndex, index_for, resolve_ref
from schemas.walk import iter_subschemas, schema_types

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("part", ["plain", "a/b", "a~b", "~1", "/~0/", ""])
def test_a_pointer_token_reads_back_as_the_segment_it_was_written_from(part):
    assert unescape_pointer(escape_pointer(part)) == part


def test_a_pointer_is_written_and_read_back():
    path = ["properties", "a/b", "c~d", 0]
    text = pointer(path)
    assert text == "/properties/a~1b/c~0d/0"
    assert pointer_parts(text) == ["properties", "a/b", "c~d", "0"]
    assert pointer([]) == "" and pointer_parts("") == []


def test_follow_pointer_walks_members_and_items_and_says_none_for_nowhere():
    doc = {"a/b": [{"x": 1}, {"x": 2}], "": {"y": 3}}
    assert follow_pointer(doc, "/a~1b/1/x") == 2
    assert follow_pointer(doc, "//y") == 3
    assert follow_pointer(doc, "") is doc
    assert follow_pointer(doc, "/a~1b/2") is None
    assert follow_pointer(doc, "/a~1b/x") is None
    assert follow_pointer(doc, "/missing") is None


def test_iter_subschemas_visits_schema_positions_only_root_first():
    schema = {"type": "object", "properties": {"pattern": {"type": "string"}, "n": {"enum": [{"type": "x"}]}},
              "anyOf": [{"const": {"properties": {}}}], "$defs": {"d": {"items": {"type": "integer"}}}}
    paths = [path for path, _ in iter_subschemas(schema)]
    assert paths[0] == ()
    assert set(paths) == {(), ("properties", "pattern"), ("properties", "n"), ("anyOf", 0), ("$defs", "d"),
                          ("$defs", "d", "items")}


def test_schema_types_reads_a_name_or_a_list():
    assert schema_types({"type": "string"}) == {"string"}
    assert schema_types({"type": ["string", "null", 3]}) == {"string", "null"}
    assert schema_types({"enum": [1]}) == set()


def test_refs_resolve_pointers_anchors_and_ids_never_remote():
    root = {"$id": "https://example.com/root.json",
            "$defs": {"a": {"type": "string"}, "b": {"$anchor": "bee", "type": "integer"},
                      "c": {"$id": "other.json", "$defs": {"d": {"type": "boolean"}}}},
            "items": [{"type": "null"}]}
    index = RefIndex(root)
    assert index.resolve_from_root("#/$defs/a") == {"type": "string"}
    assert index.resolve_from_root("#bee")["type"] == "integer"
    assert index.resolve_from_root("#/items/0") == {"type": "null"}
    assert index.resolve_from_root("other.json#/$defs/d") == {"type": "boolean"}
    c = root["$defs"]["c"]
    assert index.resolve("#/$defs/d", index.base(c)) == {"type": "boolean"}  # against its own $id
    assert index.resolve_from_root("https://elsewhere.org/s.json") is None
    assert not index.is_local("https://elsewhere.org/s.json", index.base(root))
    assert index.resolve_from_root("#/$defs/zzz") is None


def test_follow_stops_at_a_cycle_or_a_reference_that_goes_nowhere():
    root = {"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/c"}, "c": {"type": "string"},
                      "loop": {"$ref": "#/$defs/loop"}, "lost": {"$ref": "#/$defs/nowhere"}}}
    index = RefIndex(root)
    assert index.follow({"$ref": "#/$defs/a"}) == {"type": "string"}
    assert index.follow(root["$defs"]["loop"]) == {"$ref": "#/$defs/loop"}  # gives up after MAX_HOPS
    assert index.follow(root["$defs"]["lost"]) == {"$ref": "#/$defs/nowhere"}


def test_resolve_ref_indexes_a_document_once_and_a_new_document_afresh():
    root = {"$defs": {"a": {"type": "string"}}}
    assert index_for(root) is index_for(root)
    assert resolve_ref(root, "#/$defs/a") == {"type": "string"}
    other = {"$defs": {"a": {"type": "integer"}}}
    assert resolve_ref(other, "#/$defs/a") == {"type": "integer"}
    assert resolve_ref("not a schema", "#/x") is None


def test_the_column_layout_resolves_through_the_shared_resolver():
    schema = {"$ref": "#/$defs/R", "$defs": {"R": {"type": "object", "properties": {"a~b": {"$ref": "#/$defs/S"}}},
                                             "S": {"type": "string"}}}
    layout = record_layout(schema)
    assert layout.schema.names == ["a~b"]
    with pytest.raises(UnsupportedSchemaError, match="does not resolve"):
        record_layout({"type": "object", "properties": {"x": {"$ref": "#/$defs/missing"}}})


def _unescapes(path: Path) -> list[int]:
    """Lines of `path` that turn `~1` back into `/` themselves (a JSON pointer reader of their own)."""
    return [node.lineno for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, ast.Constant) and node.value == "~1"]


def test_only_the_pointer_module_reads_json_pointers_in_the_schema_walkers():
    """`$ref`s and pointers are followed in one place: no other module of schemas/, the prompt or eval unescapes
    pointer tokens by hand."""
    files = [*sorted((ROOT / "schemas").glob("*.py")), ROOT / "workers" / "prompt.py",
             *sorted((ROOT / "pipeline" / "tools").rglob("*.py"))]
    found = {str(p.relative_to(ROOT)): _unescapes(p) for p in files if p.name != "pointer.py"}
    assert {k: v for k, v in found.items() if v} == {}
