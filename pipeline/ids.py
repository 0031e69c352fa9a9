"""The rule for document ids: within a partition, every document the run reads has an id, and no two share one.

An id is how a row, a dead letter and a retry find their document, so a null id is a record no one can join
or retry, and a repeated id makes two outcomes that a retry cannot tell apart. Such input is refused before
Ray starts, naming how many ids are wrong and where the first few are (file and row), so the fix is in the
input rather than in guessing which of two documents a row belongs to.

An id is a string or an integer (issue 55): any other column is refused before the run (a float's NaN equals no
id, itself included, and 0.0 is -0.0; a binary id no query can name), and so is a string id whose bytes are not
valid UTF-8 (two such ids could read the same once decoded). An id an error names is cut to 200 characters.

The ids are checked as Arrow columns (nulls, blanks and repeats counted by Arrow's kernels, not a Python object
per id: a dict of 10⁶ ids was 1.1 s and +170 MB of the driver's peak); Python reads only the ids a message
names. Equality is Python's, as with a dict of the values: Arrow's where it is the same (strings, bytes,
integers, dates, times, decimals of one column's type), Python's for floating-point ids (a NaN is not equal to
itself, 0.0 is -0.0).
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from pipeline import ids_spill
from pipeline.config import ConfigError
from pipeline.storage import Storage
from pipeline.units import PartitionInput

SHOWN = 3  # examples named in the message


def _is_text(kind: pa.DataType) -> bool:
    return pa.types.is_string(kind) or pa.types.is_large_string(kind)


def _decodable(column: pa.Array) -> tuple[pa.Array, list[int]]:
    """The column with each string that is not valid UTF-8 made null, and those rows (within the column)."""
    if not _is_text(column.type):
        return column, []
    try:
        column.validate(full=True)
        return column, []
    except pa.ArrowInvalid:
        pass
    raw = column.view(pa.large_binary() if pa.types.is_large_string(column.type) else pa.binary()).to_pylist()
    values: list[str | None] = []
    bad: list[int] = []
    for i, value in enumerate(raw):
        try:
            values.append(None if value is None else value.decode("utf-8"))
        except UnicodeDecodeError:
            values.append(None)
            bad.append(i)
    return pa.array(values, column.type), bad


MAX_SHOWN = 200  # characters of an id an error line shows


def _cut(value: Any) -> str:
    """An id as an error line shows it: its repr, cut to `MAX_SHOWN` characters (a 10 MB id stays a short line)."""
    shown = repr(value)
    return shown if len(shown) <= MAX_SHOWN else f"{shown[:MAX_SHOWN]}… ({len(shown)} characters)"


def check_id_type(pinput: PartitionInput) -> None:
    """Raise `ConfigError` (one line) when the id column holds no single values (a struct, list or map)."""
    kind = pinput.schema.field(pinput.id_column).type
    if pa.types.is_dictionary(kind):
        kind = kind.value_type
    if not (_is_text(kind) or pa.types.is_integer(kind)):
        # A float id has NaN (equal to nothing, itself included) and 0.0 == -0.0; a binary one no query can name.
        raise ConfigError(f"input.id_column {pinput.id_column!r} is {kind}: an id must be one value, a string or an "
                          f"integer, that rows, dead letters and retries are keyed by; name another column, or "
                          f"write the id as text")


def _pieces(storage: Storage, pinput: PartitionInput) -> Iterator[tuple[pa.Array, str, int]]:
    """(ids, file, row in file of the first) for each unit the partition reads, in order. A row group's column
    is read once for its consecutive units (a unit is a slice of one row group)."""
    fs = storage.arrow_fs()
    files: dict[str, tuple[pq.ParquetFile, list[int]]] = {}
    last: tuple[str, int, pa.ChunkedArray] | None = None
    for unit in pinput.units:
        if unit.path not in files:
            meta = pq.ParquetFile(storage.arrow_path(unit.path), filesystem=fs)
            offsets = [0]
            for rg in range(meta.metadata.num_row_groups):
                offsets.append(offsets[-1] + meta.metadata.row_group(rg).num_rows)
            files[unit.path] = (meta, offsets)
        meta, offsets = files[unit.path]
        if last is None or last[:2] != (unit.path, unit.row_group):
            group = meta.read_row_group(unit.row_group, columns=[pinput.id_column])
            last = (unit.path, unit.row_group, group.column(0))
        column = last[2].slice(unit.start, unit.rows).combine_chunks()
        if pa.types.is_dictionary(column.type):
            column = column.dictionary_decode()
        yield column, unit.path, offsets[unit.row_group] + unit.start


class _Rows:
    """Where the partition's n-th id is: (file, row in file)."""

    def __init__(self, pieces: list[tuple[int, str, int]]) -> None:
        """`pieces`: (ids, file, row in file of the first) of each piece in order."""
        self.starts: list[int] = []
        self.places: list[tuple[str, int]] = []
        total = 0
        for length, path, row in pieces:
            self.starts.append(total)
            self.places.append((path, row))
            total += length

    def __call__(self, n: int) -> tuple[str, int]:
        piece = bisect.bisect_right(self.starts, n) - 1
        path, row = self.places[piece]
        return path, row + n - self.starts[piece]


