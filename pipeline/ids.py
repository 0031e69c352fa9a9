"""The rule for document ids: within a partition, every document the run reads has an id, and no two share one.

An id is how a row, a dead letter and a retry find their document, so a null id is a record no one can join
or retry, and a repeated id makes two outcomes that a retry cannot tell apart. Such input is refused before
Ray starts, naming how many ids are wrong and where the first few are (file and row), so the fix is in the
input rather than in guessing which of two documents a row belongs to.

An id is one value: a struct, list or map column is refused, and so is a string id whose bytes are not valid
UTF-8 (two such ids could read the same once decoded, and no query could name one).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from pipeline.config import ConfigError
from pipeline.storage import Storage
from pipeline.units import PartitionInput

SHOWN = 3  # examples named in the message
UNDECODABLE = object()  # an id whose bytes are not valid UTF-8


def _values(column: pa.Array) -> list[Any]:
    """The column's values as Python objects; a string that is not valid UTF-8 is `UNDECODABLE`."""
    if not (pa.types.is_string(column.type) or pa.types.is_large_string(column.type)):
        return column.to_pylist()
    try:
        column.validate(full=True)
        return column.to_pylist()
    except pa.ArrowInvalid:
        pass
    raw = column.view(pa.large_binary() if pa.types.is_large_string(column.type) else pa.binary()).to_pylist()
    values: list[Any] = []
    for value in raw:
        try:
            values.append(None if value is None else value.decode("utf-8"))
        except UnicodeDecodeError:
            values.append(UNDECODABLE)
    return values


def check_id_type(pinput: PartitionInput) -> None:
    """Raise `ConfigError` (one line) when the id column holds no single values (a struct, list or map)."""
    kind = pinput.schema.field(pinput.id_column).type
    if pa.types.is_dictionary(kind):
        kind = kind.value_type
    if pa.types.is_nested(kind) or pa.types.is_null(kind):
        raise ConfigError(f"input.id_column {pinput.id_column!r} is {kind}: an id must be one value (a string or an "
                          f"integer) that rows, dead letters and retries are keyed by; name another column, or "
                          f"write the id as text")


def _ids(storage: Storage, pinput: PartitionInput) -> Iterator[tuple[Any, str, int]]:
    """(id, file, row in file) for every document the partition's units read, in order."""
    fs = storage.arrow_fs()
    files: dict[str, tuple[pq.ParquetFile, list[int]]] = {}
    for unit in pinput.units:
        if unit.path not in files:
            meta = pq.ParquetFile(storage.arrow_path(unit.path), filesystem=fs)
            offsets = [0]
            for rg in range(meta.metadata.num_row_groups):
                offsets.append(offsets[-1] + meta.metadata.row_group(rg).num_rows)
            files[unit.path] = (meta, offsets)
        meta, offsets = files[unit.path]
        column = meta.read_row_group(unit.row_group, columns=[pinput.id_column]).column(0)
        for i, value in enumerate(_values(column.slice(unit.start, unit.rows).combine_chunks())):
            yield value, unit.path, offsets[unit.row_group] + unit.start + i


def check_ids(storage: Storage, pinput: PartitionInput) -> None:
    """Raise `ConfigError` (one line) when an id the run would read is null, repeated or not valid UTF-8, or the
    id column holds no single values."""
    check_id_type(pinput)
    first: dict[Any, tuple[str, int]] = {}
    nulls: list[tuple[str, int]] = []
    undecodable: list[tuple[str, int]] = []
    repeats: list[tuple[Any, tuple[str, int], tuple[str, int]]] = []
    repeated = 0
    for value, path, row in _ids(storage, pinput):
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
    column = f"input.id_column {pinput.id_column!r}"
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
    if problems:
        raise ConfigError(f"{column}: {' and '.join(problems)} in partition {pinput.partition.label}; every "
                          "document needs a unique, non-null id (rows, dead letters and retries are keyed by it)")
