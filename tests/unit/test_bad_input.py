"""Bad input and bad config are one clear line before Ray starts, never a traceback or a silent duplicate."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipeline.config import ConfigError, load_config
from pipeline.run import preflight
from schemas.registry import SchemaNotFoundError, import_model
from tests.conftest import write_config, write_docs


def _job(tmp_path, ids, **overrides):
    docs = write_docs(tmp_path / "docs.parquet", ids, [f"Invoice {i}. Total 10.00 EUR." for i in range(len(ids))])
    return write_config(tmp_path, **{"input.uri": str(docs), **overrides})


def test_repeated_ids_are_refused_naming_the_count_and_where(tmp_path):
    config = _job(tmp_path, ["inv-0000", "inv-0000", "inv-0001", "inv-0002"])
    with pytest.raises(ConfigError) as error:
        preflight(load_config(config))
    message = str(error.value)
    assert "1 repeated id(s)" in message and "'inv-0000' at" in message and "row 0 and" in message
    assert "row 1" in message and "\n" not in message


def test_null_and_blank_ids_are_refused_naming_where(tmp_path):
    config = _job(tmp_path, [None, None, "inv-0001", " "])
    with pytest.raises(ConfigError) as error:
        preflight(load_config(config))
    assert "3 null or blank id(s)" in str(error.value) and "row 0, " in str(error.value)


def test_ids_outside_the_limit_are_not_read(tmp_path):
    config = _job(tmp_path, ["a", "b", "a"], **{"input.limit": 2})
    assert preflight(load_config(config)).rows_to_read == 2


def test_ids_repeated_across_files_and_row_groups_are_found(tmp_path):
    folder = tmp_path / "in"
    folder.mkdir()
    table = pa.table({"doc_id": ["x", "y", "z", "w"], "text": ["t"] * 4})
    pq.write_table(table, folder / "a.parquet", row_group_size=2)
    pq.write_table(table.slice(3, 1), folder / "b.parquet")
    config = write_config(tmp_path, **{"input.uri": str(folder)})
    with pytest.raises(ConfigError, match=r"'w' at .*a\.parquet row 3 and .*b\.parquet row 0"):
        preflight(load_config(config))


@pytest.mark.parametrize("body,expected", [
    ("raise RuntimeError('no database here')\n", "importing module 'badmod' raised RuntimeError: no database here"),
    ("def broken(:\n", "module 'badmod' has a syntax error"),
])
def test_a_schema_module_that_fails_to_import_is_one_line(tmp_path, body, expected):
    (tmp_path / "badmod.py").write_text(body)
    with pytest.raises(SchemaNotFoundError) as error:
        import_model("badmod:Model", tmp_path)
    assert expected in str(error.value) and "badmod.py" in str(error.value)
    assert "\n" not in str(error.value)


def test_set_into_a_scalar_names_the_key(tmp_path):
    config = write_config(tmp_path)
    with pytest.raises(ConfigError, match=r"--set name\.b: name holds 'invoices', not a mapping"):
        load_config(config, {"name.b": "c"})


