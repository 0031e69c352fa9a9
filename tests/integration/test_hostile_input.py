"""One bad document is one dead letter (issue 19, item 2), on real Parquet files: undecodable text and corrupt
data pages are flagged by the reader and become `invalid_input` dead letters, the rest of the block goes on."""

from __future__ import annotations

from tests.unit.test_hostile_input import write_corrupt_pages


def test_validate_refuses_corrupt_data_pages_in_one_line(tmp_path):
    from tests.conftest import run_main, write_config

    path = write_corrupt_pages(tmp_path / "corrupt.parquet")
    config = write_config(tmp_path, **{"input.uri": str(path)})
    result = run_main(["validate", str(config)])  # in this process: the line is the subject
    assert result.returncode == 2, result.stdout + result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: input: {path} row group 0: the text column(s) cannot be "
                                                   "read, the file's data pages are corrupt (OSError: ")


