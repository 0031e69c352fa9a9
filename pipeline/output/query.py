"""`extract query`: DuckDB with views `rows` and `dead_letters` over every committed partition, through
`CommittedOutput.duckdb` (`pipeline.output.committed`).

Only the files the partition manifests name are read, so a partition being written, replaced or swept is never
half-read, and its two tables are always of the same commit. Paths are resolved against the output root the config
names now, so a moved or copied output reads from its new place.
"""

from __future__ import annotations

import duckdb

from pipeline.config import LoadedConfig
from pipeline.output.committed import CommittedOutput, NothingCommittedError
from pipeline.storage import S3Settings

__all__ = ["NothingCommittedError", "connect", "run_query"]


def connect(target: LoadedConfig | str, s3_settings: S3Settings | None = None,
            verify: bool = False) -> duckdb.DuckDBPyConnection:
    """DuckDB over a job's committed output: `target` is its loaded config, or the output folder / s3:// prefix
    itself (with `s3_settings` for an endpoint other than AWS's). Each file's size is checked against its
    manifest, and with `verify` its content hash (`OutputCorruptError` if one differs)."""
    output = CommittedOutput.of(target) if isinstance(target, LoadedConfig) else CommittedOutput(
        target, s3_settings=s3_settings)
    return output.duckdb(verify)


def run_query(target: LoadedConfig | str, sql: str, verify: bool = False) -> duckdb.DuckDBPyRelation | None:
    return connect(target, verify=verify).sql(sql)
