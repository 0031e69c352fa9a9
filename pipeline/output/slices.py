"""Slices: a batch's outcomes, staged by the actor that made them. They are the staging of a run with one actor pool.

Each actor writes every batch it finishes, before returning it, as a slice file,
`slice-<unit id>-<start>-<stop>.arrow`, in the partition's staging folder for this output. It holds the outcomes of
rows `start` to `stop` of the unit's row group (a unit: `pipeline.units`), each row's record typed as its columns
(`workers.outcome.typed_column`), as an Arrow IPC file: the commit reads it without decoding (a 16-outcome slice:
about 24 µs of CPU, where a Parquet slice took 1.3 ms to read and 0.4 ms to write). A slice staged by an earlier
version (`.parquet`, records as JSON text) is still read, and typed at commit. The actor then returns only a receipt
(`workers.outcome.receipt`): per row its unit, its slice, its kind and its reason, all the driver needs to count the
units, show progress and stop early (`--fail-fast-after`). So the outcomes cross from the actors to the driver once,
on disk, not through Ray's object store, and the driver holds none of them: a unit is staged when its slices cover
it, and the commit reads each unit's slices, checking that they cover its rows exactly once
(`pipeline.output.commit`). Once every batch of its task (a unit, or the range of a unit no earlier slice holds) is
staged, the actor stages the task's rows again as one slice of the whole range and deletes the batches' slices
(`SliceWriter.merge`), and the receipt names that slice: the commit reads a file a unit, not a file a batch (at batch
size 16 and 10^6 documents, 3,907 files where it read 62,501: issue 57).

An actor that cannot write a slice returns the batch's outcomes in full, with the `_slice` column; the driver
writes that slice itself (`pipeline.run`). A driver killed between an actor's write and its receipt loses nothing:
a rerun reads the slices of the units it finds in staging. A unit its slices cover is not read again; a unit they
cover in part is read for its other rows only (a merged slice and the batch slices a kill left beside it: the merged
one, `disjoint`). So the work a driver's death costs is the batches in flight in the actors, at most
`workers.batches_in_flight` per actor. A commit deletes the partition's staging folder, slices
included.

Slices are written only when each batch is one contiguous range of one unit (`read_tasks`), that is with one
actor pool. A run split across structured-output backends filters each batch per pool: its actors return outcomes
in full, and the driver stages each unit as one `unit-<id>.parquet` file when all its outcomes have reached it.
"""

from __future__ import annotations

import re
from array import array
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.parquet as pq
import structlog

from pipeline.storage import Storage, StorageError
from workers.outcome import Col, Internal

log = structlog.get_logger(__name__)

_NAME = re.compile(r"^slice-([0-9a-f]+)-(\d+)-(\d+)\.(?:arrow|parquet)$")  # .parquet: staged by earlier versions
_UNIT = re.compile(r"^unit-([0-9a-f]+)\.parquet$")


def slice_name(unit_id: str, start: int, stop: int) -> str:
    return f"slice-{unit_id}-{start}-{stop}.arrow"


@dataclass(frozen=True)
class Slice:
    unit_id: str
    start: int
    stop: int
    path: str

    @property
    def rows(self) -> int:
        return self.stop - self.start


def parse_slice(path: str) -> Slice | None:
    """The slice a staged file's path names, or None for any other file."""
    match = _NAME.match(path.rsplit("/", 1)[-1])
    if match is None or int(match.group(3)) <= int(match.group(2)):
        return None
    return Slice(match.group(1), int(match.group(2)), int(match.group(3)), path)


def unit_file_id(path: str) -> str | None:
    """The unit id a staged unit file's path names (`unit-<id>.parquet`, staged by the driver), or None."""
    match = _UNIT.match(path.rsplit("/", 1)[-1])
    return match.group(1) if match else None


def covers(start: int, stop: int, slices: list[Slice]) -> bool:
    """Whether `slices` hold rows `start` to `stop` each exactly once, and nothing else."""
    at = start
    for s in sorted(slices, key=lambda s: s.start):
        if s.start != at:
            return False
        at = s.stop
    return at == stop


def disjoint(slices: list[Slice]) -> list[Slice]:
    """The slices of one unit that do not overlap, earliest first: two runs with other batch sizes can both have
    left slices of a unit, and a row must come from one of them only."""
    kept: list[Slice] = []
    for s in sorted(slices, key=lambda s: (s.start, -s.stop)):
        if not kept or s.start >= kept[-1].stop:
            kept.append(s)
    return kept


def uncovered(start: int, stop: int, covered: list[Slice]) -> list[tuple[int, int]]:
    """The ranges of rows `start` to `stop` that no slice of `covered` (disjoint) holds, in order."""
    gaps, at = [], start
    for s in sorted(covered, key=lambda s: s.start):
        if s.start > at:
            gaps.append((at, min(s.start, stop)))
        at = max(at, s.stop)
    if at < stop:
        gaps.append((at, stop))
    return [(a, b) for a, b in gaps if b > a]


@dataclass(frozen=True)
class PackedSlices:
    """A staged unit's slices as the driver keeps them until its partition commits (issue 57): their bounds, a few
    bytes each, where a `Slice` with its path was about 360 bytes (22 bytes a document at batch size 16)."""

    __slots__ = ("folder", "unit_id", "bounds")
    folder: str
    unit_id: str
    bounds: bytes  # int64 (start, stop) pairs


