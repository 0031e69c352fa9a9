"""Work units: fixed slices of a row group, the grain of checkpointing.

A partition's input is cut into units of at most `checkpoint_rows` rows, from Parquet metadata alone.
The actors stage each batch of a unit as a slice (`pipeline.output.slices`), and a unit is staged when its slices
cover it (a run split across two backends: when the driver has staged its outcomes as one file). A rerun after a
crash skips what is staged, so the work redone is at most the batches in flight, and the driver's memory holds
unit ids and slice names, not document ids.

Every unit id carries its file's version (size and mtime locally, ETag on S3), so staging made from
another version of a file never matches a unit of this one: a rerun after the input was re-delivered
redoes those units instead of committing outcomes of documents that are no longer there.

The input selection is a prefix of the partition's documents in input order (files sorted, row groups,
rows): `limit` N selects the first N. A partition committed by a limited run records how many it read and
is marked incomplete; a later run cuts its units with `offset` = that count, so its units start where the committed
ones stop, and its commit carries the committed rows over (`pipeline.output.commit`): every document is
committed once, none is read twice.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.parquet as pq

from pipeline.config import ConfigError
from pipeline.partition import Partition
from pipeline.storage import S3Storage, Storage, StorageError, has_glob, split_s3


@dataclass(frozen=True)
class Unit:
    partition: str
    path: str
    row_group: int
    start: int
    stop: int
    version: str = ""  # the file's version (`file_version`): another version of the file, another id

    @property
    def rows(self) -> int:
        return self.stop - self.start

    @property
    def id(self) -> str:
        raw = f"{self.path}|{self.version}|{self.row_group}|{self.start}|{self.stop}"
        return hashlib.sha256(raw.encode()).hexdigest()[:20]


@dataclass
class PartitionInput:
    partition: Partition
    id_column: str
    files: list[str]
    schema: pa.Schema
    total_rows: int
    units: list[Unit] = field(default_factory=list)
    versions: dict[str, str] = field(default_factory=dict)  # file → `file_version`
    offset: int = 0  # the first `offset` documents (in input order) are committed already, by a limited run
    limit: int | None = None  # the selection: the first `limit` documents, or all
    covered: list[Unit] = field(default_factory=list)  # the units of the first `offset` documents (not read)

    @property
    def rows_to_read(self) -> int:
        return sum(u.rows for u in self.units)

    @property
    def selected_rows(self) -> int:
        """Documents the partition holds once this run commits: the committed prefix and this run's units."""
        return self.offset + self.rows_to_read

    @property
    def complete(self) -> bool:
        return self.selected_rows >= self.total_rows

    @property
    def fingerprint(self) -> str:
        """sha256 hex of every input file's path and version, in file order: equal iff the partition reads
        the same files at the same versions (an empty file list or empty files included)."""
        return fingerprint(self.files, self.versions)


def fingerprint(files: list[str], versions: dict[str, str]) -> str:
    """`PartitionInput.fingerprint` of `files` at `versions`."""
    raw = "\n".join(f"{f}|{versions.get(f, '')}" for f in files)
    return hashlib.sha256(raw.encode()).hexdigest()


def input_fingerprint(storage: Storage, partition: Partition) -> str:
    """The partition's input fingerprint from a listing and each file's version alone: no Parquet footer read, no
    id read (what a committed partition is compared by, to be skipped). `ConfigError`/`StorageError` if its
    input is gone."""
    files = resolve_files(storage, partition.input_uri)
    return fingerprint(files, {f: file_version(storage, f) for f in files})


def file_version(storage: Storage, uri: str) -> str:
    """One file's version, from metadata: its ETag and size on S3, its size and mtime (ns) locally."""
    if isinstance(storage, S3Storage):
        bucket, key = split_s3(uri)
        head = storage._call("head", uri, storage.client.head_object, Bucket=bucket, Key=key)
        return f"etag={head.get('ETag', '').strip(chr(34))};size={head.get('ContentLength', '')}"
    try:
        st = os.stat(uri)
    except OSError as exc:
        raise StorageError(f"input {uri}: {exc.strerror}") from None
    return f"size={st.st_size};mtime_ns={st.st_mtime_ns}"


