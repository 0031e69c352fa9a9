"""A row's own schema (`input.schema_column`): the value a row holds, resolved in one place.

The value is a key of `input.schema_table` or a JSON Schema as JSON text. The driver routes each distinct value to
a backend (`pipeline.routing`), each actor holds the row to it (`workers.extractor`), and `extract eval` compares
the row's fields under it (`pipeline.tools.evaluate`): all three read the value here, so they agree on which
schema a row has and on which values name none.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from schemas.contract import SchemaContract
from schemas.limits import SchemaLimits


class RowSchemaError(ValueError):
    """A row's schema value names no usable schema; the message says why (the actor dead-letters the row as
    `schema_invalid`, routing leaves the value out)."""


def row_schema(value: str, table: Mapping[str, Any], column: str | None = None) -> tuple[str, Any]:
    """Where the schema `value` names comes from and the schema itself, unchecked: (`schema_table[KEY]`, the
    table's entry) or (the column, the parsed JSON text). `RowSchemaError` when the value is blank, not valid
    JSON, or neither JSON text nor a key of the table. JSON nested deeper than the decoder's own stack raises
    `RecursionError`: the caller decides what that row becomes."""
    if not value.strip():
        raise RowSchemaError(f"{column}: the row has no schema")
    if value in table:
        return f"schema_table[{value}]", table[value]
    if not value.lstrip().startswith("{"):
        raise RowSchemaError(f"{column}: {value[:80]!r} is neither a JSON Schema nor a key of input.schema_table")
    source = column or "schema"
    try:
        return source, json.loads(value)
    except json.JSONDecodeError as exc:
        raise RowSchemaError(f"{source}: not valid JSON: {exc.msg} at char {exc.pos}") from None


def row_contract(value: str, table: Mapping[str, Any], limits: SchemaLimits | None,
                 column: str | None = None) -> SchemaContract:
    """The contract of the schema `value` names, checked against the metaschema and `limits`
    (`SchemaContract.from_dict`); `RowSchemaError` when there is none or it fails a check."""
    source, schema = row_schema(value, table, column)
    try:
        return SchemaContract.from_dict(schema, source=source, limits=limits)
    except ValueError as exc:
        raise RowSchemaError(f"{source}: {exc}") from None
