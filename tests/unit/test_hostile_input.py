"""One bad document is one dead letter (issue 19, item 2), on real Parquet files: undecodable text and corrupt
data pages are flagged by the reader and become `invalid_input` dead letters, the rest of the block goes on."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipeline.reader import INVALID_INPUT_COLUMN, UNIT_COLUMN, read_tasks, read_units, undecodable
from pipeline.storage import LocalStorage
from pipeline.units import Unit
from tests.unit.test_extractor import ScriptedEngine, spec
from workers.extractor import BatchExtractor


def invalid_utf8(values: list[bytes | None]) -> pa.Array:
    """A string array holding raw bytes: Parquet files in the wild carry such values (`view` does not validate)."""
    return pa.array(values, pa.binary()).view(pa.string())


def write_bad_text(path: Path) -> Path:
    texts = invalid_utf8([b"INVOICE 1 total 10", b"caf\xe9 \xff\xfe broken", None, b"INVOICE 4 total 40"])
    pq.write_table(pa.table({"doc_id": ["d1", "d2", "d3", "d4"], "text": texts}), path)
    return path


def write_corrupt_pages(path: Path, rows: int = 400) -> Path:
    """A file whose footer is intact but whose text column's data pages are not: the ids still read."""
    table = pa.table({"doc_id": [f"d{i}" for i in range(rows)], "text": [f"document number {i} " * 20
                                                                          for i in range(rows)]})
    pq.write_table(table, path, compression="snappy", use_dictionary=False)
    data = bytearray(path.read_bytes())
    column = pq.ParquetFile(path).metadata.row_group(0).column(1)
    middle = column.data_page_offset + column.total_compressed_size // 2
    for i in range(middle, middle + 64):
        data[i] ^= 0x5A
    path.write_bytes(bytes(data))
    return path


def read_all(path: Path, rows: int) -> pa.Table:
    unit = Unit("all", str(path), 0, 0, rows)
    return read_units(pa.Table.from_pylist(read_tasks([unit])), LocalStorage(), pa.field("doc_id", pa.string()),
                      "text")


def test_undecodable_values_are_found_by_row():
    assert undecodable(invalid_utf8([b"ok", b"\xff", None, b"fine"])) == {1: "not valid UTF-8 at byte 0 "
                                                                              "(invalid start byte)"}
    assert undecodable(pa.array(["all", "good"])) == {}


def test_the_reader_flags_an_undecodable_document_and_keeps_the_others(tmp_path):
    docs = read_all(write_bad_text(tmp_path / "bad.parquet"), 4)
    assert docs.column("doc_id").to_pylist() == ["d1", "d2", "d3", "d4"]
    assert docs.column("text").to_pylist() == ["INVOICE 1 total 10", None, None, "INVOICE 4 total 40"]
    flags = docs.column(INVALID_INPUT_COLUMN).to_pylist()
    assert flags[0] is None and flags[2] is None and flags[3] is None
    assert flags[1].startswith("text: not valid UTF-8 at byte 3")
    assert set(docs.column(UNIT_COLUMN).to_pylist()) == {Unit("all", str(tmp_path / "bad.parquet"), 0, 0, 4).id}


def test_corrupt_data_pages_flag_every_row_of_the_row_group_by_id(tmp_path):
    path = write_corrupt_pages(tmp_path / "corrupt.parquet")
    with pytest.raises(OSError):
        pq.read_table(path)  # what used to abort the dataset
    docs = read_all(path, 400)
    assert docs.column("doc_id").to_pylist() == [f"d{i}" for i in range(400)]
    assert docs.column("text").null_count == 400
    assert all(f.startswith("the row group's text cannot be read: OSError") for f in
               docs.column(INVALID_INPUT_COLUMN).to_pylist())


def test_an_undecodable_string_id_is_kept_lossily_and_flagged(tmp_path):
    path = tmp_path / "ids.parquet"
    pq.write_table(pa.table({"doc_id": invalid_utf8([b"ok", b"b\xffd"]), "text": ["one", "two"]}), path)
    docs = read_all(path, 2)
    assert docs.column("doc_id").to_pylist() == ["ok", "b\ufffdd"]
    assert docs.column(INVALID_INPUT_COLUMN).to_pylist()[1].startswith("doc_id: not valid UTF-8")


def test_the_extractor_makes_each_flagged_row_an_invalid_input_dead_letter(tmp_path):
    docs = read_all(write_bad_text(tmp_path / "bad.parquet"), 4)
    batch = docs.rename_columns(["id" if c == "doc_id" else c for c in docs.column_names])
    batch = batch.set_column(0, "id", pa.array(range(4), pa.int64()))
    engine = ScriptedEngine()
    out = BatchExtractor(engine, spec(), 100)(batch)
    assert out.column("_reason").to_pylist() == [None, "invalid_input", "empty_input", None]
    assert INVALID_INPUT_COLUMN not in out.column_names and UNIT_COLUMN in out.column_names
    assert engine.calls == [2]  # the undecodable document never reached the engine


def test_validate_samples_the_text_and_reports_undecodable_values(tmp_path):
    from pipeline.reader import sample_input

    path = write_bad_text(tmp_path / "bad.parquet")
    (warning,) = sample_input(LocalStorage(), [str(path)], ["text"])
    assert warning.startswith(f"1 value(s) of text in {path} row group 0 are not valid UTF-8 (e.g. row 1: ")
    assert sample_input(LocalStorage(), [str(write_docs_ok(tmp_path / "ok.parquet"))], ["text"]) == []


def write_docs_ok(path: Path) -> Path:
    pq.write_table(pa.table({"doc_id": ["a"], "text": ["fine"]}), path)
    return path


def test_routing_skips_an_undecodable_schema_value(tmp_path):
    from pipeline.reader import read_schema_values

    path = tmp_path / "schemas.parquet"
    pq.write_table(pa.table({"doc_id": ["a", "b"], "text": ["x", "y"], "schema": invalid_utf8([b"inv", b"\xff"])}),
                   path)
    assert read_schema_values(LocalStorage(), [Unit("all", str(path), 0, 0, 2)], "schema") == {"inv"}


def test_a_reused_reader_process_reads_a_redelivered_file_anew(tmp_path):
    """Read tasks run in Ray worker processes that outlive a run, and cache the last row group they read."""
    from pipeline.partition import partition_for
    from pipeline.units import plan_partition

    path = tmp_path / "docs.parquet"
    pq.write_table(pa.table({"doc_id": ["old-1", "old-2"], "text": ["a", "b"]}), path)

    def read() -> list:
        plan = plan_partition(LocalStorage(), partition_for(str(path), None), "doc_id", "text", None, 10)
        tasks = pa.Table.from_pylist(read_tasks(plan.units))
        return read_units(tasks, LocalStorage(), pa.field("doc_id", pa.string()), "text").column("doc_id").to_pylist()

    assert read() == ["old-1", "old-2"]
    pq.write_table(pa.table({"doc_id": ["new-1", "new-2", "new-3"], "text": ["a", "b", "c"]}), path)
    assert read() == ["new-1", "new-2", "new-3"]
