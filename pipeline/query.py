"""`extract query`: DuckDB with views `rows` and `dead_letters` over every committed partition.

Only partitions with a `_SUCCESS` marker are read, and only the files their manifests name, so a
partition being written or replaced is never half-read. Local output is read by DuckDB directly; S3
output goes through pyarrow datasets, so no DuckDB extension needs downloading.
"""

from __future__ import annotations

import json

import duckdb
import pyarrow.dataset as pads

from pipeline.config import LoadedConfig
from pipeline.partition import OutputLayout
from pipeline.storage import Storage, is_s3, join, storage_for

KINDS = ("rows", "dead_letters")


class NothingCommittedError(LookupError):
    """The output has no committed partition to query."""


def committed_files(loaded: LoadedConfig, storage: Storage) -> dict[str, list[str]]:
    layout = OutputLayout(loaded.output_uri)
    files: dict[str, list[str]] = {kind: [] for kind in KINDS}
    for marker in storage.list_files(layout.partitions_root()):
        if not marker.endswith("/_SUCCESS"):
            continue
        manifest = json.loads(storage.read_text(marker[: -len("_SUCCESS")] + "manifest.json"))
        for kind in KINDS:
            files[kind].append(manifest["files"][kind])
    if not files["rows"]:
        raise NothingCommittedError(f"no committed partition under {loaded.output_uri}")
    return files


def connect(loaded: LoadedConfig) -> duckdb.DuckDBPyConnection:
    storage = storage_for(loaded.output_uri, loaded.s3_settings)
    files = committed_files(loaded, storage)
    con = duckdb.connect()
    if is_s3(loaded.output_uri):
        fs = storage.arrow_fs()
        for kind in KINDS:
            dataset = pads.dataset(
                [storage.arrow_path(f) for f in files[kind]], filesystem=fs, format="parquet",
                partitioning="hive", partition_base_dir=storage.arrow_path(join(loaded.output_uri, kind)),
            )
            con.register(f"_{kind}_dataset", dataset)
            con.execute(f"CREATE VIEW {kind} AS SELECT * FROM _{kind}_dataset")
    else:
        for kind in KINDS:
            listed = ", ".join("'" + f.replace("'", "''") + "'" for f in files[kind])
            con.execute(f"CREATE VIEW {kind} AS SELECT * FROM read_parquet([{listed}], hive_partitioning = true, "
                        "union_by_name = true)")
    return con


def run_query(loaded: LoadedConfig, sql: str) -> duckdb.DuckDBPyRelation | None:
    return connect(loaded).sql(sql)
