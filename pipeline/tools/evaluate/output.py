"""A run's committed output, as scoring reads it: rows as records, dead letters' reasons, per-row schemas and
the rows' confidences, from the partitions the run committed."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from pipeline.config import LoadedConfig
from pipeline.output.committed import CommittedOutput
from pipeline.output.manifest import PartitionManifest
from pipeline.output.tables import read_columns
from pipeline.storage import storage_for
from pipeline.tools.evaluate.options import EvalError, EvalOptions
from pipeline.tools.evaluate.schema_view import SchemaView
from pipeline.tools.evaluate.scores import Scores, score
from schemas.contract import RECORD_COLUMN
from schemas.row_schema import RowSchemaError, row_schema
from workers.outcome import DEAD_LETTERS, ROWS, DeadCol, RowCol


@dataclass
class RunOutput:
    run_ids: list[str]  # the runs that committed the scored partitions
    partitions: list[PartitionManifest]  # their manifests
    rows: dict[str, dict[str, Any]]
    dead_letters: dict[str, str]
    schemas: dict[str, dict[str, Any]]  # per-row-schema jobs: each document's schema
    confidence: dict[str, dict[str, float]] | None = None  # rows' `_confidence`, where the files have the column


def _json_records(loaded: LoadedConfig, table: pa.Table, fields: list[str]) -> bool:
    """Whether rows hold the record as JSON text (a per-row-schema job) rather than typed columns."""
    if loaded.contract.per_row:
        return True
    declared = SchemaView(loaded.contract.json_schema).declared(loaded.contract.json_schema) or set()
    return fields == [RECORD_COLUMN] and pa.types.is_string(table.schema.field(RECORD_COLUMN).type) \
        and RECORD_COLUMN not in declared


def rows_to_records(loaded: LoadedConfig, table: pa.Table) -> dict[str, dict[str, Any]]:
    id_column = loaded.config.input.id_column
    fields = [n for n in table.column_names if n != id_column and not n.startswith("_")]
    as_json = _json_records(loaded, table, fields)
    records: dict[str, dict[str, Any]] = {}
    for row in table.to_pylist():
        records[str(row[id_column])] = json.loads(row[RECORD_COLUMN]) if as_json else {f: row[f] for f in fields}
    return records


def schema_value(loaded: LoadedConfig, value: Any) -> dict[str, Any] | None:
    """The schema a row's `input.schema_column` value names (`schemas.row_schema`, as the run resolved it), or
    None where it names none (the run dead-lettered that row)."""
    if not isinstance(value, str):
        return None
    try:
        _, schema = row_schema(value, loaded.schema_table)
    except RowSchemaError:
        return None
    return schema if isinstance(schema, dict) else None


def per_row_schemas(loaded: LoadedConfig, partitions: list[PartitionManifest]) -> dict[str, dict]:
    """Each document's schema, read from the scored partitions' input files (`input.schema_column`)."""
    column = loaded.config.input.schema_column
    if column is None:
        return {}
    id_column = loaded.config.input.id_column
    in_storage = storage_for(loaded.input_uri, loaded.s3_settings)
    schemas: dict[str, dict[str, Any]] = {}
    for manifest in partitions:
        for uri in manifest.input_files:
            table = read_columns(in_storage, uri, [id_column, column])
            for doc_id, value in zip(table.column(id_column).to_pylist(), table.column(column).to_pylist(),
                                     strict=True):
                schema = schema_value(loaded, value)
                if schema is not None:
                    schemas[str(doc_id)] = schema
    return schemas


def read_output(loaded: LoadedConfig, output: CommittedOutput, manifests: list[PartitionManifest]) -> RunOutput:
    """Rows, dead letters, per-row schemas and confidences of `manifests`' partitions, from the files each names."""
    id_column = loaded.config.input.id_column
    rows: dict[str, dict[str, Any]] = {}
    dead: dict[str, str] = {}
    confidence: dict[str, dict[str, float]] | None = None
    for manifest in manifests:
        table = read_columns(output.storage, manifest.uri(ROWS, output.root))
        rows.update(rows_to_records(loaded, table))
        if RowCol.CONFIDENCE in table.column_names:
            confidence = confidence if confidence is not None else {}
            for doc_id, leaves in zip(table.column(id_column).to_pylist(), table.column(RowCol.CONFIDENCE).to_pylist(),
                                      strict=True):
                if leaves:
                    confidence[str(doc_id)] = dict(leaves)
        letters = read_columns(output.storage, manifest.uri(DEAD_LETTERS, output.root), [id_column, DeadCol.REASON])
        for doc_id, reason in zip(letters.column(id_column).to_pylist(), letters.column(DeadCol.REASON).to_pylist(),
                                  strict=True):
            dead[str(doc_id)] = reason
    return RunOutput(run_ids=sorted({m.run_id for m in manifests}), partitions=manifests, rows=rows,
                     dead_letters=dead, schemas=per_row_schemas(loaded, manifests), confidence=confidence)


def output_of_run(loaded: LoadedConfig, run_ids: str | list[str]) -> RunOutput:
    """The committed partitions whose manifest names one of `run_ids` (`extract eval --run ID [--run ID2]`).

    Several runs are scored together when each committed some of the partitions, e.g. one day each.
    """
    output = CommittedOutput.of(loaded)
    committed = output.partitions()
    manifests: list[PartitionManifest] = []
    for run_id in [run_ids] if isinstance(run_ids, str) else run_ids:
        mine = [m for m in committed if m.run_id == run_id]
        if not mine:
            if output.storage.exists(output.layout.run_manifest(run_id)):
                raise EvalError(f"--run {run_id}: no committed partition under {loaded.output_uri} is from this "
                                "run (it committed nothing, or a later run replaced its partitions)")
            raise EvalError(f"--run {run_id}: no such run under {loaded.output_uri} "
                            f"(see {loaded.output_uri}/_runs/)")
        manifests += [m for m in mine if m not in manifests]
    return read_output(loaded, output, manifests)


def output_of_labels(loaded: LoadedConfig, labels: set[str], run_id: str) -> RunOutput:
    """The committed partitions a fresh run committed or skipped; a skipped one must match this config."""
    output = CommittedOutput.of(loaded)
    manifests = [m for m in output.partitions() if m.partition in labels]
    for m in manifests:
        if m.run_id != run_id and m.output_hash != loaded.output_hash:
            raise EvalError(
                f"partition {m.partition} of {loaded.output_uri} was committed by run {m.run_id} under "
                "another model, prompt or schema, so this run skipped it: pass --force, or --output to a new folder"
            )
    if not manifests:
        raise EvalError(f"run {run_id} committed no partition under {loaded.output_uri}")
    return read_output(loaded, output, manifests)


def evaluate(loaded: LoadedConfig, golds: dict[str, dict[str, Any]], output: RunOutput,
             options: EvalOptions, spans: dict[str, dict[str, Any]] | None = None,
             documents: dict[str, str] | None = None) -> Scores:
    """Score the run's rows against `golds`; `spans` (id → the row's `_spans`) and `documents` (id → its text) feed
    the calibration's leaf model."""
    default = loaded.contract.json_schema if not loaded.contract.per_row else None
    return score(golds, output.rows, output.dead_letters, lambda doc_id: output.schemas.get(doc_id, default),
                 options, output.confidence, spans, documents)
