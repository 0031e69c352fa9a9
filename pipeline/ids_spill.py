"""The id rule (`pipeline.ids`) for a partition too large to hold its ids at once: a bounded, on-disk check.

Up to `IDS_IN_MEMORY` ids a partition's ids are checked as one Arrow column (`pipeline.ids.check_ids`). Above, the
driver would hold every id of the partition (and Arrow's hash table of them) at once: about 1.5 GB for 10⁸ ids of
ten characters. Here instead the ids are read unit by unit; nulls, blanks and ids that are not UTF-8 are counted as
they come (their first few places kept), and the other ids, each with its row in the partition, are written to
one of N bucket files by a hash of the value, so that equal ids always meet in one bucket. Each bucket then holds
about `IDS_IN_MEMORY` / 2 ids and is checked alone for repeats, with the same rule (`pipeline.ids._repeats`:
Arrow's equality, Python's for floating-point ids). The message is the same as the in-memory check's: counts, and
the first few places in row order. Memory: one chunk of `CHUNK_ROWS` ids and one bucket at a time.
"""

from __future__ import annotations

import math
import os
import tempfile
from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pipeline.storage import Storage
from pipeline.units import PartitionInput

IDS_IN_MEMORY = 2_000_000  # ids checked at once; a partition with more is checked in buckets on disk
CHUNK_ROWS = 200_000  # ids gathered before they are hashed and written to their buckets
_WEIGHTS = np.random.default_rng(57).integers(1, 2**63, 64, dtype=np.uint64) | np.uint64(1)
_MIX = np.uint64(0x9E3779B97F4A7C15)


class Found:
    """A count of bad ids and the first `shown` of their rows."""

    def __init__(self, shown: int) -> None:
        self.count = 0
        self.first: list[int] = []
        self.shown = shown

    def add(self, rows: list[int]) -> None:
        self.count += len(rows)
        self.first.extend(rows[: max(0, self.shown - len(self.first))])


def _byte_hash(column: pa.Array) -> np.ndarray:
    """A 64-bit hash of each value's bytes (a string or binary column without nulls): equal bytes, equal hash."""
    large = pa.types.is_large_string(column.type) or pa.types.is_large_binary(column.type)
    raw = column.view(pa.large_binary() if large else pa.binary())
    offsets = np.frombuffer(raw.buffers()[1], dtype=np.int64 if large else np.int32)[
        raw.offset: raw.offset + len(raw) + 1].astype(np.int64)
    data = np.frombuffer(raw.buffers()[2], dtype=np.uint8) if raw.buffers()[2] is not None else np.zeros(0, np.uint8)
    first, last = int(offsets[0]), int(offsets[-1])
    lengths = np.diff(offsets)
    position = np.arange(last - first, dtype=np.int64) - np.repeat(offsets[:-1] - first, lengths)
    with np.errstate(over="ignore"):
        weighted = data[first:last].astype(np.uint64) * _WEIGHTS[position % len(_WEIGHTS)]
        sums = np.concatenate([np.zeros(1, np.uint64), np.cumsum(weighted, dtype=np.uint64)])
        return (sums[offsets[1:] - first] - sums[offsets[:-1] - first]) ^ (lengths.astype(np.uint64) * _MIX)


def bucket_of(column: pa.Array, buckets: int) -> np.ndarray:
    """Each id's bucket (a column without nulls): ids equal by the rule's equality share one (0.0 and -0.0 too)."""
    kind = column.type
    if pa.types.is_floating(kind):
        values = column.to_numpy(zero_copy_only=False).astype(np.float64) + 0.0  # -0.0 + 0.0 is 0.0
        hashed = values.view(np.uint64)
    elif pa.types.is_integer(kind):
        hashed = column.to_numpy(zero_copy_only=False).astype(np.uint64)
    elif pa.types.is_string(kind) or pa.types.is_large_string(kind) or pa.types.is_binary(kind) \
            or pa.types.is_large_binary(kind):
        hashed = _byte_hash(column)
    else:  # dates, times, timestamps, decimals: their text, one per value of one column type
        hashed = _byte_hash(pc.cast(column, pa.string()))
    with np.errstate(over="ignore"):
        mixed = hashed * _MIX
    return ((mixed >> np.uint64(32)) % np.uint64(buckets)).astype(np.int64)


