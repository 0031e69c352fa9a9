"""Outcome batches → typed row tables and dead-letter tables, with lineage columns; and the one reader of a
committed table file (`read_columns`)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from pipeline.storage import Storage
from schemas.arrow import parse_records
from schemas.contract import SchemaContract
from workers.confidence import CONFIDENCE_TYPE, SPANS_TYPE, minimum
from workers.outcome import (
    DEAD_LETTER_COLUMNS,
    ROW_LINEAGE_COLUMNS,
    WINDOW_OF_TYPE,
    Col,
    DeadCol,
    Kind,
    RowCol,
    scatter,
    typed_type,
)

__all__ = ["DEAD_LETTER_COLUMNS", "ROW_LINEAGE_COLUMNS", "RecordTables", "column_names", "dead_letter_schema",
           "parse_records", "read_columns", "row_schema"]


def row_schema(contract: SchemaContract, id_field: pa.Field) -> pa.Schema:
    lineage = [
        pa.field(RowCol.RUN_ID, pa.string(), nullable=False),
        pa.field(RowCol.SCHEMA_NAME, pa.string(), nullable=False),
        pa.field(RowCol.SCHEMA_VERSION, pa.string(), nullable=False),
        pa.field(RowCol.SCHEMA_HASH, pa.string(), nullable=False),
        pa.field(RowCol.MODEL, pa.string(), nullable=False),
        pa.field(RowCol.EXTRACTED_AT, pa.timestamp("us", tz="UTC"), nullable=False),
        pa.field(RowCol.PROMPT_TOKENS, pa.int64()),
        pa.field(RowCol.OUTPUT_TOKENS, pa.int64()),
        pa.field(RowCol.CONFIDENCE, CONFIDENCE_TYPE),  # null where the run asked for none (output.confidence: false)
        pa.field(RowCol.MIN_CONFIDENCE, pa.float64()),  # the row's least confident leaf
        pa.field(RowCol.SPANS, SPANS_TYPE),
        pa.field(RowCol.WINDOWS, pa.int32()),  # windows the document was read in (1: whole)
        pa.field(RowCol.WINDOW_OF, WINDOW_OF_TYPE),  # a windowed row's leaves: path → window
    ]
    assert tuple(f.name for f in lineage) == ROW_LINEAGE_COLUMNS
    return pa.schema([id_field, *contract.layout.schema, *lineage])


def dead_letter_schema(id_field: pa.Field) -> pa.Schema:
    fields = [
        pa.field(DeadCol.REASON, pa.string(), nullable=False),
        pa.field(DeadCol.ERROR, pa.string()),
        pa.field(DeadCol.RAW_OUTPUT, pa.string()),
        pa.field(DeadCol.FINISH_REASON, pa.string()),
        pa.field(DeadCol.PROMPT_TOKENS, pa.int64()),
        pa.field(DeadCol.OUTPUT_TOKENS, pa.int64()),
        pa.field(DeadCol.RUN_ID, pa.string(), nullable=False),
        pa.field(DeadCol.SCHEMA_NAME, pa.string(), nullable=False),
        pa.field(DeadCol.SCHEMA_VERSION, pa.string(), nullable=False),
        pa.field(DeadCol.SCHEMA_HASH, pa.string()),
        pa.field(DeadCol.FAILED_AT, pa.timestamp("us", tz="UTC"), nullable=False),
        pa.field(DeadCol.ATTEMPTS, pa.int64(), nullable=False),  # 1, raised by each `extract retry`
    ]
    assert tuple(f.name for f in fields) == DEAD_LETTER_COLUMNS
    return pa.schema([id_field, *fields])


class RecordTables:
    """Splits an outcome table from the actors into (typed rows, dead letters) for one run."""

    def __init__(self, contract: SchemaContract, id_field: pa.Field, run_id: str, model_name: str) -> None:
        self.contract = contract
        self.id_column = id_field.name
        self.run_id = run_id
        self.model_name = model_name
        self.rows_schema = row_schema(contract, id_field)
        self.dead_schema = dead_letter_schema(id_field)

    def typed(self, staged: pa.Table) -> pa.Table:
        """Staged outcomes with their records typed (`Col.TYPED`) as the actors stage them: staging written before
        typed staging holds each record as JSON text (`Col.RECORD`), read here, once."""
        if Col.TYPED in staged.column_names or Col.RECORD not in staged.column_names:
            return staged
        is_row = pc.equal(staged.column(Col.KIND), Kind.ROW.value)
        kind = typed_type(self.contract.layout)
        columns = self.contract.layout.from_json(staged.column(Col.RECORD).filter(is_row))
        struct = pa.StructArray.from_arrays([columns[f.name] for f in kind], fields=list(kind))
        typed = scatter(struct, is_row.to_pylist())
        return staged.drop_columns([Col.RECORD]).append_column(pa.field(Col.TYPED, kind), typed)

    def split(self, outcomes: pa.Table) -> tuple[pa.Table, pa.Table]:
        outcomes = self.typed(outcomes)
        is_row = pc.equal(outcomes.column(Col.KIND), Kind.ROW.value)
        return self.typed_rows(outcomes.filter(is_row)), self.dead_letters(outcomes.filter(pc.invert(is_row)))

    def _constant(self, value: str, n: int) -> pa.Array:
        return pa.repeat(pa.scalar(value, pa.string()), n)

    def _schema_hashes(self, outcomes: pa.Table) -> pa.Array:
        """Each outcome's schema hash: its own in a per-row-schema job, else the job's."""
        if Col.SCHEMA_HASH in outcomes.column_names and self.contract.per_row:
            return outcomes.column(Col.SCHEMA_HASH)
        return self._constant(self.contract.hash, outcomes.num_rows)

    def _run_ids(self, outcomes: pa.Table) -> pa.Array | pa.ChunkedArray:
        """The run that made each outcome: the one that staged it, else this one."""
        if Col.RUN_ID in outcomes.column_names:
            return outcomes.column(Col.RUN_ID)
        return self._constant(self.run_id, outcomes.num_rows)

    def typed_rows(self, rows: pa.Table) -> pa.Table:
        n = rows.num_rows
        columns: dict[str, Any] = {self.id_column: rows.column(self.id_column)}
        typed = rows.column(Col.TYPED).combine_chunks()  # the actors typed each record (`workers.outcome`)
        columns.update(zip(typed.type.names, typed.flatten(), strict=True))
        confidence = rows.column(Col.CONFIDENCE) if Col.CONFIDENCE in rows.column_names else pa.nulls(
            n, CONFIDENCE_TYPE)
        columns.update({
            RowCol.RUN_ID: self._run_ids(rows),
            RowCol.SCHEMA_NAME: self._constant(self.contract.name, n),
            RowCol.SCHEMA_VERSION: self._constant(self.contract.version, n),
            RowCol.SCHEMA_HASH: self._schema_hashes(rows),
            RowCol.MODEL: self._constant(self.model_name, n),
            RowCol.EXTRACTED_AT: rows.column(Col.EXTRACTED_AT),
            RowCol.PROMPT_TOKENS: rows.column(Col.PROMPT_TOKENS),
            RowCol.OUTPUT_TOKENS: rows.column(Col.OUTPUT_TOKENS),
            RowCol.CONFIDENCE: confidence,
            RowCol.MIN_CONFIDENCE: _minimums(confidence),
            RowCol.SPANS: rows.column(Col.SPANS) if Col.SPANS in rows.column_names else pa.nulls(n, SPANS_TYPE),
            RowCol.WINDOWS: rows.column(Col.WINDOWS) if Col.WINDOWS in rows.column_names else pa.nulls(n, pa.int32()),
            RowCol.WINDOW_OF: rows.column(Col.WINDOW_OF) if Col.WINDOW_OF in rows.column_names else pa.nulls(
                n, WINDOW_OF_TYPE),
        })
        return pa.table(columns, schema=self.rows_schema)

    def dead_letters(self, dead: pa.Table) -> pa.Table:
        n = dead.num_rows
        columns = {
            self.id_column: dead.column(self.id_column),
            DeadCol.REASON: dead.column(Col.REASON),
            DeadCol.ERROR: dead.column(Col.ERROR),
            DeadCol.RAW_OUTPUT: dead.column(Col.RAW_OUTPUT),
            DeadCol.FINISH_REASON: dead.column(Col.FINISH_REASON),
            DeadCol.PROMPT_TOKENS: dead.column(Col.PROMPT_TOKENS),
            DeadCol.OUTPUT_TOKENS: dead.column(Col.OUTPUT_TOKENS),
            DeadCol.RUN_ID: self._run_ids(dead),
            DeadCol.SCHEMA_NAME: self._constant(self.contract.name, n),
            DeadCol.SCHEMA_VERSION: self._constant(self.contract.version, n),
            DeadCol.SCHEMA_HASH: self._schema_hashes(dead),
            DeadCol.FAILED_AT: dead.column(Col.EXTRACTED_AT),
            DeadCol.ATTEMPTS: pa.repeat(pa.scalar(1, pa.int64()), n),
        }
        return pa.table(columns, schema=self.dead_schema)


_ENTRY = pa.struct([pa.field("key", pa.string(), nullable=False), pa.field("value", pa.float64())])


def _minimums(confidence: pa.Array | pa.ChunkedArray) -> pa.Array:
    """Each row's least confident leaf (`workers.confidence.minimum`: null for a null or empty map), by Arrow and
    numpy, without a Python object per row (a dict a row was the commit's largest cost per document left with
    confidences on, the default). A NaN among the values goes through `minimum`, whose answer depends on order."""
    n = len(confidence)
    if confidence.null_count == n:
        return pa.nulls(n, pa.float64())
    maps = confidence.combine_chunks() if isinstance(confidence, pa.ChunkedArray) else confidence
    maps = maps.cast(pa.list_(_ENTRY))  # a map as a list of its entries: the list kernels take it
    values = pc.list_flatten(maps).field("value").to_numpy(zero_copy_only=False)
    if np.isnan(values).any():
        return pa.array([minimum(dict(c or ())) for c in confidence.to_pylist()], pa.float64())
    rows = pc.list_parent_indices(maps).to_numpy(zero_copy_only=False)
    least = np.full(n, np.inf)
    np.minimum.at(least, rows, values)
    has = np.zeros(n, bool)
    has[rows] = True
    return pa.array(least, pa.float64(), mask=~has)


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
