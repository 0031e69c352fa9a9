"""The schema toolkit: JSON pointers (`schemas.pointer`), the walker and declared types (`schemas.walk`), and the
schema graph (`schemas.refs`): the one resolver every schema walker in the house goes through."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from schemas.arrow import UnsupportedSchemaError, record_layout
from schemas.pointer import escape_pointer, follow_pointer, pointer, pointer_parts, unescape_pointer
from schemas.refs import RefIndex, SchemaGraph, graph_for, index_for
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


def test_expand_follows_a_chain_with_siblings_over_each_target_and_stops_at_a_cycle_or_nowhere():
    root = {"$defs": {"a": {"$ref": "#/$defs/b", "title": "A"}, "b": {"$ref": "#/$defs/c", "title": "B"},
                      "c": {"type": "string", "title": "C", "maxLength": 9},
                      "loop": {"$ref": "#/$defs/loop"}, "lost": {"$ref": "#/$defs/nowhere"}}}
    graph = SchemaGraph(root)
    view = graph.expand({"$ref": "#/$defs/a", "maxLength": 3})
    assert view.node == {"type": "string", "title": "A", "maxLength": 3}  # the nearer node's keywords win
    assert view.origin is root["$defs"]["c"] and view.problem is None
    assert graph.path_of(view.origin) == ("$defs", "c")
    assert graph.expand(root["$defs"]["loop"]).problem == "cycle"
    lost = graph.expand(root["$defs"]["lost"])
    assert lost.node is None and lost.problem == "unresolved" and "#/$defs/nowhere" in lost.why
    plain = {"type": "integer"}
    assert graph.expand(plain).node is plain and not graph.refers(plain)


def test_a_reference_to_a_target_on_the_trail_is_a_cycle_one_level_down():
    root = {"$defs": {"node": {"type": "object", "properties": {"next": {"$ref": "#/$defs/node"}}}}}
    graph = SchemaGraph(root)
    first = graph.expand({"$ref": "#/$defs/node"})
    assert first.problem is None and id(root["$defs"]["node"]) in first.trail
    again = graph.expand(first.node["properties"]["next"], first.trail)
    assert again.problem == "cycle" and again.node is None


def test_the_graph_of_a_document_is_built_once_and_indexes_only_when_a_reference_is_followed():
    from schemas.contract import SchemaContract

    root = {"type": "object", "properties": {"a": {"$ref": "#/$defs/a"}}, "$defs": {"a": {"type": "string"}}}
    assert graph_for(root) is graph_for(root) and index_for(root) is graph_for(root).index
    other = {"$defs": {"a": {"type": "integer"}}}
    assert graph_for(other).target({"$ref": "#/$defs/a"}) == {"type": "integer"}
    contract = SchemaContract.from_dict(root)
    assert contract.graph is graph_for(contract.json_schema)
    fresh = SchemaGraph({"type": "string"})
    assert fresh._index is None and fresh.expand({"type": "string"}).problem is None and fresh._index is None
    assert SchemaGraph("not a schema").target({"$ref": "#/x"}) is None


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
