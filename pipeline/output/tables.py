"""Outcome batches → typed row tables and dead-letter tables, with lineage columns; and the one reader of a
committed table file (`read_columns`)."""

from __future__ import annotations

import json
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from pipeline.storage import Storage
from schemas.contract import SchemaContract
from workers.confidence import CONFIDENCE_TYPE, SPANS_TYPE, minimum

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
    "schema_hash",
    "failed_at",
    "attempts",
)
ROW_LINEAGE_COLUMNS = ("_run_id", "_schema_name", "_schema_version", "_schema_hash", "_model", "_extracted_at",
                       "_prompt_tokens", "_output_tokens", "_confidence", "_min_confidence", "_spans")



def row_schema(contract: SchemaContract, id_field: pa.Field) -> pa.Schema:
    lineage = [
        pa.field("_run_id", pa.string(), nullable=False),
        pa.field("_schema_name", pa.string(), nullable=False),
        pa.field("_schema_version", pa.string(), nullable=False),
        pa.field("_schema_hash", pa.string(), nullable=False),
        pa.field("_model", pa.string(), nullable=False),
        pa.field("_extracted_at", pa.timestamp("us", tz="UTC"), nullable=False),
        pa.field("_prompt_tokens", pa.int64()),
        pa.field("_output_tokens", pa.int64()),
        pa.field("_confidence", CONFIDENCE_TYPE),  # null where the run asked for none (output.confidence: false)
        pa.field("_min_confidence", pa.float64()),  # the row's least confident leaf
        pa.field("_spans", SPANS_TYPE),
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
            pa.field("schema_hash", pa.string()),
            pa.field("failed_at", pa.timestamp("us", tz="UTC"), nullable=False),
            pa.field("attempts", pa.int64(), nullable=False),  # 1, raised by each `extract retry`
        ]
    )


class RecordTables:
    """Splits an outcome table from the actors into (typed rows, dead letters) for one run."""

    def __init__(self, contract: SchemaContract, id_field: pa.Field, run_id: str, model_name: str) -> None:
        self.contract = contract
        self.id_column = id_field.name
        self.run_id = run_id
        self.model_name = model_name
        self.rows_schema = row_schema(contract, id_field)
        self.dead_schema = dead_letter_schema(id_field)

    def split(self, outcomes: pa.Table) -> tuple[pa.Table, pa.Table]:
        is_row = pc.equal(outcomes.column("_kind"), "row")
        return self.typed_rows(outcomes.filter(is_row)), self.dead_letters(outcomes.filter(pc.invert(is_row)))

    def _constant(self, value: str, n: int) -> pa.Array:
        return pa.array([value] * n, pa.string())

    def _schema_hashes(self, outcomes: pa.Table) -> pa.Array:
        """Each outcome's schema hash: its own in a per-row-schema job, else the job's."""
        if "_schema_hash" in outcomes.column_names and self.contract.per_row:
            return outcomes.column("_schema_hash")
        return self._constant(self.contract.hash, outcomes.num_rows)

    def typed_rows(self, rows: pa.Table) -> pa.Table:
        records: list[dict[str, Any]] = [json.loads(r) for r in rows.column("_record").to_pylist()]
        n = rows.num_rows
        columns: dict[str, Any] = {self.id_column: rows.column(self.id_column)}
        columns.update(self.contract.layout.to_columns(records))
        columns["_run_id"] = rows.column("_run_id") if "_run_id" in rows.column_names else self._constant(
            self.run_id, n)
        columns["_schema_name"] = self._constant(self.contract.name, n)
        columns["_schema_version"] = self._constant(self.contract.version, n)
        columns["_schema_hash"] = self._schema_hashes(rows)
        columns["_model"] = self._constant(self.model_name, n)
        columns["_extracted_at"] = rows.column("_extracted_at")
        columns["_prompt_tokens"] = rows.column("_prompt_tokens")
        columns["_output_tokens"] = rows.column("_output_tokens")
        confidence = rows.column("_confidence") if "_confidence" in rows.column_names else pa.nulls(n, CONFIDENCE_TYPE)
        columns["_confidence"] = confidence
        columns["_min_confidence"] = pa.array([minimum(dict(c or ())) for c in confidence.to_pylist()], pa.float64())
        columns["_spans"] = rows.column("_spans") if "_spans" in rows.column_names else pa.nulls(n, SPANS_TYPE)
        return pa.table(columns, schema=self.rows_schema)

    def dead_letters(self, dead: pa.Table) -> pa.Table:
        n = dead.num_rows
        columns = {
            self.id_column: dead.column(self.id_column),
            "reason": dead.column("_reason"),
            "error": dead.column("_error"),
            "raw_output": dead.column("_raw_output"),
            "finish_reason": dead.column("_finish_reason"),
            "prompt_tokens": dead.column("_prompt_tokens"),
            "output_tokens": dead.column("_output_tokens"),
            "run_id": dead.column("_run_id") if "_run_id" in dead.column_names else self._constant(self.run_id, n),
            "schema_name": self._constant(self.contract.name, n),
            "schema_version": self._constant(self.contract.version, n),
            "schema_hash": self._schema_hashes(dead),
            "failed_at": dead.column("_extracted_at"),
            "attempts": pa.array([1] * n, pa.int64()),
        }
        return pa.table(columns, schema=self.dead_schema)


def column_names(storage: Storage, uri: str) -> list[str]:
    """The columns of one committed table file, in file order (the first is the input's id column)."""
    with storage.arrow_fs().open_input_file(storage.arrow_path(uri)) as handle:
        return pq.ParquetFile(handle).schema_arrow.names


def read_columns(storage: Storage, uri: str, columns: list[str] | None = None) -> pa.Table:
    """One committed table file (a file a manifest names), with those of `columns` it has, in that order (None:
    all). Only that file is read: no Hive partition column is derived from its folder."""
    with storage.arrow_fs().open_input_file(storage.arrow_path(uri)) as handle:
        parquet = pq.ParquetFile(handle)
        names = parquet.schema_arrow.names
        return parquet.read(columns=None if columns is None else [c for c in columns if c in names])
