"""The `extract.yaml` contract: a strict Pydantic model, loaded and checked before Ray starts.

Unknown or ill-typed keys fail with one line naming the key. Relative paths resolve against the
config file's folder; that folder is also where `module:Model` schema references are imported from,
as `ray job submit --working-dir` would place it on the path.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from pipeline.storage import S3Settings
from schemas.contract import SchemaContract
from schemas.registry import SchemaNotFoundError


class ConfigError(ValueError):
    """The job configuration is wrong; the message is one line naming the key or column."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class InputConfig(_Strict):
    uri: str = Field(min_length=1)
    id_column: str = "doc_id"
    text_column: str = "text"
    limit: int | None = Field(default=None, gt=0)


class ModelConfig(_Strict):
    path: str = "bundled"
    max_tokens: int = Field(default=512, gt=0)
    temperature: float = Field(default=0.0, ge=0.0)
    max_model_len: int = Field(default=4096, gt=0)
    engine_kwargs: dict[str, Any] = Field(default_factory=dict)


class WorkersConfig(_Strict):
    actors: int = Field(default=1, gt=0)
    gpus_per_actor: float = Field(default=0, ge=0)
    cpus_per_actor: float = Field(default=1, gt=0)
    batch_size: int = Field(default=32, gt=0)

    @field_validator("gpus_per_actor")
    @classmethod
    def whole_gpus_above_one(cls, value: float) -> float:
        if value > 1 and value != int(value):
            raise ValueError("more than one GPU per actor must be a whole number (tensor parallelism)")
        return value

    @property
    def tensor_parallel_size(self) -> int:
        return max(1, int(self.gpus_per_actor))

    def ray_resources(self) -> dict[str, float]:
        """What each actor asks Ray for: its GPUs (one per tensor-parallel rank) and CPUs."""
        return {"num_gpus": float(self.gpus_per_actor), "num_cpus": float(self.cpus_per_actor)}


class OutputConfig(_Strict):
    uri: str = Field(min_length=1)
    checkpoint_rows: int = Field(default=256, gt=0)


class StorageConfig(_Strict):
    endpoint_url: str | None = None  # an S3-compatible store (MinIO, ...); else AWS_ENDPOINT_URL[_S3]
    region: str | None = None


class ExtractConfig(_Strict):
    name: str = Field(min_length=1, pattern=r"^[A-Za-z0-9_.-]+$")
    input: InputConfig
    schema_ref: str | None = Field(default=None, alias="schema")
    schema_file: str | None = None
    prompt: str = Field(min_length=1)
    model: ModelConfig = Field(default_factory=ModelConfig)
    workers: WorkersConfig = Field(default_factory=WorkersConfig)
    output: OutputConfig
    storage: StorageConfig = Field(default_factory=StorageConfig)

    @model_validator(mode="after")
    def one_schema(self) -> ExtractConfig:
        if (self.schema_ref is None) == (self.schema_file is None):
            raise ValueError("give exactly one of 'schema' (module:Model) or 'schema_file'")
        if "{document}" not in self.prompt:
            raise ValueError("prompt must contain the {document} placeholder")
        return self


def _key_path(loc: tuple[Any, ...]) -> str:
    return ".".join("schema" if part == "schema_ref" else str(part) for part in loc) or "(top level)"


def _one_line(error: ValidationError, source: str) -> str:
    parts = []
    for err in error.errors(include_url=False):
        key = _key_path(err["loc"])
        if err["type"] == "extra_forbidden":
            parts.append(f"{key}: unknown key")
        elif err["type"] == "missing":
            parts.append(f"{key}: required key is missing")
        else:
            parts.append(f"{key}: {err['msg']} (got {err.get('input')!r})" if err["loc"] else err["msg"])
    return f"{source}: " + "; ".join(parts)


def _resolve_local(uri: str, base: Path) -> str:
    if "://" in uri:
        return uri
    path = Path(uri).expanduser()
    return str(path if path.is_absolute() else (base / path).resolve())


class LoadedConfig:
    """A validated config with its paths resolved and its schema contract built."""

    def __init__(self, config: ExtractConfig, path: Path, raw: dict[str, Any]) -> None:
        self.config = config
        self.path = path
        self.base_dir = path.parent
        self.raw = raw
        self.input_uri = _resolve_local(config.input.uri, self.base_dir)
        self.output_uri = _resolve_local(config.output.uri, self.base_dir)
        self.config_hash = hashlib.sha256(json.dumps(raw, sort_keys=True, default=str).encode()).hexdigest()[:16]
        self.contract = self._contract()

    def _contract(self) -> SchemaContract:
        cfg = self.config
        try:
            if cfg.schema_ref is not None:
                return SchemaContract.from_model_ref(cfg.schema_ref, self.base_dir)
            assert cfg.schema_file is not None
            return SchemaContract.from_file(Path(_resolve_local(cfg.schema_file, self.base_dir)))
        except (SchemaNotFoundError, ValueError) as exc:
            key = "schema" if cfg.schema_ref is not None else "schema_file"
            raise ConfigError(f"{self.path}: {key}: {exc}") from exc

    @property
    def s3_settings(self) -> S3Settings:
        return S3Settings.resolve(self.config.storage.endpoint_url, self.config.storage.region)

    @property
    def output_hash(self) -> str:
        """Everything that decides what a document's outcome is; staged work is reused only under the same hash."""
        cfg = self.config
        decisive = {"schema": self.contract.hash, "model": cfg.model.model_dump(), "prompt": cfg.prompt,
                    "id": cfg.input.id_column, "text": cfg.input.text_column}
        return hashlib.sha256(json.dumps(decisive, sort_keys=True, default=str).encode()).hexdigest()[:16]

    @property
    def model_path(self) -> str:
        path = self.config.model.path
        if path == "bundled" or "://" in path:
            return path
        local = self.base_dir / path
        return str(local.resolve()) if local.exists() else path


def parse_config(raw: Any, source: str = "extract.yaml") -> ExtractConfig:
    if not isinstance(raw, dict):
        raise ConfigError(f"{source}: the file must be a mapping of keys, got {type(raw).__name__}")
    try:
        return ExtractConfig.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError(_one_line(exc, source)) from None


def load_config(path: str | Path, overrides: dict[str, Any] | None = None) -> LoadedConfig:
    """Read, validate and resolve `path`. `overrides` are dotted keys (`model.max_tokens`) applied on top."""
    path = Path(path).expanduser().resolve()
    try:
        raw = yaml.safe_load(path.read_text())
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the config: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML: {str(exc).splitlines()[0]}") from None
    if isinstance(raw, dict) and overrides:
        for dotted, value in overrides.items():
            node = raw
            *parents, leaf = dotted.split(".")
            for part in parents:
                node = node.setdefault(part, {})
            node[leaf] = value
    return LoadedConfig(parse_config(raw, str(path)), path, raw)
