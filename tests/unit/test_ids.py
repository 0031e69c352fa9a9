"""Issue 23 item 5: an id that is not valid UTF-8, or a struct or list id column, is refused before Ray starts in
one line (`ConfigError`, exit 2), naming the column and, for bad bytes, where they are."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipeline.config import ConfigError, load_config
from pipeline.run import preflight
from tests.conftest import write_config


def refusal(tmp_path, ids: pa.Array) -> str:
    docs = tmp_path / "docs.parquet"
    pq.write_table(pa.table({"doc_id": ids, "text": pa.array(["a"] * len(ids), pa.string())}), docs)
    with pytest.raises(ConfigError) as info:
        preflight(load_config(write_config(tmp_path, **{"input.uri": str(docs)})))
    message = str(info.value)
    assert "\n" not in message
    return message


def invalid_utf8(values: list[bytes], kind: pa.DataType) -> pa.Array:
    """A string column holding `values` as they are (Arrow checks nothing when built from buffers)."""
    raw = pa.array(values, pa.binary() if kind == pa.string() else pa.large_binary())
    return pa.Array.from_buffers(kind, len(raw), raw.buffers())


@pytest.mark.parametrize("kind", [pa.string(), pa.large_string()])
def test_an_id_that_is_not_utf8_is_named_with_its_row(tmp_path, kind):
    message = refusal(tmp_path, invalid_utf8([b"ok", b"\xff\xfe", b"fine", b"\xc3"], kind))
    assert message.startswith("input.id_column 'doc_id': 2 id(s) that are not valid UTF-8")
    assert "docs.parquet row 1" in message and "docs.parquet row 3" in message


@pytest.mark.parametrize(("ids", "kind"), [
    (pa.array([{"x": 1}, {"x": 2}]), "struct<x: int64>"),
    (pa.array([[1], [2]]), "list<element: int64>"),
    (pa.array([[("k", 1)], [("k", 2)]], pa.map_(pa.string(), pa.int64())), "map<string, int64"),
])
def test_an_id_column_of_structs_lists_or_maps_is_refused(tmp_path, ids, kind):
    message = refusal(tmp_path, ids)
    assert message.startswith(f"input.id_column 'doc_id' is {kind}") and "an id must be one value" in message


def test_valid_string_and_integer_ids_pass(tmp_path):
    for n, ids in enumerate([pa.array(["a", "ü", "日本"]), pa.array([1, 2, 3])]):
        folder = tmp_path / str(n)
        folder.mkdir()
        docs = folder / "docs.parquet"
        pq.write_table(pa.table({"doc_id": ids, "text": ["a", "b", "c"]}), docs)
        assert preflight(load_config(write_config(folder, **{"input.uri": str(docs)}))).rows_to_read == 3


# Issue 55: ids are strings and integers only; an id column named like an output column is refused; a repeated
# 10 MB id is named in 200 characters.
@pytest.mark.parametrize(("ids", "kind"), [
    (pa.array([float("nan"), float("nan"), 1.0]), "double"),
    (pa.array([1.5, 2.5, 3.5], pa.float32()), "float"),
    (pa.array([b"a", b"b", b"c"]), "binary"),
    (pa.array([True, False, None]), "bool"),
    (pa.array([0, 1, 2], pa.int32()).cast(pa.date32()), "date32"),
])
def test_an_id_column_that_is_not_strings_or_integers_is_refused(tmp_path, ids, kind):
    message = refusal(tmp_path, ids)
    assert message.startswith(f"input.id_column 'doc_id' is {kind}") and "a string or an integer" in message


def test_a_repeated_huge_id_is_named_in_a_short_line(tmp_path):
    huge = "x" * 10_000_000
    message = refusal(tmp_path, pa.array([huge, "b", huge]))
    assert "1 repeated id(s)" in message and len(message) < 1500


@pytest.mark.parametrize("name", ["_source_file", "_run_id"])
def test_an_id_column_named_like_an_output_column_is_refused(tmp_path, name):
    docs = tmp_path / "docs.parquet"
    pq.write_table(pa.table({name: ["a", "b"], "text": ["a", "b"]}), docs)
    with pytest.raises(ConfigError, match="reserved output column name"):
        preflight(load_config(write_config(tmp_path, **{"input.uri": str(docs), "input.id_column": name})))


def test_validate_refuses_a_float_id_with_exit_2(tmp_path, capsys):
    from pipeline import exit_codes
    from pipeline.cli.main import main

    docs = tmp_path / "docs.parquet"
    pq.write_table(pa.table({"doc_id": [float("nan")] * 10, "text": ["a"] * 10}), docs)
    cfg = write_config(tmp_path, simulated=True, **{"input.uri": str(docs)})
    assert main(["validate", str(cfg)]) == exit_codes.USAGE
    assert "a string or an integer" in capsys.readouterr().err