_folders: dict[str, str] = {}  # one string per staging folder, shared by every packed unit


def pack(unit_id: str, slices: list[Slice]) -> list[Slice] | PackedSlices:
    """`slices` (of one unit, each named `slice_name` in one folder) packed; as they are if they cannot be."""
    if not slices:
        return slices
    folder = slices[0].path.rsplit("/", 1)[0]
    folder = _folders.setdefault(folder, folder)
    packed = PackedSlices(folder, unit_id, array("q", [b for s in slices for b in (s.start, s.stop)]).tobytes())
    return packed if unpack(packed) == slices else slices


def unpack(slices: list[Slice] | PackedSlices) -> list[Slice]:
    """The slices `pack` packed (a list is returned as it is)."""
    if not isinstance(slices, PackedSlices):
        return slices
    bounds = array("q")
    bounds.frombytes(slices.bounds)
    return [Slice(slices.unit_id, start, stop, f"{slices.folder}/{slice_name(slices.unit_id, start, stop)}")
            for start, stop in zip(bounds[::2], bounds[1::2], strict=True)]


def stamp(outcomes: pa.Table, run_id: str) -> pa.Table:
    """`outcomes` with the run id column, as staged: `run_id`, unless they carry their own (a slice's)."""
    if Col.RUN_ID in outcomes.column_names:
        return outcomes
    return outcomes.append_column(Col.RUN_ID, pa.array([run_id] * outcomes.num_rows, pa.string()))


class SliceWriter:
    """Picklable, handed to each extraction actor: `write(path, outcomes)` stages one batch's outcomes, without the
    internal columns and stamped with the run id. The driver writes with it too, for a batch an actor could not.

    A slice is small (one batch's outcomes), so it is written whole from memory: on S3 one PUT, which readers see
    whole or not at all, where a file streamed to a scratch key, copied into place and deleted took about seven
    requests."""

    def __init__(self, storage: Storage, run_id: str) -> None:
        self.storage = storage
        self.run_id = run_id

    def write(self, path: str, outcomes: pa.Table) -> None:
        internal = [c for c in (Internal.UNIT, Internal.SLICE) if c in outcomes.column_names]
        table = stamp(outcomes.drop_columns(internal), self.run_id).combine_chunks()
        sink = pa.BufferOutputStream()
        with pa.ipc.new_file(sink, table.schema) as writer:
            writer.write_table(table)
        self.storage.write_bytes(path, sink.getvalue().to_pybytes())

    def merge(self, paths: list[str], outcomes: pa.Table) -> str | None:
        """Stage the outcomes of consecutive slices `paths` (one unit's, in order, already written) as one slice of
        their whole range, then delete them; the merged slice's path, or None when `paths` are not consecutive slices
        of one unit in one folder (nothing is written). The commit then reads one file a unit, not one a batch
        (issue 57: at batch size 16, 62,501 slices at 10^6 documents, about half of the driver's CPU).

        The merged slice is written before the batches' slices go, so a process killed between the two leaves both;
        a rerun takes the merged one (`disjoint`: the longest slice at a start) and the commit deletes the others
        with the staging folder, as it does a slice that cannot be deleted here."""
        found = [parse_slice(p) for p in paths]
        if len(found) < 2 or any(s is None for s in found):
            return None
        slices = [s for s in found if s is not None]
        folder = slices[0].path.rsplit("/", 1)[0]
        if any(s.unit_id != slices[0].unit_id or s.path.rsplit("/", 1)[0] != folder for s in slices) or \
                any(b.start != a.stop for a, b in zip(slices, slices[1:], strict=False)) or \
                outcomes.num_rows != sum(s.rows for s in slices):
            return None
        merged = f"{folder}/{slice_name(slices[0].unit_id, slices[0].start, slices[-1].stop)}"
        self.write(merged, outcomes)
        for s in slices:
            try:
                self.storage.delete(s.path)
            except (OSError, StorageError) as exc:
                log.warning("slices.not_deleted", path=s.path, error=f"{type(exc).__name__}: {exc}",
                            action="left to the commit, which deletes the staging folder; never read twice")
        return merged


def read_staged(data: bytes) -> pa.Table:
    """A staged file's outcome table, by its own magic bytes: an Arrow IPC file (a slice), else Parquet (a slice of an
    earlier version, a unit file). What is neither raises `pa.ArrowInvalid` (a ValueError)."""
    if data[:6] == b"ARROW1":
        return pa.ipc.open_file(pa.BufferReader(data)).read_all()
    return pq.ParquetFile(pa.BufferReader(data)).read()


def read_slice(storage: Storage, s: Slice) -> pa.Table:
    """A slice's outcome table, read in one request; ValueError if its row count is not its range's."""
    table = read_staged(storage.read_bytes(s.path))
    if table.num_rows != s.rows:
        raise ValueError(f"slice {s.path} holds {table.num_rows} outcomes for {s.rows} rows")
    return table


def read_slices(storage: Storage, slices: list[Slice]) -> list[pa.Table]:
    """The slices' outcome tables, in order; a slice whose row count is not its range's raises ValueError. (A commit and
    a rerun's check read many side by side: `PartitionCommitter._staged`, `pipeline.run._readable`.)"""
    return [read_slice(storage, s) for s in slices]
