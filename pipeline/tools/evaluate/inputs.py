"""The job's input documents that have gold: their ids, texts and per-row schema values, read from the input as
a run reads it (for grounding's reach, `extract validate --gold` and `extract tune`, which need no run)."""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from pipeline.config import ConfigError, LoadedConfig


def read_documents(loaded: LoadedConfig, ids: set[str], limit: int | None) -> tuple[list[str], list[str | None],
                                                                                    list[Any] | None]:
    """The job's documents whose ids have gold (at most `limit`, in input order): ids, texts, schema values."""
    from pipeline.reader import read_tasks, read_units
    from pipeline.run import preflight
    from pipeline.storage import storage_for

    plan = preflight(loaded)
    source = loaded.config.input
    storage = storage_for(plan.partition.input_uri, loaded.s3_settings)
    tasks = pa.Table.from_pylist(read_tasks(plan.units))
    table = read_units(tasks, storage, plan.schema.field(source.id_column), source.text_column,
                       source.schema_column)
    rows = [r for r in table.to_pylist() if str(r[source.id_column]) in ids][:limit]
    if not rows:
        raise ConfigError(f"{loaded.path}: no document of the input has an id in the gold file")
    schemas = [r[source.schema_column] for r in rows] if source.schema_column else None
    return [str(r[source.id_column]) for r in rows], [r[source.text_column] for r in rows], schemas


def gold_documents(loaded: LoadedConfig, ids: set[str], limit: int | None = None) -> tuple[dict[str, str],
                                                                                         dict[str, dict[str, Any]]]:
    """The texts (id → text) of the documents with gold, and their schemas where the job has per-row schemas."""
    from pipeline.tools.evaluate.output import schema_value

    found, texts, values = read_documents(loaded, ids, limit)
    documents = {i: t for i, t in zip(found, texts, strict=True) if isinstance(t, str)}
    if values is None:
        return documents, {}
    schemas = {i: schema_value(loaded, v) for i, v in zip(found, values, strict=True)}
    return documents, {i: s for i, s in schemas.items() if s is not None}
