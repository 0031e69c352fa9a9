"""`SchemaContract`: what a job extracts, and everything derived from it.

A contract is either a registered Pydantic model (`module:Model`) or a JSON Schema file. It carries
the JSON Schema sent to the grammar engine, a stable hash of it, the Arrow layout of its records, and
the check every output passes before it becomes a row. It pickles to plain data, so Ray can ship it
to actors; the model class is re-imported there.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import jsonschema
from pydantic import BaseModel, ValidationError

from schemas.arrow import RecordLayout, record_layout
from schemas.registry import import_model, schema_name_version


class RecordRejected(Exception):
    """An output that parsed or failed to parse, and must not become a row."""

    def __init__(self, reason: str, errors: list[dict[str, Any]]) -> None:
        super().__init__(f"{reason}: {errors[0]['msg'] if errors else ''}")
        self.reason = reason
        self.errors = errors


def canonical_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def schema_hash(json_schema: dict[str, Any]) -> str:
    """A stable hash of a JSON Schema's content: key order and whitespace do not change it."""
    return hashlib.sha256(canonical_json(json_schema).encode()).hexdigest()[:16]


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
    def from_file(cls, path: Path) -> SchemaContract:
        try:
            json_schema = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError) as exc:
            raise ValueError(f"schema_file {path}: {exc}") from exc
        if not isinstance(json_schema, dict):
            raise ValueError(f"schema_file {path}: a JSON Schema must be an object")
        try:
            jsonschema.validators.validator_for(json_schema).check_schema(json_schema)
        except jsonschema.SchemaError as exc:
            raise ValueError(f"schema_file {path}: not a valid JSON Schema: {exc.message}") from exc
        name = str(json_schema.get("title") or path.stem)
        version = str(json_schema.get("version") or json_schema.get("$id") or "0")
        return cls(name=name, version=version, json_schema=json_schema, source=str(path))

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_model"] = None
        for derived in ("hash", "layout", "_validator"):
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
    def layout(self) -> RecordLayout:
        return record_layout(self.json_schema)

    @cached_property
    def _validator(self) -> jsonschema.protocols.Validator:
        cls = jsonschema.validators.validator_for(self.json_schema)
        return cls(self.json_schema, format_checker=cls.FORMAT_CHECKER)

    def check(self, raw_output: str, context: dict[str, Any] | None = None) -> dict[str, Any]:
        """The record in JSON form, or `RecordRejected` with every error's location, message and type.

        With a Pydantic model its validators run with `context` (the document id and text), so a
        validator can check a value against the source document.
        """
        try:
            parsed = json.loads(raw_output)
        except json.JSONDecodeError as exc:
            raise RecordRejected(
                "invalid_json", [{"loc": [], "msg": f"{exc.msg} at char {exc.pos}", "type": "json_invalid"}]
            ) from None
        model = self.model
        if model is not None:
            try:
                instance = model.model_validate_json(raw_output, context=context)
            except ValidationError as exc:
                raise RecordRejected("semantic_invalid", _pydantic_errors(exc)) from None
            return instance.model_dump(mode="json")
        errors = sorted(self._validator.iter_errors(parsed), key=lambda e: list(e.absolute_path))
        if errors:
            raise RecordRejected(
                "schema_violation",
                [
                    {"loc": [str(p) for p in e.absolute_path], "msg": e.message, "type": str(e.validator)}
                    for e in errors
                ],
            )
        if not isinstance(parsed, dict):
            raise RecordRejected("schema_violation", [{"loc": [], "msg": "record is not an object", "type": "type"}])
        return parsed
