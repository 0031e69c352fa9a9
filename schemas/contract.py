"""`SchemaContract`: what a job extracts, and everything derived from it.

A contract is either a registered Pydantic model (`module:Model`) or a JSON Schema file. It carries
the JSON Schema sent to the grammar engine, a stable hash of it, the Arrow layout of its records, and
the check every output passes before it becomes a row. It pickles to plain data, so Ray can ship it
to actors; the model class is re-imported there.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import jsonschema
import pyarrow as pa
from pydantic import BaseModel, ValidationError

from schemas.arrow import RecordLayout, record_layout
from schemas.canonical import canonical_json, schema_hash
from schemas.declared import declare_required
from schemas.limits import SchemaLimits, check_limits
from schemas.refs import SchemaGraph, graph_for
from schemas.registry import import_model, schema_name_version
from schemas.validation import full_validator, schema_errors

RECORD_COLUMN = "record"  # per-row-schema jobs: the record as JSON text


class JsonRecordLayout(RecordLayout):
    """Records of varying schemas: one JSON text column (next to the row's `_schema_hash`)."""

    def __init__(self) -> None:
        super().__init__(pa.schema([pa.field(RECORD_COLUMN, pa.string(), nullable=False)]), ())

    def to_columns(self, records: list[dict[str, Any]]) -> dict[str, pa.Array]:
        return {RECORD_COLUMN: pa.array([canonical_json(r) for r in records], pa.string())}


def parse_output(raw_output: str) -> tuple[Any, str]:
    """The output's JSON value, and a text of it that Pydantic's JSON parser reads as `json.loads` did.

    A raw control character (a tab, U+0001, ...) inside a string is read as that character. XGrammar
    (0.2.8) decodes a string with `maxLength` or `minLength` as `[^"\\\r\n]{0,n}`, which admits them, where strict
    JSON wants them escaped, so a grammar-valid output would otherwise be `invalid_json` (seen on the bundled model
    at temperature 0.8 under `Field(max_length=60)`; mlc-ai/xgrammar#800). Such an output's text is written again
    with the characters escaped, for Pydantic, which refuses them as strict JSON does."""
    try:
        return json.loads(raw_output), raw_output
    except json.JSONDecodeError:
        pass
    try:
        parsed = json.loads(raw_output, strict=False)
    except json.JSONDecodeError as exc:
        raise RecordRejected(
            "invalid_json", [{"loc": [], "msg": f"{exc.msg} at char {exc.pos}", "type": "json_invalid"}]
        ) from None
    return parsed, json.dumps(parsed, ensure_ascii=False)


class RecordRejected(Exception):
    """An output that parsed or failed to parse, and must not become a row."""

    def __init__(self, reason: str, errors: list[dict[str, Any]]) -> None:
        super().__init__(f"{reason}: {errors[0]['msg'] if errors else ''}")
        self.reason = reason
        self.errors = errors


def _pydantic_errors(exc: ValidationError) -> list[dict[str, Any]]:
    return [
        {"loc": [str(p) for p in err["loc"]], "msg": err["msg"], "type": err["type"]}
        for err in exc.errors(include_url=False, include_input=False)
    ]


@dataclass
class SchemaContract:
    name: str
    version: str
    json_schema: dict[str, Any]
    model_ref: str | None = None
    search_path: str | None = None
    source: str = ""
    per_row: bool = False  # a per-row-schema job's placeholder: each row's own contract does the checking
    _model: type[BaseModel] | None = field(default=None, repr=False, compare=False)

    @classmethod
    def from_model_ref(cls, ref: str, search_path: Path | None = None) -> SchemaContract:
        model = import_model(ref, search_path)
        name, version = schema_name_version(model)
        return cls(
            name=name,
            version=version,
            json_schema=model.model_json_schema(),
            model_ref=ref,
            search_path=str(search_path) if search_path else None,
            source=ref,
            _model=model,
        )

    @classmethod
    def from_file(cls, path: Path, limits: SchemaLimits | None = None) -> SchemaContract:
        try:
            json_schema = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError) as exc:
            raise ValueError(f"schema_file {path}: {exc}") from exc
        try:
            return cls.from_dict(json_schema, default_name=path.stem, source=str(path), limits=limits)
        except ValueError as exc:
            raise ValueError(f"schema_file {path}: {exc}") from exc

    @classmethod
    def from_dict(cls, json_schema: Any, default_name: str = "schema", source: str = "",
                  limits: SchemaLimits | None = None) -> SchemaContract:
        """A contract for an untrusted JSON Schema: checked against the metaschema and `limits` first."""
        if not isinstance(json_schema, dict):
            raise ValueError("a JSON Schema must be an object")
        check_limits(json_schema, limits or SchemaLimits())
        try:
            jsonschema.validators.validator_for(json_schema).check_schema(json_schema)
        except jsonschema.SchemaError as exc:
            raise ValueError(f"not a valid JSON Schema: {exc.message}") from exc
        name = str(json_schema.get("title") or default_name)
        version = str(json_schema.get("version") or json_schema.get("$id") or "0")
        # the grammar closes objects: a required name the schema does not declare gets the schema it has there
        return cls(name=name, version=version, json_schema=declare_required(json_schema), source=source)

    @classmethod
    def for_rows(cls, name: str, source: str, table_hash: str = "") -> SchemaContract:
        """The placeholder contract of a per-row-schema job."""
        return cls(name=name, version="per-row", json_schema={"x-per-row": source, "x-table": table_hash},
                   source=source, per_row=True)

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_model"] = None
        for derived in ("hash", "layout", "_validator", "graph"):
            state.pop(derived, None)
        return state

    @property
    def model(self) -> type[BaseModel] | None:
        if self._model is None and self.model_ref is not None:
            self._model = import_model(self.model_ref, Path(self.search_path) if self.search_path else None)
        return self._model

    @cached_property
    def hash(self) -> str:
        return schema_hash(self.json_schema)

    @cached_property
    def graph(self) -> SchemaGraph:
        """The schema's resolved view (`schemas.refs`): the one every walker of this schema reads, built once."""
        return graph_for(self.json_schema)

    @cached_property
    def layout(self) -> RecordLayout:
        return JsonRecordLayout() if self.per_row else record_layout(self.json_schema, self.model)

    @cached_property
    def _validator(self) -> jsonschema.protocols.Validator:

        return full_validator(self.json_schema)

    def check(self, raw_output: str, context: dict[str, Any] | None = None) -> dict[str, Any]:
        """The record in JSON form, or `RecordRejected` with every error's location, message and type.

        With a Pydantic model its validators run with `context` (the document id and text), so a
        validator can check a value against the source document.
        """
        parsed, raw_output = parse_output(raw_output)

        # The whole JSON Schema first: it catches every keyword the grammar engine did not enforce.
        errors = schema_errors(self._validator, parsed)
        if errors:
            raise RecordRejected("schema_violation", errors)
        if not isinstance(parsed, dict):
            raise RecordRejected("schema_violation", [{"loc": [], "msg": "record is not an object", "type": "type",
                                                       "keyword": "type", "schema_path": ""}])
        model = self.model
        if model is not None:
            try:
                instance = model.model_validate_json(raw_output, context=context)
            except ValidationError as exc:
                raise RecordRejected("semantic_invalid", _pydantic_errors(exc)) from None
            return instance.model_dump(mode="json")
        return parsed
