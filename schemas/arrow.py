"""JSON Schema → Arrow: the typed columns a record is written as.

One mapping serves both a Pydantic model (through its JSON Schema) and a user's JSON Schema file:
- objects with properties → structs; lists → lists;
- `format: date` → date32; `format: date-time` → timestamp[us, UTC];
- integers → int64, numbers → float64, booleans → bool;
- a Pydantic `Decimal` with `max_digits` and `decimal_places` → decimal128(max_digits, decimal_places) (38 digits
  at most, DuckDB's widest decimal: a longer value is a `type_overflow` dead letter; decimal_places alone: 38
  digits); a `Decimal` without a scale → float64, as JSON gives no fixed scale to store it at. (Pydantic's
  JSON Schema drops both settings, so the layout of a model's records is read from a JSON Schema of its own
  that keeps them, `DecimalMarks`; the grammar's schema is unchanged.)
- enums, consts and Literals of strings → string;
- a field that may be null or may be absent → nullable;
- anything without one clear type (free-form objects, unions of several types) → a JSON-encoded string.

Records arrive in JSON form (what `model_dump(mode="json")` or `json.loads` gives) and each field's
converter turns them into the Python value Arrow expects for its type. Each mapping also says whether Arrow
builds the column from the JSON-form values as its converter would (`ArrowMapping.build`: `PLAIN` or
`ISO_DATE`), so `RecordLayout.to_columns` builds those columns in one pass of Arrow over the records, not a
Python call per value.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, datetime, timezone
from decimal import Decimal
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj
from pydantic.json_schema import GenerateJsonSchema

from schemas.refs import graph_for

Converter = Callable[[Any], Any]

JSON_STRING_METADATA = {b"extract.encoding": b"json"}

# How Arrow builds a field's column from the records' JSON-form values as its converter would (`ArrowMapping.build`):
PLAIN = "plain"  # Arrow converts the values as the column's type takes them (a converter that returns them, or
#                  float() of the int, float or bool a number holds: any other value Arrow refuses, as below)
ISO_DATE = "iso_date"  # a YYYY-MM-DD text cast to date32 (any other text goes through the converter)


@dataclass(frozen=True)
class ArrowMapping:
    """An Arrow type plus the converter that turns a JSON-form value into a value of that type."""

    type: pa.DataType
    nullable: bool
    convert: Converter
    json_encoded: bool = False
    build: str | None = None  # `PLAIN` or `ISO_DATE`: Arrow builds the column as `convert` would; None: it does not


def _identity(value: Any) -> Any:
    return value


def _nullsafe(convert: Converter) -> Converter:
    def run(value: Any) -> Any:
        return None if value is None else convert(value)

    return run


def _to_date(value: Any) -> date:
    return date.fromisoformat(value) if isinstance(value, str) else value


def _to_timestamp(value: Any) -> datetime:
    parsed = datetime.fromisoformat(value) if isinstance(value, str) else value
    if parsed.tzinfo is None:
        return parsed.replace(tzinfo=timezone.utc)
    return parsed.astimezone(timezone.utc)


def _to_json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def _to_float(value: Any) -> float:
    return float(value)


def _to_decimal(value: Any) -> Decimal:
    return value if isinstance(value, Decimal) else Decimal(str(value))


DECIMAL_MARK = "x-decimal"  # [max_digits, decimal_places], on a layout-only JSON Schema (`DecimalMarks`)


class DecimalMarks(GenerateJsonSchema):
    """A Pydantic model's JSON Schema with each `Decimal` as {"x-decimal": [max_digits, decimal_places]}: for the
    Arrow layout only (Pydantic's own schema drops both, and the grammar keeps Pydantic's)."""

    def decimal_schema(self, schema: Any) -> dict[str, Any]:
        return {"type": "string", DECIMAL_MARK: [schema.get("max_digits"), schema.get("decimal_places")]}


def _decimal(mark: Any) -> ArrowMapping:
    digits, places = (list(mark) + [None, None])[:2] if isinstance(mark, list) else (None, None)
    if not isinstance(places, int) or places < 0:
        return _FLOAT
    if places > 38:
        return _FLOAT
    digits = min(max(digits if isinstance(digits, int) and digits > 0 else 38, places, 1), 38)
    return ArrowMapping(pa.decimal128(digits, places), False, _nullsafe(_to_decimal))


_JSON = ArrowMapping(pa.string(), True, _nullsafe(_to_json), json_encoded=True)
_FLOAT = ArrowMapping(pa.float64(), False, _nullsafe(_to_float), build=PLAIN)


class UnsupportedSchemaError(ValueError):
    """The JSON Schema cannot be laid out as columns (for example, a root that is not an object)."""


class _Mapper:
    def __init__(self, root: dict[str, Any]) -> None:
        self.root = root
        self.graph = graph_for(root)
        self._trail: frozenset[int] = frozenset()  # the references being expanded on the current path

    def resolve(self, node: dict[str, Any]) -> dict[str, Any]:
        """`node` with its references followed (`SchemaGraph.expand`); one that does not resolve is refused."""
        view = self.graph.expand(node, self._trail)
        if view.problem is not None:
            raise UnsupportedSchemaError(view.why)
        return view.node

    def map(self, schema: Any) -> ArrowMapping:
        if not isinstance(schema, dict):  # `true`, `false` or junk: no typed layout
            return _JSON
        if self.graph.refers(schema):
            view = self.graph.expand(schema, self._trail)
            if view.problem == "cycle":  # recursive structure: store the subtree as JSON
                return _JSON
            if view.problem is not None:
                raise UnsupportedSchemaError(view.why)
            outer, self._trail = self._trail, view.trail
            try:
                return self.map(view.node)
            finally:
                self._trail = outer
        for key in ("anyOf", "oneOf"):
            if key in schema:
                return self._union(schema[key])
        if DECIMAL_MARK in schema:
            return _decimal(schema[DECIMAL_MARK])
        if "allOf" in schema and len(schema["allOf"]) == 1:
            rest = {k: v for k, v in schema.items() if k != "allOf"}
            return self.map({**rest, **schema["allOf"][0]})
        if "const" in schema:
            return self._literals([schema["const"]])
        if "enum" in schema:
            return self._literals(list(schema["enum"]))
        kind = schema.get("type")
        if isinstance(kind, list):
            return self._union([{**schema, "type": k} for k in kind])
        return self._typed(kind, schema)

    def _union(self, options: list[Any]) -> ArrowMapping:
        non_null = [o for o in options if not (isinstance(o, dict) and o.get("type") == "null")]
        nullable = len(non_null) != len(options)
        if len(non_null) == 1:
            inner = self.map(non_null[0])
            return ArrowMapping(inner.type, inner.nullable or nullable, inner.convert, inner.json_encoded,
                                inner.build)
        mapped = [self.map(o) for o in non_null]
        if mapped and all(m.type == mapped[0].type and not m.json_encoded for m in mapped):
            return ArrowMapping(mapped[0].type, True, mapped[0].convert, build=mapped[0].build)
        if mapped and {m.type for m in mapped} <= {pa.int64(), pa.float64()}:
            return ArrowMapping(pa.float64(), True, _nullsafe(_to_float), build=PLAIN)
        return _JSON

    def _literals(self, values: list[Any]) -> ArrowMapping:
        non_null = [v for v in values if v is not None]
        nullable = len(non_null) != len(values)
        if non_null and all(isinstance(v, str) for v in non_null):
            return ArrowMapping(pa.string(), nullable, _identity, build=PLAIN)
        if non_null and all(isinstance(v, bool) for v in non_null):
            return ArrowMapping(pa.bool_(), nullable, _identity, build=PLAIN)
        if non_null and all(isinstance(v, int) and not isinstance(v, bool) for v in non_null):
            return ArrowMapping(pa.int64(), nullable, _identity, build=PLAIN)
        return _JSON

    def _typed(self, kind: Any, schema: dict[str, Any]) -> ArrowMapping:
        if kind == "string":
            fmt = schema.get("format")
            if fmt == "date":
                return ArrowMapping(pa.date32(), False, _nullsafe(_to_date), build=ISO_DATE)
            if fmt == "date-time":
                return ArrowMapping(pa.timestamp("us", tz="UTC"), False, _nullsafe(_to_timestamp))
            return ArrowMapping(pa.string(), False, _identity, build=PLAIN)
        if kind == "integer":
            return ArrowMapping(pa.int64(), False, _identity, build=PLAIN)
        if kind == "number":
            return _FLOAT
        if kind == "boolean":
            return ArrowMapping(pa.bool_(), False, _identity, build=PLAIN)
        if kind == "null":
            return ArrowMapping(pa.null(), True, _identity, build=PLAIN)
        if kind == "array" or (kind is None and "items" in schema):
            return self._array(schema)
        if kind == "object" or (kind is None and "properties" in schema):
            return self._object(schema)
        return _JSON

    def _array(self, schema: dict[str, Any]) -> ArrowMapping:
        items = schema.get("items")
        item = self.map(items) if isinstance(items, dict) else _JSON
        item_field = pa.field("item", item.type, nullable=True)
        convert_item = item.convert

        def convert(value: Any) -> Any:
            return None if value is None else [convert_item(v) for v in value]

        return ArrowMapping(pa.list_(item_field), False, convert)

    def _object(self, schema: dict[str, Any]) -> ArrowMapping:
        properties = schema.get("properties")
        if not properties:
            return _JSON
        fields, converters, _ = self.fields(schema)
        struct = pa.struct(fields)

        def convert(value: Any) -> Any:
            if value is None:
                return None
            return {name: conv(value.get(name)) for name, conv in converters}

        return ArrowMapping(struct, False, convert)

    def fields(self, schema: dict[str, Any]) -> tuple[list[pa.Field], list[tuple[str, Converter]], list[str | None]]:
        """The object's fields, each one's converter, and how Arrow builds each (`ArrowMapping.build`)."""
        required = set(schema.get("required", []))
        fields: list[pa.Field] = []
        converters: list[tuple[str, Converter]] = []
        builds: list[str | None] = []
        for name, sub in schema.get("properties", {}).items():
            mapped = self.map(sub)
            nullable = mapped.nullable or name not in required
            metadata = JSON_STRING_METADATA if mapped.json_encoded else None
            fields.append(pa.field(name, mapped.type, nullable=nullable, metadata=metadata))
            converters.append((name, mapped.convert))
            builds.append(mapped.build)
        return fields, converters, builds


_ISO_DATE_TEXT = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$"


def parse_records(texts: list[str | None]) -> list[Any]:
    """Each row's record from its JSON text, as `json.loads` of each would give: one parse of the texts joined
    as a JSON array (the per-call cost of `json.loads` was half the commit's CPU). The texts are the actors'
    `json.dumps` of each record; if the join does not parse, or parses into another count, each text is parsed
    alone, raising as `json.loads` does."""
    if not texts or None in texts:
        return [json.loads(t) for t in texts]  # type: ignore[arg-type]
    try:
        records = json.loads("[" + ",".join(texts) + "]")
    except ValueError:
        records = None
    if not isinstance(records, list) or len(records) != len(texts):
        return [json.loads(t) for t in texts]
    return records


# Words Arrow's JSON reader takes and `json.loads` does not (RapidJSON reads -NaN, Inf and -Inf too): texts holding
# one go through Python (whose NaN, Infinity and -Infinity are rare enough to go with them).
_NOT_FOR_ARROW = (b"NaN", b"Inf")


@dataclass(frozen=True)
class RecordLayout:
    """The Arrow schema of a record's columns, the converter of each from JSON-form records, and how Arrow builds
    each column as its converter would (`ArrowMapping.build`; empty: none)."""

    schema: pa.Schema
    converters: tuple[tuple[str, Converter], ...]
    builds: tuple[str | None, ...] = ()

    def to_columns(self, records: list[dict[str, Any]]) -> dict[str, pa.Array]:
        """Typed columns for JSON-form records, in schema order: `convert_rows`, its `PLAIN` and `ISO_DATE` fields
        built by Arrow in one pass over the records (a struct array, whose children Arrow converts as it converts
        a column; a date's text cast when every one is YYYY-MM-DD), the others by their converters, row by row.
        A value Arrow will not take sends the records to `convert_rows`, which raises as before. A Python call
        per value was a third of the driver's commit CPU."""
        builds = self._builds_by_name()
        fast = [_read_field(f, builds[f.name]) for f in self.schema if builds.get(f.name)]
        if not fast:
            return self.convert_rows(records)
        try:
            struct = pa.array(records, type=pa.struct(fast))
        except (pa.ArrowException, TypeError, ValueError, OverflowError):
            return self.convert_rows(records)  # a value a column cannot hold: raised as before, by its field
        columns: dict[str, pa.Array] = {}
        for field, (name, convert) in zip(self.schema, self.converters, strict=True):
            build = builds[name]
            if build == PLAIN:
                columns[name] = struct.field(name)
                continue
            if build == ISO_DATE:
                columns[name] = _dates(struct.field(name), field, convert)
                continue
            columns[name] = pa.array([convert(r.get(name)) for r in records], type=field.type)
        return columns

    def from_json(self, texts: pa.Array | pa.ChunkedArray) -> dict[str, pa.Array]:
        """`to_columns` of the records in `texts` (a string column of one JSON object each, as `parse_records`
        reads them). When Arrow builds every field, Arrow's JSON reader reads them: no Python object per record
        or value (`json.loads` and the records' conversion were half the driver's commit CPU). A text it would
        read otherwise than `json.loads` does, or any it refuses, sends them all through Python, as before."""
        if self.builds and all(self.builds):
            columns = self._read_json(texts)
            if columns is not None:
                return columns
        return self.to_columns(parse_records(texts.to_pylist()))

    def _read_json(self, texts: pa.Array | pa.ChunkedArray) -> dict[str, pa.Array] | None:
        """The columns as Arrow's JSON reader builds them from the texts, one text a line; None where that could
        differ from `json.loads` and `to_columns`: a null text, a text that does not start with `{`, another count
        of rows than of texts (each text that starts with `{` is at least one row, so as many rows as texts is
        one record a text: a line break in a text cuts it into an error or one more row), a word
        `_NOT_FOR_ARROW`, a -0.0 in a float column (an integer -0 is -0.0 to Arrow, 0 to Python), anything the
        reader refuses."""
        if isinstance(texts, pa.ChunkedArray):
            texts = texts.combine_chunks()
        n = len(texts)
        if not n or texts.null_count or not (pa.types.is_string(texts.type) or pa.types.is_large_string(texts.type)):
            return None
        lines = pc.binary_join_element_wise(texts, "", "\n")  # each text and a line break
        offsets = np.frombuffer(lines.buffers()[1], np.int64 if pa.types.is_large_string(texts.type) else np.int32)
        offsets = offsets[lines.offset:lines.offset + n + 1]
        blob = lines.buffers()[2].slice(int(offsets[0]), int(offsets[-1] - offsets[0]))
        raw = blob.to_pybytes()
        if any(word in raw for word in _NOT_FOR_ARROW):
            return None
        if (np.frombuffer(raw, np.uint8)[offsets[:-1] - offsets[0]] != ord("{")).any():
            return None
        builds = self._builds_by_name()
        read = pa.schema([_read_field(f, builds[f.name]) for f in self.schema])
        try:
            options = pj.ParseOptions(explicit_schema=read, unexpected_field_behavior="ignore")
            table = pj.read_json(pa.BufferReader(blob), parse_options=options,
                                 read_options=pj.ReadOptions(use_threads=False, block_size=max(blob.size, 1 << 20)))
        except (pa.ArrowException, ValueError):
            return None
        if table.num_rows != n:
            return None
        columns: dict[str, pa.Array] = {}
        for field, (name, convert) in zip(self.schema, self.converters, strict=True):
            column = table.column(name).combine_chunks()
            if builds[name] == ISO_DATE:
                column = _dates(column, field, convert)
            elif pa.types.is_floating(column.type) and _negative_zero(column):
                return None
            columns[name] = column
        return columns

    def _builds_by_name(self) -> dict[str, str | None]:
        """Each field's `ArrowMapping.build` by its name (empty when the layout says none)."""
        return dict(zip(self.schema.names, self.builds, strict=True)) if self.builds else {}

    def convert_rows(self, records: list[dict[str, Any]]) -> dict[str, pa.Array]:
        """Typed columns for JSON-form records, in schema order, each value through its field's converter."""
        columns: dict[str, pa.Array] = {}
        for field, (name, convert) in zip(self.schema, self.converters, strict=True):
            values = [convert(r.get(name)) for r in records]
            columns[name] = pa.array(values, type=field.type)
        return columns


def _read_field(field: pa.Field, build: str | None) -> pa.Field:
    """The field as Arrow first reads it: an `ISO_DATE` field as its text (cast to a date after), else its type."""
    return pa.field(field.name, pa.string() if build == ISO_DATE else field.type)


def _negative_zero(column: pa.Array) -> bool:
    """A -0.0 among the float column's values."""
    values = column.to_numpy(zero_copy_only=False)
    return bool(np.any(np.signbit(values) & (values == 0)))


def _dates(texts: pa.Array, field: pa.Field, convert: Converter) -> pa.Array:
    """An `ISO_DATE` field's column from its texts: cast when every one is YYYY-MM-DD, else by its converter."""
    if pc.all(pc.match_substring_regex(texts, _ISO_DATE_TEXT)).as_py() is not False:
        try:
            return pc.cast(texts, pa.date32())
        except pa.ArrowException:
            pass  # not a date (2026-02-30): its converter raises, as before
    return pa.array([convert(v) for v in texts.to_pylist()], type=field.type)


class FieldTypeError(ValueError):
    """A record's value that its field's Arrow column cannot hold (an integer past int64, say)."""

    def __init__(self, field: str, arrow_type: pa.DataType, cause: BaseException) -> None:
        super().__init__(f"field {field!r}: the value does not fit its column ({arrow_type}): "
                         f"{type(cause).__name__}: {cause}")
        self.field = field
        self.arrow_type = arrow_type
        # out of the type's range (an int past int64), as opposed to a value of the wrong kind for it
        self.overflow = isinstance(cause, OverflowError) or "out of bounds" in str(cause) or "overflow" in str(cause)


def check_record(layout: RecordLayout, record: dict[str, Any]) -> None:
    """Convert one JSON-form record to its columns' types, field by field, as the rows table will: a value a
    column cannot hold raises `FieldTypeError` naming the field, here, instead of failing the table later. A
    layout without converters (per-row schemas: the record is one JSON text) has nothing to check."""
    for field, (name, convert) in zip(layout.schema, layout.converters, strict=False):
        try:
            pa.array([convert(record.get(name))], type=field.type)
        except (OverflowError, ValueError, TypeError, pa.ArrowException) as exc:
            raise FieldTypeError(name, field.type, exc) from None


def record_layout(json_schema: dict[str, Any], model: Any = None) -> RecordLayout:
    """The columns for records of `json_schema`, whose root must be an object with properties; with the Pydantic
    `model` it came from, its `Decimal` fields keep their precision (`DecimalMarks`)."""
    if model is not None:
        json_schema = model.model_json_schema(schema_generator=DecimalMarks)
    mapper = _Mapper(json_schema)
    root = json_schema
    if mapper.graph.refers(root) and "properties" not in root:
        root = mapper.resolve(root)
    if not root.get("properties"):
        raise UnsupportedSchemaError("the schema's root must be an object with properties to map to columns")
    fields, converters, builds = mapper.fields(root)
    return RecordLayout(pa.schema(fields), tuple(converters), tuple(builds))
