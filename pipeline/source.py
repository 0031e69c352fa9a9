"""The input side: which Parquet files a URI names, their columns and row count, checked before Ray starts."""

from __future__ import annotations

import glob
import os
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from pipeline.config import ConfigError


@dataclass(frozen=True)
class InputPlan:
    files: list[str]
    schema: pa.Schema
    total_rows: int
    rows_to_read: int


def resolve_files(uri: str) -> list[str]:
    """A file, a folder (every .parquet below it) or a glob, as a sorted list of files."""
    if "://" in uri:
        raise ConfigError(f"input.uri: {uri!r}: only local paths are supported by this version")
    if any(ch in uri for ch in "*?["):
        files = sorted(p for p in glob.glob(uri, recursive=True) if os.path.isfile(p))
    elif os.path.isdir(uri):
        files = sorted(str(p) for p in Path(uri).rglob("*.parquet") if p.is_file())
    elif os.path.isfile(uri):
        files = [uri]
    else:
        raise ConfigError(f"input.uri: {uri} does not exist")
    if not files:
        raise ConfigError(f"input.uri: {uri} matches no Parquet files")
    return files


def plan_input(uri: str, id_column: str, text_column: str, limit: int | None) -> InputPlan:
    files = resolve_files(uri)
    total = 0
    schema: pa.Schema | None = None
    for path in files:
        try:
            meta = pq.ParquetFile(path)
        except (pa.ArrowInvalid, OSError) as exc:
            raise ConfigError(f"input.uri: {path} is not a readable Parquet file: {exc}") from None
        file_schema = meta.schema_arrow
        if schema is None:
            schema = file_schema
        for key, column in (("input.id_column", id_column), ("input.text_column", text_column)):
            if column not in file_schema.names:
                raise ConfigError(
                    f"{key}: column {column!r} is not in {path} (columns: {', '.join(file_schema.names)})"
                )
        text_type = file_schema.field(text_column).type
        if not (pa.types.is_string(text_type) or pa.types.is_large_string(text_type)):
            raise ConfigError(f"input.text_column: column {text_column!r} in {path} is {text_type}, not a string")
        total += meta.metadata.num_rows
    assert schema is not None
    return InputPlan(files, schema, total, min(total, limit) if limit else total)
