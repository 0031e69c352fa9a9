"""Gold records by document id, from JSONL or Parquet."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from pipeline.tools.evaluate.options import EvalError
from schemas.contract import RECORD_COLUMN


def _gold_record(obj: dict[str, Any], id_column: str, where: str) -> tuple[str, dict[str, Any]]:
    """One gold entry: `{id, "record": {...}}` (or the record as JSON text), or `{id, field: value, ...}`."""
    if id_column not in obj:
        raise EvalError(f"{where}: no {id_column!r} key (the job's input.id_column)")
    doc_id = str(obj[id_column])
    if set(obj) == {id_column, RECORD_COLUMN}:
        record = obj[RECORD_COLUMN]
        if isinstance(record, str):
            try:
                record = json.loads(record)
            except json.JSONDecodeError as exc:
                raise EvalError(f"{where}: 'record' is not JSON: {exc.msg}") from None
        if not isinstance(record, dict):
            raise EvalError(f"{where}: 'record' must be an object, got {type(record).__name__}")
        return doc_id, record
    return doc_id, {k: v for k, v in obj.items() if k != id_column}


def load_gold(path: str | Path, id_column: str) -> dict[str, dict[str, Any]]:
    """Gold records by document id (as text) from JSONL (one object per line) or Parquet (one row each)."""
    path = Path(path)
    if not path.exists():
        raise EvalError(f"--gold {path}: no such file")
    entries: list[tuple[str, dict[str, Any]]] = []
    if path.suffix == ".parquet":
        try:
            table = pq.read_table(path)
        except (OSError, pa.ArrowInvalid) as exc:
            raise EvalError(f"--gold {path}: not readable Parquet: {exc}") from None
        for n, obj in enumerate(table.to_pylist(), 1):
            entries.append(_gold_record(obj, id_column, f"--gold {path} row {n}"))
    else:
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                raise EvalError(f"--gold {path} line {n}: not JSON: {exc.msg}") from None
            if not isinstance(obj, dict):
                raise EvalError(f"--gold {path} line {n}: expected an object, got {type(obj).__name__}")
            entries.append(_gold_record(obj, id_column, f"--gold {path} line {n}"))
    golds: dict[str, dict[str, Any]] = {}
    for doc_id, record in entries:
        if doc_id in golds:
            raise EvalError(f"--gold {path}: document id {doc_id!r} appears twice")
        golds[doc_id] = record
    if not golds:
        raise EvalError(f"--gold {path}: holds no records")
    return golds
