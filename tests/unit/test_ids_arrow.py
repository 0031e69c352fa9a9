"""`check_ids` with Arrow's kernels refuses exactly what a Python dict of the ids refused, with the same message:
nulls, blanks (Python's whitespace), ids that are not UTF-8, repeats (Python's equality: NaN, 0.0 and -0.0),
across files, row groups and units, dictionary-encoded or not."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipeline.config import ConfigError
from pipeline.ids import SHOWN, check_ids
from pipeline.partition import partition_for
from pipeline.storage import storage_for
from pipeline.units import cut_units

UNDECODABLE = object()


def reference(pinput: Any, values: list[tuple[Any, str, int]]) -> str | None:
    """The message of the rule as the dict of ids gave it (the code before Arrow), None if all ids are fine."""
    first: dict[Any, tuple[str, int]] = {}
    nulls: list[tuple[str, int]] = []
    undecodable: list[tuple[str, int]] = []
    repeats: list[tuple[Any, tuple[str, int], tuple[str, int]]] = []
    repeated = 0
    for value, path, row in values:
        if value is UNDECODABLE:
            undecodable.append((path, row))
        elif value is None or (isinstance(value, str) and not value.strip()):
            nulls.append((path, row))
        elif value in first:
            repeated += 1
            if len(repeats) < SHOWN:
                repeats.append((value, first[value], (path, row)))
        else:
            first[value] = (path, row)
    problems = []
    if nulls:
        where = ", ".join(f"{p} row {r}" for p, r in nulls[:SHOWN])
        problems.append(f"{len(nulls)} null or blank id(s) (at {where}{', ...' if len(nulls) > SHOWN else ''})")
    if undecodable:
        where = ", ".join(f"{p} row {r}" for p, r in undecodable[:SHOWN])
        problems.append(f"{len(undecodable)} id(s) that are not valid UTF-8 (at {where}"
                        f"{', ...' if len(undecodable) > SHOWN else ''})")
    if repeated:
        shown = "; ".join(f"{v!r} at {a[0]} row {a[1]} and {b[0]} row {b[1]}" for v, a, b in repeats)
        problems.append(f"{repeated} repeated id(s) (e.g. {shown})")
    if not problems:
        return None
    return (f"input.id_column 'doc_id': {' and '.join(problems)} in partition {pinput.partition.label}; every "
            "document needs a unique, non-null id (rows, dead letters and retries are keyed by it)")


def python_values(column: pa.Array) -> list[Any]:
    if pa.types.is_dictionary(column.type):
        column = column.dictionary_decode()
    if not pa.types.is_string(column.type):
        return column.to_pylist()
    out: list[Any] = []
    for raw in column.view(pa.binary()).to_pylist():
        try:
            out.append(None if raw is None else raw.decode("utf-8"))
        except UnicodeDecodeError:
            out.append(UNDECODABLE)
    return out


def outcome(folder: Path, files: list[pa.Array], row_group: int, checkpoint_rows: int, limit: int | None = None):
    """(check_ids' message or None, the reference's), the ids written as `files` in `folder`."""
    folder.mkdir()
    for n, ids in enumerate(files):
        table = pa.table({"doc_id": ids, "text": pa.array(["t"] * len(ids), pa.string())})
        pq.write_table(table, folder / f"part-{n}.parquet", row_group_size=row_group)
    storage = storage_for(str(folder))
    pinput = cut_units(storage, partition_for(str(folder), None), "doc_id", "text", limit, checkpoint_rows)
    values = []
    for unit in pinput.units:
        meta = pq.ParquetFile(unit.path)
        before = sum(meta.metadata.row_group(g).num_rows for g in range(unit.row_group))
        column = meta.read_row_group(unit.row_group, columns=["doc_id"]).column(0).combine_chunks()
        for i, value in enumerate(python_values(column.slice(unit.start, unit.rows))):
            values.append((value, unit.path, before + unit.start + i))
    try:
        check_ids(storage, pinput)
        got = None
    except ConfigError as exc:
        got = str(exc)
    return got, reference(pinput, values)


def not_utf8(values: list[bytes]) -> pa.Array:
    raw = pa.array(values, pa.binary())
    return pa.Array.from_buffers(pa.string(), len(raw), raw.buffers())


CASES = {
    "unique": [pa.array([f"d{i}" for i in range(50)])],
    "repeats across files": [pa.array([f"d{i}" for i in range(30)]), pa.array(["d3", "x", "d29", "x", "d3"])],
    "many repeats": [pa.array([f"d{i % 7}" for i in range(60)])],
    "nulls and blanks": [pa.array(["a", None, "", " ", "\u3000", "\u2028b", "\x1c", "b", None, "a", "\t\n"])],
    "only nulls": [pa.array([None] * 9, pa.string())],
    "not utf8 among nulls and repeats": [not_utf8([b"ok", b"\xff", b"", b"ok", b"\xc3", b"fine", b"\xff"])],
    "integers": [pa.array([1, 2, None, 3, 2, 1, 0, -0])],
    "large strings": [pa.array(["x", "y", "x", " "], pa.large_string())],
    "dictionary": [pa.array(["k", "l", "k", None, "m"]).dictionary_encode()],
}


@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.parametrize(("row_group", "checkpoint_rows"), [(1000, 1000), (4, 3), (5, 2)])
def test_check_ids_says_what_the_dict_of_ids_said(tmp_path, name, row_group, checkpoint_rows):
    got, expected = outcome(tmp_path / "in", CASES[name], row_group, checkpoint_rows)
    assert got == expected
    if name != "unique":
        assert got is not None  # every other case holds a refusal: the test can fail


def test_only_the_ids_a_limit_selects_are_checked(tmp_path):
    got, expected = outcome(tmp_path / "in", [pa.array(["a", "b", "c", "a", None])], 2, 2, limit=3)
    assert got is None and expected is None