class Buckets:
    """Bucket files of (id, row in the partition) in a temporary folder, each written in row order."""

    def __init__(self, folder: str, count: int, kind: pa.DataType) -> None:
        self.folder, self.count = folder, count
        self.schema = pa.schema([("id", kind), ("row", pa.int64())])
        self.writers: dict[int, Any] = {}
        self.largest = 0  # the most ids one bucket holds: what the check holds at once
        self.sizes: dict[int, int] = {}

    def path(self, bucket: int) -> str:
        return os.path.join(self.folder, f"ids-{bucket}.arrow")

    def write(self, ids: pa.Array, rows: np.ndarray) -> None:
        if not len(ids):
            return
        which = bucket_of(ids, self.count)
        order = np.argsort(which, kind="stable")
        which, ids, rows = which[order], ids.take(pa.array(order)), rows[order]
        edges = np.flatnonzero(np.diff(which)) + 1
        for start, stop in zip([0, *edges.tolist()], [*edges.tolist(), len(which)], strict=True):
            bucket = int(which[start])
            if bucket not in self.writers:
                self.writers[bucket] = pa.ipc.new_stream(self.path(bucket), self.schema)
            self.writers[bucket].write_table(pa.table([ids.slice(start, stop - start),
                                                       pa.array(rows[start:stop])], schema=self.schema))
            self.sizes[bucket] = self.sizes.get(bucket, 0) + stop - start

    def close(self) -> None:
        for writer in self.writers.values():
            writer.close()

    def tables(self) -> Any:
        for bucket in sorted(self.writers):
            with pa.ipc.open_stream(self.path(bucket)) as reader:
                table = reader.read_all()
            self.largest = max(self.largest, table.num_rows)
            yield table


def check_spilled(storage: Storage, pinput: PartitionInput, pieces: Any, decodable: Callable[..., Any],
                  blank_of: Callable[..., Any], repeats: Callable[..., Any], shown: int) -> dict[str, Any]:
    """The id rule over `pieces` ((ids, file, row) per unit, `pipeline.ids._pieces`), in buckets on disk: the
    counts and first rows of null or blank ids, of ids that are not UTF-8, and of repeats, and each piece's first
    row in the partition (length, file, row in file: `pipeline.ids._Rows`)."""
    total_ids = sum(u.rows for u in pinput.units)
    count = max(2, math.ceil(2 * total_ids / IDS_IN_MEMORY))
    nulls, undecodable = Found(shown), Found(shown)
    places: list[tuple[int, str, int]] = []
    with tempfile.TemporaryDirectory(prefix="extract-ids-") as folder:
        buckets: Buckets | None = None
        gathered: list[pa.Array] = []
        rows: list[np.ndarray] = []
        at = 0
        for column, path, row in pieces:
            decoded, bad = decodable(column)
            undecodable.add([at + i for i in bad])
            blank = blank_of(decoded)
            if pc.any(blank).as_py():
                skip = set(bad)
                flagged = np.flatnonzero(blank.to_numpy(zero_copy_only=False)).tolist()
                nulls.add([at + i for i in flagged if i not in skip])
            usable = pc.invert(blank)
            gathered.append(decoded.filter(usable))
            rows.append(np.arange(at, at + len(decoded), dtype=np.int64)[usable.to_numpy(zero_copy_only=False)])
            places.append((len(decoded), path, row))
            at += len(decoded)
            if buckets is None:
                buckets = Buckets(folder, count, decoded.type)
            if sum(len(g) for g in gathered) >= CHUNK_ROWS:
                buckets.write(pa.concat_arrays(gathered), np.concatenate(rows))
                gathered, rows = [], []
        if buckets is None:
            return {"nulls": nulls, "undecodable": undecodable, "repeated": 0, "repeats": [], "places": places,
                    "largest": 0, "buckets": 0}
        if gathered:
            buckets.write(pa.concat_arrays(gathered), np.concatenate(rows))
        buckets.close()
        repeated, found = 0, []
        for table in buckets.tables():
            n, examples = repeats(table.column("id"), None)
            repeated += n
            at_rows = table.column("row").to_numpy()
            found += [(value, int(at_rows[a]), int(at_rows[b])) for value, a, b in examples]
    found.sort(key=lambda example: example[2])
    return {"nulls": nulls, "undecodable": undecodable, "repeated": repeated, "repeats": found[:shown],
            "places": places, "largest": buckets.largest, "buckets": len(buckets.writers)}
