"""The output side: typed row Parquet and dead-letter Parquet, staged per run and committed at the end.

Layout under OUTPUT:
    rows/part-NNNNN.parquet          typed columns from the schema + `_`-prefixed lineage
    dead_letters/part-NNNNN.parquet  reason, error JSON, raw output, token counts, lineage
    _runs/<run_id>.json              the run manifest
    _staging/<run_id>/               where a run writes before it commits (never read as output)

A successful run replaces `rows/` and `dead_letters/` as a whole, so rerunning a job never duplicates
a document id.
"""

from __future__ import annotations

import json
import os
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from schemas.contract import SchemaContract

ROWS = "rows"
DEAD_LETTERS = "dead_letters"
MAX_ROWS_PER_FILE = 250_000

DEAD_LETTER_COLUMNS = (
    "reason",
    "error",
    "raw_output",
    "finish_reason",
    "prompt_tokens",
    "output_tokens",
    "run_id",
    "schema_name",
    "schema_version",
    "failed_at",
)
ROW_LINEAGE_COLUMNS = ("_run_id", "_schema_name", "_schema_version", "_schema_hash", "_model", "_extracted_at")


def row_schema(contract: SchemaContract, id_field: pa.Field) -> pa.Schema:
    lineage = [
        pa.field("_run_id", pa.string(), nullable=False),
        pa.field("_schema_name", pa.string(), nullable=False),
        pa.field("_schema_version", pa.string(), nullable=False),
        pa.field("_schema_hash", pa.string(), nullable=False),
        pa.field("_model", pa.string(), nullable=False),
        pa.field("_extracted_at", pa.timestamp("us", tz="UTC"), nullable=False),
    ]
    return pa.schema([id_field, *contract.layout.schema, *lineage])


def dead_letter_schema(id_field: pa.Field) -> pa.Schema:
    return pa.schema(
        [
            id_field,
            pa.field("reason", pa.string(), nullable=False),
            pa.field("error", pa.string()),
            pa.field("raw_output", pa.string()),
            pa.field("finish_reason", pa.string()),
            pa.field("prompt_tokens", pa.int64()),
            pa.field("output_tokens", pa.int64()),
            pa.field("run_id", pa.string(), nullable=False),
            pa.field("schema_name", pa.string(), nullable=False),
            pa.field("schema_version", pa.string(), nullable=False),
            pa.field("failed_at", pa.timestamp("us", tz="UTC"), nullable=False),
        ]
    )


class _RollingParquet:
    """Parquet part files in one folder, a new file every MAX_ROWS_PER_FILE rows."""

    def __init__(self, folder: Path, schema: pa.Schema) -> None:
        self.folder = folder
        self.schema = schema
        self.folder.mkdir(parents=True, exist_ok=True)
        self._writer: pq.ParquetWriter | None = None
        self._rows_in_file = 0
        self._files = 0

    def _open(self) -> pq.ParquetWriter:
        path = self.folder / f"part-{self._files:05d}.parquet"
        self._files += 1
        self._rows_in_file = 0
        return pq.ParquetWriter(path, self.schema, compression="zstd")

    def write(self, table: pa.Table) -> None:
        if table.num_rows == 0:
            return
        if self._writer is None or self._rows_in_file >= MAX_ROWS_PER_FILE:
            if self._writer is not None:
                self._writer.close()
            self._writer = self._open()
        self._writer.write_table(table)
        self._rows_in_file += table.num_rows

    def close(self) -> None:
        if self._writer is None:  # no rows: an empty file keeps the folder queryable, with its types
            self._writer = self._open()
        self._writer.close()


