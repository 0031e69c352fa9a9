"""`extract query`: DuckDB with views `rows` and `dead_letters` over every committed partition.

Only the files the partition manifests name are read (`pipeline.manifest.committed`), so a partition being
written, replaced or swept is never half-read, and its two tables are always of the same commit. Paths are
resolved against the output root the config names now, so a moved or copied output reads from its new
place. Local output is read by DuckDB directly; S3 output goes through pyarrow datasets, so no DuckDB
extension needs downloading.
"""

from __future__ import annotations

import duckdb
import pyarrow.dataset as pads

from pipeline.config import LoadedConfig
from pipeline.output.layout import KINDS
from pipeline.output.manifest import committed
from pipeline.storage import S3Settings, Storage, is_s3, join, storage_for


class NothingCommittedError(LookupError):
    """The output has no committed partition to query."""


def committed_files(output_uri: str, storage: Storage, verify: bool = False) -> dict[str, list[str]]:
    """Every committed file of each table, their sizes checked (and with `verify` their hashes)."""
    manifests = committed(storage, output_uri, verify=verify)
    if not manifests:
        raise NothingCommittedError(f"no committed partition under {output_uri}")
    return {kind: [m.uri(kind, output_uri) for m in manifests] for kind in KINDS}


def connect(target: LoadedConfig | str, s3_settings: S3Settings | None = None,
            verify: bool = False) -> duckdb.DuckDBPyConnection:
    """DuckDB over a job's committed output: `target` is its loaded config, or the output folder / s3:// prefix
    itself (with `s3_settings` for an endpoint other than AWS's). Each file's size is checked against its
    manifest, and with `verify` its content hash (`OutputCorruptError` if one differs)."""
    if isinstance(target, LoadedConfig):
        output_uri, s3_settings = target.output_uri, target.s3_settings
    else:
        output_uri = target
    storage = storage_for(output_uri, s3_settings)
    files = committed_files(output_uri, storage, verify)
    con = duckdb.connect()
    if is_s3(output_uri):
        fs = storage.arrow_fs()
        for kind in KINDS:
            dataset = pads.dataset(
                [storage.arrow_path(f) for f in files[kind]], filesystem=fs, format="parquet",
                partitioning="hive", partition_base_dir=storage.arrow_path(join(output_uri, kind)),
            )
            con.register(f"_{kind}_dataset", dataset)
            con.execute(f"CREATE VIEW {kind} AS SELECT * FROM _{kind}_dataset")
    else:
        # `dt` from the partition folder below the output root only: hive partitioning would also turn a `k=v`
        # folder above it (…/currency=FAKE/out) into a column, overwriting a real one.
        below = len(output_uri.rstrip("/")) + 2
        for kind in KINDS:
            listed = ", ".join("'" + f.replace("'", "''") + "'" for f in files[kind])
            dated = any("/dt=" in f[below - 2:] for f in files[kind])
            dt = (f", TRY_CAST(regexp_extract(_source_file[{below}:], '(^|/)dt=([^/]+)/', 2) AS DATE) AS dt"
                  if dated else "")
            con.execute(f"CREATE VIEW {kind} AS SELECT * EXCLUDE (_source_file){dt} FROM read_parquet([{listed}], "
                        "hive_partitioning = false, union_by_name = true, filename = '_source_file')")
    return con


def run_query(target: LoadedConfig | str, sql: str, verify: bool = False) -> duckdb.DuckDBPyRelation | None:
    return connect(target, verify=verify).sql(sql)
