"""`CommittedOutput`: a job's committed output as one object, the way delta-rs has one `DeltaTable`.

Every reader of an output goes through it: its committed partitions (`partitions`, one manifest each, the files it
names size-checked), one partition's manifest (`manifest`), the run records (`runs`), a table's committed rows
(`read`), and DuckDB views over both tables (`duckdb`). Nothing here lists data files: only the files a manifest
names are read, so a partition being written, replaced or swept is never half-read (`pipeline.output.manifest`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pyarrow as pa

from pipeline.output.layout import KINDS, OutputLayout
from pipeline.output.links import refuse_links
from pipeline.output.manifest import ManifestError, PartitionManifest, RunManifest, committed, read_manifest
from pipeline.output.tables import read_columns
from pipeline.partition import Partition
from pipeline.storage import S3Settings, Storage, is_s3, join, storage_for

if TYPE_CHECKING:
    import duckdb

    from pipeline.config import LoadedConfig


class NothingCommittedError(LookupError):
    """The output has no committed partition to query."""


class CommittedOutput:
    """The committed output under `root` (a folder or an s3:// prefix)."""

    def __init__(self, root: str, storage: Storage | None = None, s3_settings: S3Settings | None = None) -> None:
        self.root = root
        self.storage = storage or storage_for(root, s3_settings)
        self.layout = OutputLayout(root)

    @classmethod
    def of(cls, loaded: LoadedConfig) -> CommittedOutput:
        """The output a loaded config names, with its storage settings."""
        return cls(loaded.output_uri, s3_settings=loaded.s3_settings)

    def partitions(self, verify: bool = False) -> list[PartitionManifest]:
        """Every committed partition's manifest, by label; each named file's size (with `verify`, hash) checked."""
        return committed(self.storage, self.root, verify=verify)

    def manifest(self, p: Partition, check: bool = True) -> PartitionManifest | None:
        """One partition's manifest, or None if it was never committed."""
        return read_manifest(self.storage, self.layout, p, check=check)

    def runs(self, skip_unreadable: bool = False) -> list[RunManifest]:
        """Every run record (runs and retries), oldest first (by start time, then run id). A file of `_runs/` that is
        not a run record raises `ManifestError`; with `skip_unreadable` it is left out instead, as the record a live
        run is still writing is (the report reads an output beside the jobs writing it)."""
        records = []
        refuse_links(self.root, self.layout.runs_root(), write=False)
        for path in self.storage.list_files(self.layout.runs_root()):
            if not path.endswith(".json"):
                continue
            refuse_links(self.root, path, write=False)
            try:
                records.append(RunManifest.from_json(self.storage.read_text(path), path))
            except ManifestError:
                if not skip_unreadable:
                    raise
        return sorted(records, key=lambda r: (str(r.started_at), str(r.run_id)))

    def has_writer(self) -> bool:
        """Whether a writer ever held the output (its lease record is there)."""
        return self.storage.exists(self.layout.lease())

    def files(self, kind: str, verify: bool = False) -> list[str]:
        """The committed files of one table (`rows` or `dead_letters`), by partition."""
        return [m.uri(kind, self.root) for m in self.partitions(verify)]

    def read(self, kind: str, columns: list[str] | None = None) -> pa.Table | None:
        """One table's committed rows over every partition (those of `columns` each file has; None: all), or None
        when nothing is committed. Files of different commits may differ in columns: missing ones are nulls."""
        tables = [read_columns(self.storage, uri, columns) for uri in self.files(kind)]
        return pa.concat_tables(tables, promote_options="default") if tables else None

    def duckdb(self, verify: bool = False) -> duckdb.DuckDBPyConnection:
        """DuckDB with views `rows` and `dead_letters` over every committed partition (`NothingCommittedError` when
        there is none). Local output is read by DuckDB directly, with `dt` from the partition folder below the
        root; S3 output goes through pyarrow datasets, so no DuckDB extension needs downloading."""
        import duckdb

        manifests = self.partitions(verify)
        if not manifests:
            raise NothingCommittedError(f"no committed partition under {self.root}")
        files = {kind: [m.uri(kind, self.root) for m in manifests] for kind in KINDS}
        con = duckdb.connect()
        if is_s3(self.root):
            self._s3_views(con, files)
        else:
            self._local_views(con, files)
        return con

    def _s3_views(self, con: duckdb.DuckDBPyConnection, files: dict[str, list[str]]) -> None:
        import pyarrow.dataset as pads

        fs = self.storage.arrow_fs()
        for kind in KINDS:
            dataset = pads.dataset(
                [self.storage.arrow_path(f) for f in files[kind]], filesystem=fs, format="parquet",
                partitioning="hive", partition_base_dir=self.storage.arrow_path(join(self.root, kind)),
            )
            con.register(f"_{kind}_dataset", dataset)
            con.execute(f"CREATE VIEW {kind} AS SELECT * FROM _{kind}_dataset")

    def _local_views(self, con: duckdb.DuckDBPyConnection, files: dict[str, list[str]]) -> None:
        # `dt` from the partition folder below the output root only: hive partitioning would also turn a `k=v`
        # folder above it (…/currency=FAKE/out) into a column, overwriting a real one.
        below = len(self.root.rstrip("/")) + 2
        for kind in KINDS:
            listed = ", ".join("'" + f.replace("'", "''") + "'" for f in files[kind])
            dated = any("/dt=" in f[below - 2:] for f in files[kind])
            dt = (f", TRY_CAST(regexp_extract(_source_file[{below}:], '(^|/)dt=([^/]+)/', 2) AS DATE) AS dt"
                  if dated else "")
            con.execute(f"CREATE VIEW {kind} AS SELECT * EXCLUDE (_source_file){dt} FROM read_parquet([{listed}], "
                        "hive_partitioning = false, union_by_name = true, filename = '_source_file')")