class OutputWriter:
    """Splits outcome batches from the actors into typed rows and dead letters, staged for one run."""

    def __init__(
        self, output_dir: str, run_id: str, contract: SchemaContract, id_field: pa.Field, model_name: str
    ) -> None:
        self.root = Path(output_dir)
        self.run_id = run_id
        self.contract = contract
        self.id_column = id_field.name
        self.model_name = model_name
        self.staging = self.root / "_staging" / run_id
        shutil.rmtree(self.staging, ignore_errors=True)
        self.rows_schema = row_schema(contract, id_field)
        self.dead_schema = dead_letter_schema(id_field)
        self._rows = _RollingParquet(self.staging / ROWS, self.rows_schema)
        self._dead = _RollingParquet(self.staging / DEAD_LETTERS, self.dead_schema)
        self.row_count = 0
        self.dead_letter_count = 0
        self.reasons: Counter[str] = Counter()
        self.prompt_tokens = 0
        self.output_tokens = 0

    def write(self, batch: pa.Table) -> None:
        is_row = pc.equal(batch.column("_kind"), "row")
        rows = batch.filter(is_row)
        dead = batch.filter(pc.invert(is_row))
        if rows.num_rows:
            self._rows.write(self._typed_rows(rows))
        if dead.num_rows:
            self._dead.write(self._dead_letters(dead))
        self.row_count += rows.num_rows
        self.dead_letter_count += dead.num_rows
        self.reasons.update(dead.column("_reason").to_pylist())
        self.prompt_tokens += pc.sum(batch.column("_prompt_tokens")).as_py() or 0
        self.output_tokens += pc.sum(batch.column("_output_tokens")).as_py() or 0

    def _typed_rows(self, rows: pa.Table) -> pa.Table:
        records: list[dict[str, Any]] = [json.loads(r) for r in rows.column("_record").to_pylist()]
        n = rows.num_rows
        columns: dict[str, Any] = {self.id_column: rows.column(self.id_column)}
        columns.update(self.contract.layout.to_columns(records))
        columns["_run_id"] = pa.array([self.run_id] * n, pa.string())
        columns["_schema_name"] = pa.array([self.contract.name] * n, pa.string())
        columns["_schema_version"] = pa.array([self.contract.version] * n, pa.string())
        columns["_schema_hash"] = pa.array([self.contract.hash] * n, pa.string())
        columns["_model"] = pa.array([self.model_name] * n, pa.string())
        columns["_extracted_at"] = rows.column("_extracted_at")
        return pa.table(columns, schema=self.rows_schema)

    def _dead_letters(self, dead: pa.Table) -> pa.Table:
        n = dead.num_rows
        columns = {
            self.id_column: dead.column(self.id_column),
            "reason": dead.column("_reason"),
            "error": dead.column("_error"),
            "raw_output": dead.column("_raw_output"),
            "finish_reason": dead.column("_finish_reason"),
            "prompt_tokens": dead.column("_prompt_tokens"),
            "output_tokens": dead.column("_output_tokens"),
            "run_id": pa.array([self.run_id] * n, pa.string()),
            "schema_name": pa.array([self.contract.name] * n, pa.string()),
            "schema_version": pa.array([self.contract.version] * n, pa.string()),
            "failed_at": dead.column("_extracted_at"),
        }
        return pa.table(columns, schema=self.dead_schema)

    def close(self) -> None:
        self._rows.close()
        self._dead.close()

    def commit(self) -> None:
        """Move the staged run into place, replacing what a previous run committed."""
        self.close()
        trash = self.root / "_staging" / f"{self.run_id}.replaced"
        trash.mkdir(parents=True, exist_ok=True)
        for kind in (ROWS, DEAD_LETTERS):
            final = self.root / kind
            if final.exists():
                os.replace(final, trash / kind)
            os.replace(self.staging / kind, final)
        shutil.rmtree(trash, ignore_errors=True)
        shutil.rmtree(self.staging, ignore_errors=True)
        staging_root = self.root / "_staging"
        if staging_root.exists() and not any(staging_root.iterdir()):
            staging_root.rmdir()

    def abort(self) -> None:
        try:
            self._rows.close()
            self._dead.close()
        finally:
            shutil.rmtree(self.staging, ignore_errors=True)
