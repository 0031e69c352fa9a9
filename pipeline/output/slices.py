"""Slices: a batch's outcomes, staged by the actor that made them, so that a driver's death loses no finished batch.

The driver stages a unit (`pipeline.units`) once all its outcomes have reached it. Between an actor finishing a batch
and the driver receiving it, the outcomes sit in Ray's object store, owned by the driver: a driver killed then loses
them, and its rerun redid those batches as well as the ones cut off in flight (issue 27's resume bench: 3 finished
batches lost in one run of two). So each actor also writes every batch it finishes, before returning it, as a slice
file beside the unit files: `slice-<unit id>-<start>-<stop>.parquet` in the partition's staging folder for this
output, holding exactly what the unit file would hold for rows `start` to `stop` of the unit's row group.

A rerun (`pipeline.run`) reads the slices of the units it did not find staged: a unit its slices cover is staged
from them without being read; a unit they cover in part is read for its other rows only, and the slices' outcomes
join the fresh ones. So the work a driver's death costs is the batches in flight in the actors, at most
`workers.batches_in_flight` per actor. A commit deletes the partition's staging folder, slices included.

Slices are written only when each batch is one contiguous range of one unit (`read_tasks`), that is with one
actor pool; a run split across structured-output backends filters each batch per pool, and stages units as before.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.parquet as pq

from pipeline.storage import Storage, join
from workers.outcome import Col, Internal

_NAME = re.compile(r"^slice-([0-9a-f]+)-(\d+)-(\d+)\.parquet$")


def slice_name(unit_id: str, start: int, stop: int) -> str:
    return f"slice-{unit_id}-{start}-{stop}.parquet"


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


def stamp(outcomes: pa.Table, run_id: str) -> pa.Table:
    """`outcomes` with the run id column, as staged: `run_id`, unless they carry their own (a slice's)."""
    if Col.RUN_ID in outcomes.column_names:
        return outcomes
    return outcomes.append_column(Col.RUN_ID, pa.array([run_id] * outcomes.num_rows, pa.string()))


class SliceWriter:
    """Picklable, handed to each extraction actor: `write(path, outcomes)` stages one batch's outcomes (the driver
    drops the unit column, and stamps the run id, as it does for a unit file)."""

    def __init__(self, storage: Storage, run_id: str) -> None:
        self.storage = storage
        self.run_id = run_id

    def write(self, path: str, outcomes: pa.Table) -> None:
        table = stamp(outcomes.drop_columns([c for c in (Internal.UNIT,) if c in outcomes.column_names]), self.run_id)
        # The partition's scratch folder (`OutputLayout.scratch`) is a sibling of its output's staging folder.
        scratch = join(posixpath.dirname(posixpath.dirname(path.rstrip("/"))), "_scratch")
        with self.storage.atomic_output(path, scratch) as target:
            pq.write_table(table, self.storage.arrow_path(target), filesystem=self.storage.arrow_fs())


def read_slices(storage: Storage, slices: list[Slice]) -> list[pa.Table]:
    """The slices' outcome tables, in order; a slice whose row count is not its range's raises ValueError."""
    tables = []
    for s in slices:
        table = pq.read_table(storage.arrow_path(s.path), filesystem=storage.arrow_fs())
        if table.num_rows != s.rows:
            raise ValueError(f"slice {s.path} holds {table.num_rows} outcomes for {s.rows} rows")
        tables.append(table)
    return tables