def _indexes(mask: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """The positions where a boolean column (no nulls) is true."""
    return np.flatnonzero(mask.to_numpy(zero_copy_only=False))


def _repeats(ids: pa.ChunkedArray, usable: pa.ChunkedArray | None) -> tuple[int, list[tuple[Any, int, int]]]:
    """How many ids repeat one before them (of the `usable` rows, None: all), and the first few as (value, first
    row, this row). Arrow finds the values held more than once; Python's equality decides among their rows (all
    rows of a floating-point column)."""
    kept = ids if usable is None else ids.filter(usable)
    if pa.types.is_floating(ids.type):
        suspect = pc.invert(pc.is_null(ids)) if usable is None else usable
    else:
        if len(pc.unique(kept)) == len(kept):  # (count_distinct took twice as long)
            return 0, []
        counts = pc.value_counts(kept)
        held = counts.field("values").filter(pc.greater(counts.field("counts"), 1))
        suspect = pc.is_in(ids, value_set=held)
        if usable is not None:
            suspect = pc.and_(suspect, usable)
    rows = _indexes(pc.fill_null(suspect, False))
    first: dict[Any, int] = {}
    repeated, shown = 0, []
    for row, value in zip(rows.tolist(), ids.take(pa.array(rows)).to_pylist(), strict=True):
        if value in first:
            repeated += 1
            if len(shown) < SHOWN:
                shown.append((value, first[value], row))
        else:
            first[value] = row
    return repeated, shown


def _blank(ids: pa.ChunkedArray | pa.Array) -> pa.ChunkedArray | pa.Array:
    """Null, or (text) no character but whitespace (Arrow's whitespace is Python's `str.isspace`)."""
    blank = pc.is_null(ids)
    if _is_text(ids.type):
        lengths = pc.binary_length(ids)
        blank = pc.or_kleene(blank, pc.or_(pc.equal(lengths, pa.scalar(0, lengths.type)), pc.utf8_is_space(ids)))
    return blank


def check_ids(storage: Storage, pinput: PartitionInput) -> None:
    """Raise `ConfigError` (one line) when an id the run would read is null, repeated or not valid UTF-8, or the
    id column holds no single values. A partition of more than `ids_spill.IDS_IN_MEMORY` ids is checked in
    buckets on disk (`pipeline.ids_spill`), never all its ids at once."""
    check_id_type(pinput)
    if sum(u.rows for u in pinput.units) > ids_spill.IDS_IN_MEMORY:
        found = ids_spill.check_spilled(storage, pinput, _pieces(storage, pinput), _decodable, _blank, _repeats,
                                        SHOWN)
        _refuse(pinput, _Rows(found["places"]), found["nulls"], found["undecodable"], found["repeated"],
                found["repeats"])
        return
    pieces = list(_pieces(storage, pinput))
    if not pieces:
        return
    where = _Rows([(len(column), path, row) for column, path, row in pieces])
    undecodable_rows: list[int] = []
    columns = []
    for n, (column, _, _) in enumerate(pieces):
        decoded, bad = _decodable(column)
        undecodable_rows.extend(where.starts[n] + i for i in bad)
        columns.append(decoded)
    del pieces
    ids = pa.chunked_array(columns, columns[0].type)
    del columns
    blank = _blank(ids)
    nulls, undecodable = ids_spill.Found(SHOWN), ids_spill.Found(SHOWN)
    undecodable.add(undecodable_rows)
    if pc.any(blank).as_py():
        skip = set(undecodable_rows)
        nulls.add([i for i in _indexes(blank).tolist() if i not in skip])
    repeated, repeats = _repeats(ids, pc.invert(blank) if nulls.count or undecodable.count else None)
    _refuse(pinput, where, nulls, undecodable, repeated, repeats)


def _refuse(pinput: PartitionInput, where: _Rows, nulls: ids_spill.Found, undecodable: ids_spill.Found,
            repeated: int, repeats: list[tuple[Any, int, int]]) -> None:
    """Raise the rule's one-line `ConfigError` if any id is wrong: how many of each kind, and the first places."""
    column = f"input.id_column {pinput.id_column!r}"
    problems = []
    if nulls.count:
        at = ", ".join("{} row {}".format(*where(i)) for i in nulls.first[:SHOWN])
        problems.append(f"{nulls.count} null or blank id(s) (at {at}{', ...' if nulls.count > SHOWN else ''})")
    if undecodable.count:
        at = ", ".join("{} row {}".format(*where(i)) for i in undecodable.first[:SHOWN])
        problems.append(f"{undecodable.count} id(s) that are not valid UTF-8 (at {at}"
                        f"{', ...' if undecodable.count > SHOWN else ''})")
    if repeated:
        shown = "; ".join("{} at {} row {} and {} row {}".format(_cut(v), *where(a), *where(b)) for v, a, b in repeats)
        problems.append(f"{repeated} repeated id(s) (e.g. {shown})")
    if problems:
        raise ConfigError(f"{column}: {' and '.join(problems)} in partition {pinput.partition.label}; every "
                          "document needs a unique, non-null id (rows, dead letters and retries are keyed by it)")
