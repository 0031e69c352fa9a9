"""The read stage: the read tasks of a run's units (`read_tasks`) and their documents (`read_units`), each row
tagged with its unit.

A unit is the grain the driver accounts for and commits; its slices keep its id, so the driver counts whole units
while the documents flow batch by batch. With one actor pool each task is a unit, read by the actor that extracts it
(`pipeline.dataflow`: the documents never pass through the driver); a run split across two backends reads one task
per batch in Ray Data's read tasks. Consecutive tasks of one row group are cut from a single read of it, cached per
process.

One bad document is one dead letter, never a failed block: a value of the id, text or schema column that is
not valid UTF-8, or a row group whose text pages cannot be read (corrupt data pages under an intact footer),
is flagged in `INVALID_INPUT_COLUMN` with the reason and its text nulled; the extractor turns each flagged
row into an `invalid_input` dead letter.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pyarrow.compute  # pa.compute
import pyarrow.parquet as pq
import structlog

from pipeline.output.slices import Slice, slice_name, uncovered
from pipeline.storage import Storage, join
from pipeline.units import Unit
from workers.classify import INVALID_INPUT_COLUMN
from workers.extractor import BACKEND_COLUMN
from workers.outcome import Internal

log = structlog.get_logger(__name__)

UNIT_COLUMN = Internal.UNIT
SLICE_COLUMN = Internal.SLICE

_last_group: dict[tuple[str, str, int, tuple[str, ...]], pa.Table] = {}
_group_lock = threading.Lock()


def read_tasks(units: list[Unit], batch_size: int | None = None,
               slice_path: Callable[[Unit, int, int], str] | None = None,
               covered: dict[str, list[Slice]] | None = None) -> list[dict[str, Any]]:
    """One task per `batch_size` rows of each unit (per unit without it). A unit's slices keep its id, so the
    driver still accounts and stages whole units; a worker reads a row group once for consecutive slices.

    With `slice_path` (unit, start, stop → path), each task is a unit's rows that no slice holds yet, one task per
    range of them (a whole unit, in a first run), and names the slice file of each of its batches (`task_slices`,
    one per `step` rows): its actor runs and stages it batch by batch (`pipeline.output.slices`). So the driver and
    Ray Data handle one block per unit, not one per batch (issue 57: their per-block state and CPU, at batch size
    16, were most of the driver's growth and CPU per document). The rows of a unit that `covered` (unit id →
    disjoint slices staged by an earlier run) holds are not read again."""
    tasks = []
    for u in units:
        have = (covered or {}).get(u.id)
        ranges = uncovered(u.start, u.stop, have) if have else [(u.start, max(u.stop, u.start + 1))]
        step = max(batch_size or (u.stop - u.start), 1)
        for first, last in ranges:
            bounds = [(start, min(start + step, last, u.stop)) for start in range(first, last, step)]
            if slice_path is not None:  # one task for the range, its batches' slices named
                task = {"path": u.path, "row_group": u.row_group, "start": first, "stop": bounds[-1][1],
                        "unit_id": u.id, "version": u.version, "step": step}
                tasks.append({**task, **_slice_names(u.id, [(start, stop, slice_path(u, start, stop))
                                                              for start, stop in bounds])})
                continue
            for start, stop in bounds:  # an empty unit: one task of no rows
                tasks.append({"path": u.path, "row_group": u.row_group, "start": start, "stop": stop,
                              "unit_id": u.id, "version": u.version})
    return tasks


def _slice_names(unit_id: str, named: list[tuple[int, int, str]]) -> dict[str, Any]:
    """A task's slice files: their folder alone (`slice_dir`) where each is that folder's `slice_name` of its rows,
    as the run's staging names them (the task then carries one path, not one per batch: the driver holds every
    task of the run, and Ray Data puts each in the object store), else each path (`slices`)."""
    folder = named[0][2].rsplit("/", 1)[0] if "/" in named[0][2] else None
    if folder is not None and all(start < stop and path == join(folder, slice_name(unit_id, start, stop))
                                  for start, stop, path in named):
        return {"slice_dir": folder}
    return {"slices": [path for _, _, path in named]}


def task_slices(task: dict[str, Any]) -> list[str]:
    """The slice file of each batch of a task of `read_tasks`, in order."""
    if task.get("slices") is not None:
        return task["slices"]
    step, stop = task["step"], task["stop"]
    return [join(task["slice_dir"], slice_name(task["unit_id"], start, min(start + step, stop)))
            for start in range(task["start"], stop, step)]


def batch_slices(step: int, paths: list[str], rows: int) -> pa.DictionaryArray:
    """The `_slice` column of a task's rows: row i is in batch i // `step`, staged as `paths[i // step]`."""
    return pa.DictionaryArray.from_arrays(pa.array([i // step for i in range(rows)], pa.int32()),
                                          pa.array(paths, pa.string()))


def _row_group(storage: Storage, path: str, row_group: int, columns: list[str], version: str = "") -> pa.Table:
    """The row group, from the one this process read last if it is the same. The units are read in the actors that
    extract them (`pipeline.dataflow`), by up to `workers.batches_in_flight` threads at once: one reads a row group
    while the others wait for it, as they are mostly the next units of the same one."""
    key = (path, version, row_group, tuple(columns))  # a worker outlives a run: a re-delivered file is read anew
    with _group_lock:
        group = _last_group.get(key)
        if group is None:
            group = pq.ParquetFile(storage.arrow_path(path), filesystem=storage.arrow_fs()).read_row_group(
                row_group, columns=columns)
            _last_group.clear()  # hold one row group at a time
            _last_group[key] = group
        return group


def read_units(
    tasks: pa.Table,
    storage: Storage,
    id_field: pa.Field,
    text_column: str,
    schema_column: str | None = None,
    routes: dict[str, str] | None = None,
    default_backend: str = "xgrammar",
) -> pa.Table:
    """Ray Data UDF: read tasks in, the documents of their units out, tagged `_unit`.

    With per-row schemas the schema column comes along, and with `routes` (schema value → backend,
    for the values not on `default_backend`) each row is tagged `_backend` for its actor pool."""
    columns = [id_field.name, text_column] + ([schema_column] if schema_column else [])
    fields = [id_field, pa.field(text_column, pa.string())]
    fields += [pa.field(schema_column, pa.string())] if schema_column else []
    fields += [pa.field(UNIT_COLUMN, pa.string())]
    fields += [pa.field(BACKEND_COLUMN, pa.string())] if routes is not None else []
    fields += [pa.field(INVALID_INPUT_COLUMN, pa.string())]
    staged = bool({"slices", "slice_dir"} & set(tasks.column_names))  # each batch's slice file, dictionary-encoded
    fields += [pa.field(SLICE_COLUMN, pa.dictionary(pa.int32(), pa.string()))] if staged else []
    schema = pa.schema(fields)
    pieces = []
    for task in tasks.to_pylist():
        try:
            group = _row_group(storage, task["path"], task["row_group"], columns, task.get("version", ""))
            unreadable = None
        except (pa.ArrowInvalid, OSError) as exc:
            if _is_transient(exc):
                raise
            group, unreadable = _ids_only(storage, task, id_field, columns), f"{type(exc).__name__}: {exc}"
        piece = group.slice(task["start"], task["stop"] - task["start"])
        piece = _flag_invalid(piece, [c for c in columns if c != id_field.name], id_field.name, unreadable)
        piece = piece.append_column(UNIT_COLUMN, pa.array([task["unit_id"]] * piece.num_rows, pa.string()))
        if routes is not None:
            values = piece.column(schema_column).to_pylist() if schema_column else [None] * piece.num_rows
            piece = piece.append_column(BACKEND_COLUMN, pa.array(
                [routes.get(v, default_backend) if v is not None else default_backend for v in values], pa.string()))
        if staged:
            piece = piece.append_column(SLICE_COLUMN, batch_slices(task["step"], task_slices(task), piece.num_rows))
        pieces.append(piece.select(schema.names).cast(schema))
    return pa.concat_tables(pieces) if pieces else schema.empty_table()


_TRANSIENT = ("AWS Error", "curl", "Connection", "timed out", "Timeout", "Throttl", "SlowDown")


def _is_transient(exc: BaseException) -> bool:
    """A storage error worth retrying (Ray retries the task), as opposed to bytes that will never decode."""
    return any(text in str(exc) for text in _TRANSIENT)


def _ids_only(storage: Storage, task: dict[str, Any], id_field: pa.Field, columns: list[str]) -> pa.Table:
    """The row group's ids with null text: its other columns cannot be read (if the ids cannot either, raise)."""
    ids = pq.ParquetFile(storage.arrow_path(task["path"]), filesystem=storage.arrow_fs()).read_row_group(
        task["row_group"], columns=[id_field.name])
    log.warning("read.unreadable_row_group", path=task["path"], row_group=task["row_group"], rows=ids.num_rows)
    for name in columns[1:]:
        ids = ids.append_column(name, pa.nulls(ids.num_rows, pa.string()))
    return ids


def undecodable(column: pa.ChunkedArray | pa.Array) -> dict[int, str]:
    """Row index → why, for each value of a string column that is not valid UTF-8 (none: an empty dict)."""
    array = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    if not (pa.types.is_string(array.type) or pa.types.is_large_string(array.type)):
        return {}
    try:
        array.validate(full=True)
        return {}
    except pa.ArrowInvalid:
        pass
    raw = array.view(pa.large_binary() if pa.types.is_large_string(array.type) else pa.binary())
    found = {}
    for i, value in enumerate(raw.to_pylist()):
        if value is not None:
            try:
                value.decode()
            except UnicodeDecodeError as exc:
                found[i] = f"not valid UTF-8 at byte {exc.start} ({exc.reason})"
    return found


def _flag_invalid(piece: pa.Table, texts: list[str], id_column: str, unreadable: str | None) -> pa.Table:
    """`piece` with `INVALID_INPUT_COLUMN`: why each row cannot be read, or null. A flagged row's text and schema
    become null, and an undecodable string id its lossy decoding, so that nothing downstream trips on it."""
    flags: list[str | None] = [f"the row group's text cannot be read: {unreadable}" if unreadable else None
                               ] * piece.num_rows
    for name in [id_column, *texts]:
        bad = undecodable(piece.column(name))
        if not bad:
            continue
        for i, why in bad.items():
            flags[i] = flags[i] or f"{name}: {why}"
        raw = piece.column(name).combine_chunks()
        raw = raw.view(pa.large_binary() if pa.types.is_large_string(raw.type) else pa.binary()).to_pylist()
        fixed = [v.decode(errors="replace") if name == id_column and v is not None else
                 (None if i in bad else (v.decode() if v is not None else None)) for i, v in enumerate(raw)]
        piece = piece.set_column(piece.schema.get_field_index(name), name, pa.array(fixed, pa.string()))
    return piece.append_column(INVALID_INPUT_COLUMN, pa.array(flags, pa.string()))


def read_schema_values(storage: Storage, units: list[Unit], schema_column: str) -> set[str]:
    """The distinct per-row schema values of `units` (the driver routes each to a backend before Ray starts)."""
    values: set[str] = set()
    for unit in units:
        group = _row_group(storage, unit.path, unit.row_group, [schema_column], unit.version)
        column = group.column(schema_column).slice(unit.start, unit.stop - unit.start)
        if bad := undecodable(column):  # those rows become invalid_input dead letters: no schema to route
            column = column.take([i for i in range(len(column)) if i not in bad])
        values.update(v for v in pa.compute.unique(column).to_pylist() if v is not None)
    return values


def sample_input(storage: Storage, files: list[str], columns: list[str], max_files: int = 4) -> list[str]:
    """`extract validate`'s look at the documents themselves: the given string columns of the first and last row
    group of up to `max_files` files. Returns one warning per row group holding values that are not valid UTF-8
    (a run makes each an `invalid_input` dead letter); raises `ValueError` in one line for a column whose data
    pages cannot be read at all (a corrupt file whose footer is intact)."""
    warnings = []
    for uri in files[:max_files]:
        parquet = pq.ParquetFile(storage.arrow_path(uri), filesystem=storage.arrow_fs())
        groups = sorted({0, parquet.metadata.num_row_groups - 1} - {-1})
        for rg in groups:
            try:
                table = parquet.read_row_group(rg, columns=columns)
            except (pa.ArrowInvalid, OSError) as exc:
                if _is_transient(exc):
                    raise
                raise ValueError(f"input: {uri} row group {rg}: the {', '.join(columns)} column(s) cannot be read, "
                                 f"the file's data pages are corrupt ({type(exc).__name__}: {exc})") from None
            for name in columns:
                bad = undecodable(table.column(name))
                if bad:
                    row, why = next(iter(bad.items()))
                    warnings.append(f"{len(bad)} value(s) of {name} in {uri} row group {rg} are not valid UTF-8 "
                                    f"(e.g. row {row}: {why}): each will be an invalid_input dead letter")
    return warnings