def resolve_files(storage: Storage, uri: str) -> list[str]:
    """A file, a folder or prefix (every .parquet below it), or a glob, as a sorted list."""
    if has_glob(uri):
        files = storage.glob(uri)
    else:
        files = storage.list_files(uri)
        if not files:
            raise ConfigError(f"input.uri: {uri} does not exist")
    files = sorted(f for f in files if f.endswith(".parquet") or f == uri)
    if not files:
        raise ConfigError(f"input.uri: {uri} matches no Parquet files")
    return files


def _check_columns(uri: str, file_schema: pa.Schema, id_column: str, text_column: str,
                   schema_column: str | None) -> None:
    strings = [("input.text_column", text_column)] + ([("input.schema_column", schema_column)]
                                                      if schema_column else [])
    for key, column in (("input.id_column", id_column), *strings):
        if column not in file_schema.names:
            raise ConfigError(
                f"{key}: column {column!r} is not in {uri} (columns: {', '.join(file_schema.names)})"
            )
    for key, column in strings:
        kind = file_schema.field(column).type
        if not (pa.types.is_string(kind) or pa.types.is_large_string(kind)):
            raise ConfigError(f"{key}: column {column!r} in {uri} is {kind}, not a string")


def _footer(storage: Storage, uri: str, id_column: str, text_column: str, schema_column: str | None) -> pq.ParquetFile:
    """One input file's footer, its columns checked."""
    try:
        meta = pq.ParquetFile(storage.arrow_path(uri), filesystem=storage.arrow_fs())
    except (pa.ArrowInvalid, OSError) as exc:
        raise ConfigError(f"input.uri: {uri} is not a readable Parquet file: {exc}") from None
    _check_columns(uri, meta.schema_arrow, id_column, text_column, schema_column)
    return meta


def cut_units(
    storage: Storage,
    partition: Partition,
    id_column: str,
    text_column: str,
    limit: int | None,
    checkpoint_rows: int,
    schema_column: str | None = None,
    offset: int = 0,
) -> PartitionInput:
    """Files, columns and units of one partition, from metadata; a wrong column fails naming it. The units cover
    documents [offset, limit) in input order; those before `offset` are in `covered` (split at `offset`)."""
    files = resolve_files(storage, partition.input_uri)
    schema: pa.Schema | None = None
    total = 0
    units: list[Unit] = []
    covered: list[Unit] = []
    remaining = limit if limit else None
    position = 0  # documents cut so far, in input order
    versions: dict[str, str] = {}
    for uri in files:
        versions[uri] = version = file_version(storage, uri)
        meta = _footer(storage, uri, id_column, text_column, schema_column)
        schema = schema or meta.schema_arrow
        if meta.schema_arrow.field(id_column).type != schema.field(id_column).type:
            raise ConfigError(f"input.id_column: column {id_column!r} is {meta.schema_arrow.field(id_column).type} "
                              f"in {uri} but {schema.field(id_column).type} in {files[0]}")
        total += meta.metadata.num_rows
        for rg in range(meta.metadata.num_row_groups):
            n = meta.metadata.row_group(rg).num_rows
            for start in range(0, n, checkpoint_rows):
                if remaining is not None and remaining <= 0:
                    break
                stop = min(n, start + checkpoint_rows)
                if remaining is not None:
                    stop = min(stop, start + remaining)
                    remaining -= stop - start
                cut = min(stop, max(start, start + offset - position))  # rows before it are committed
                if cut > start:
                    covered.append(Unit(partition.key, uri, rg, start, cut, version))
                if stop > cut:
                    units.append(Unit(partition.key, uri, rg, cut, stop, version))
                position += stop - start
    assert schema is not None
    if offset > position:
        raise ConfigError(f"partition {partition.label}: {offset} documents are committed but the input holds "
                          f"{position}; rerun with --force")
    return PartitionInput(partition, id_column, files, schema, total, units, versions, offset, limit, covered)


plan_partition = cut_units  # its name before `pipeline.planning` became the one place that plans a partition
