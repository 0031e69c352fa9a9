"""One bad document is one dead letter (issue 19, item 2), on real Parquet files: undecodable text and corrupt
data pages are flagged by the reader and become `invalid_input` dead letters, the rest of the block goes on."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq


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


def test_validate_refuses_corrupt_data_pages_in_one_line(tmp_path, cli_env):
    from tests.conftest import run_cli, write_config

    path = write_corrupt_pages(tmp_path / "corrupt.parquet")
    config = write_config(tmp_path, **{"input.uri": str(path)})
    result = run_cli(["validate", str(config)], cli_env)
    assert result.returncode == 2, result.stdout + result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: input: {path} row group 0: the text column(s) cannot be "
                                                   "read, the file's data pages are corrupt (OSError: ")


