"""The `extract.yaml` contract: a strict Pydantic model, loaded and checked before Ray starts.

Unknown or ill-typed keys fail with one line naming the key. Relative paths resolve against the
config file's folder; that folder is also where `module:Model` schema references are imported from,
as `ray job submit --working-dir` would place it on the path.
"""

from __future__ import annotations

import hashlib
import json
from functools import cached_property
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, ValidationError, field_validator, model_validator

from pipeline.config_file import (  # noqa: F401 - re-exported: the file's limits are part of this contract
    MAX_CONFIG_BYTES,
    MAX_CONFIG_DEPTH,
    MAX_CONFIG_NODES,
    ConfigError,
    check_yaml_limits,
    nesting_depth,
    read_yaml,
)
from pipeline.config_grounding import DEFAULT_SCREENS, checked_locale, checked_screens, split_grounding
from pipeline.config_model import (  # noqa: F401 - re-exported: the sections are part of this contract
    RETRY_REASONS,
    SIMULATED,
    ModelConfig,
    RetryConfig,
    SamplingConfig,
    SimulatedConfig,
    SimulatedMix,
    WorkersConfig,
    _Strict,
)
from pipeline.storage import S3Settings
from schemas.contract import SchemaContract
from schemas.registry import SchemaNotFoundError
from schemas.repeats import has_lists


class InputConfig(_Strict):
    uri: str = Field(min_length=1)
    id_column: str = "doc_id"
    text_column: str = "text"
    limit: int | None = Field(default=None, gt=0)
    # Per-row schemas: this column holds each document's JSON Schema (as JSON text), or a key into
    # `schema_table` (a JSON file {key: schema}, or a folder of <key>.json files).
    schema_column: str | None = None
    schema_table: str | None = None
    # A document whose prompt does not fit the context (workers.windows): read in windows that do, merged into one
    # row (windows), or refused as `input_too_long` (dead_letter). A window's document tokens: auto (as many as
    # fit beside the prompt and model.max_tokens) or at most N; neighbouring windows share window_overlap of them.
    long_documents: Literal["windows", "dead_letter"] = "windows"
    window_tokens: Annotated[int, Field(gt=0)] | Literal["auto"] = "auto"
    window_overlap: float = Field(default=0.1, ge=0, lt=0.5)
    max_windows: int = Field(default=64, gt=0)  # past it, `input_too_long` (refused untokenized when surely past)
    # The documents' locale for grounding (schemas.grounding.locale): auto detects each one's language; de_DE sets it.
    locale: str = "auto"

    _locale = field_validator("locale")(lambda cls, v: checked_locale(v))


class CostConfig(_Strict):
    """A run's price (pipeline.costs): per million input and output tokens, or per GPU-hour."""

    per_million_input_tokens: float | None = Field(default=None, ge=0)
    per_million_output_tokens: float | None = Field(default=None, ge=0)
    per_gpu_hour: float | None = Field(default=None, ge=0)

    @model_validator(mode="after")
    def one_basis(self) -> CostConfig:
        tokens = self.per_million_input_tokens is not None or self.per_million_output_tokens is not None
        if tokens == (self.per_gpu_hour is not None):
            raise ValueError("output.cost: give per_million_input_tokens and per_million_output_tokens, or "
                             "per_gpu_hour (one basis)")
        return self


class OutputConfig(_Strict):
    uri: str = Field(min_length=1)
    checkpoint_rows: int = Field(default=256, gt=0)
    # The quality bar: a run that misses it still commits, records `alert` in its manifest and exits 4.
    max_dead_letter_rate: float | None = Field(default=None, ge=0, le=1)
    max_truncated_rate: float | None = Field(default=None, ge=0, le=1)
    min_rows: int | None = Field(default=None, ge=0)
    # Rows carry `_confidence` (per leaf, from the sampled tokens' log-probabilities) and `_min_confidence`.
    confidence: bool = True
    # A row whose least confident leaf is below this becomes a `low_confidence` dead letter, the record attached.
    min_confidence: float | None = Field(default=None, ge=0, le=1)
    # A per-field calibration of _confidence (a JSON file `extract eval --fit-calibration` writes), applied on the
    # actors; a path relative to this file.
    calibration: str | None = None
    # Prices for the run's cost in the summary, manifest and report (pipeline.costs).
    cost: CostConfig | None = None

    @model_validator(mode="after")
    def confidence_for_min(self) -> OutputConfig:
        for key in ("min_confidence", "calibration"):
            if getattr(self, key) is not None and not self.confidence:
                raise ValueError(f"output.{key} needs output.confidence: true (it acts on each row's confidence)")
        return self


class SchemaPolicyConfig(_Strict):
    """How untrusted schemas are bounded, compiled and, when no backend compiles one, handled."""

    on_unsupported: Literal["fail", "dead_letter"] = "fail"  # dead_letter: its rows become `schema_unsupported`
    backends: list[Literal["xgrammar", "guidance"]] = Field(default_factory=lambda: ["xgrammar", "guidance"],
                                                            min_length=1)
    compile_timeout_s: float = Field(default=30.0, gt=0)
    max_bytes: int = Field(default=512_000, gt=0)
    max_depth: int = Field(default=48, gt=0)
    max_enum: int = Field(default=2_000, gt=0)
    max_pattern_length: int = Field(default=1_000, gt=0)
    # Bound unbounded strings / arrays in the grammar only (the post-check keeps the schema as written): auto fits
    # the schema's longest output into model.max_tokens (schemas.bounds); a number fixes the bound; null: none.
    max_string_length: Annotated[int, Field(gt=0)] | Literal["auto"] | None = "auto"
    max_array_items: Annotated[int, Field(gt=0)] | Literal["auto"] | None = "auto"
    # Grounded fields get, per document, only values it writes (schemas.grounding). auto: every plain number,
    # date and string field unless marked `x-grounded: false`, plus the marked ones; marked: only fields marked
    # `x-grounded: KIND`; off: none. (true and false, from before the modes, mean marked and off.)
    # Or a mapping {mode, locale, screens}: locale (default input.locale) and screens are grounding_locale/_screens.
    grounding: Literal["auto", "marked", "off"] = "auto"
    grounding_locale: str | None = None
    grounding_screens: list[str] = Field(default_factory=lambda: list(DEFAULT_SCREENS))
    # Under `marked`: every plain number field (no enum or const) is grounded as if marked x-grounded: number.
    ground_numbers: bool = False
    # cut: a list ends before its first item equal to an earlier one (a decoding loop; schemas.repeats), unless
    # only the output as decoded passes its checks; keep: outputs as decoded.
    repeated_items: Literal["cut", "keep"] = "cut"

    _mapping = model_validator(mode="before")(lambda cls, data: split_grounding(data))
    _locale = field_validator("grounding_locale")(lambda cls, v: checked_locale(v))
    _screens = field_validator("grounding_screens")(lambda cls, v: checked_screens(v))

    @field_validator("grounding", mode="before")
    @classmethod
    def grounding_mode(cls, value: Any) -> Any:
        return {True: "marked", False: "off"}.get(value, value) if isinstance(value, bool) else value


class StorageConfig(_Strict):
    endpoint_url: str | None = None  # an S3-compatible store (MinIO, ...); else AWS_ENDPOINT_URL[_S3]
    region: str | None = None


class ExtractConfig(_Strict):
    name: str = Field(min_length=1, pattern=r"^[A-Za-z0-9_.-]+$")
    input: InputConfig
    schema_ref: str | None = Field(default=None, alias="schema")
    schema_file: str | None = None
    prompt: str = Field(min_length=1)
    # How the schema is shown when the prompt has no {schema}: auto, json (the JSON Schema), fields, none.
    prompt_schema: Literal["auto", "json", "fields", "none"] = "auto"
    system: str | None = None  # a system prompt, before the schema and the examples
    # Few-shot pairs: a JSONL file of {"document": ..., "output": {...}}; unset: the {document, output} pairs under
    # the schema's own top-level `examples` (a Pydantic model's json_schema_extra), if any; false: none.
    examples: str | Literal[False] | None = None
    model: ModelConfig = Field(default_factory=ModelConfig)
    workers: WorkersConfig = Field(default_factory=WorkersConfig)
    output: OutputConfig
    storage: StorageConfig = Field(default_factory=StorageConfig)
    schema_policy: SchemaPolicyConfig = Field(default_factory=SchemaPolicyConfig)

    @property
    def grounding_locale(self) -> str:
        """The locale grounding reads documents by: schema_policy.grounding.locale, else input.locale."""
        return self.schema_policy.grounding_locale or self.input.locale

    @model_validator(mode="after")
    def one_schema(self) -> ExtractConfig:
        given = [k for k, v in (("schema", self.schema_ref), ("schema_file", self.schema_file),
                                ("input.schema_column", self.input.schema_column)) if v is not None]
        if len(given) != 1:
            raise ValueError("give exactly one of 'schema' (module:Model), 'schema_file' or 'input.schema_column' "
                             f"(got {', '.join(given) or 'none'})")
        if self.input.schema_table is not None and self.input.schema_column is None:
            raise ValueError("input.schema_table needs input.schema_column (the column holding each row's key)")
        if "{document}" not in self.prompt:
            raise ValueError("prompt must contain the {document} placeholder")
        simulated = self.model.simulated
        if simulated is not None and not simulated.allow:
            raise ValueError("model.path: simulated writes made-up records (no model runs); to write them to "
                             "output.uri anyway (benchmarks, tests), set model.simulated.allow: true")
        if self.examples and self.input.schema_column is not None:
            raise ValueError("examples need one job schema; per-row schemas (input.schema_column) take none")
        retry = self.model.retry
        if retry.attempts > 1:
            if not retry.on:
                raise ValueError("model.retry.on: model.retry.attempts > 1 needs at least one reason to retry on")
            temperature = self.model.temperature if retry.temperature is None else retry.temperature
            if not retry.feedback and temperature == 0:
                raise ValueError("model.retry: another attempt at temperature 0 without feedback repeats the same "
                                 "output; set model.retry.feedback: true or model.retry.temperature above 0")
        return self


def _key_path(loc: tuple[Any, ...]) -> str:
    return ".".join("schema" if part == "schema_ref" else str(part) for part in loc) or "(top level)"


def _one_line(error: ValidationError, source: str, sets: tuple[str, ...] = ()) -> str:
    """The errors in one line; where a `--set` key lies under the failing key, the line names it too, so a clash
    between the command line and the file is not blamed on the file alone."""
    parts = []
    for err in error.errors(include_url=False):
        key = _key_path(err["loc"])
        if err["type"] == "extra_forbidden":
            part = f"{key}: unknown key"
        elif err["type"] == "missing":
            part = f"{key}: required key is missing"
        else:
            part = f"{key}: {err['msg']} ({_got(key, err.get('input'))})" if err["loc"] else err["msg"]
        given = [k for k in sets if err["loc"] and (k == key or k.startswith(key + ".") or key.startswith(k + "."))]
        parts.append(part + (f" (with --set {', --set '.join(given)})" if given else ""))
    return f"{source}: " + "; ".join(parts)


def _got(key: str, value: Any) -> str:
    """What a config error shows of the value it refused: the value itself, or only its type where the key or the
    value could hold a secret (`model.engine_kwargs={"hf_token": …}`), and never more than 200 characters."""
    from workers.secrets import looks_secret, secret_key

    if secret_key(key) or looks_secret(key, value) or looks_secret("value", repr(value)):
        return f"got a value of type {type(value).__name__}, not shown: it may hold a secret"
    shown = repr(value)
    return f"got {shown[:200]}…" if len(shown) > 200 else f"got {shown}"


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
        if config.model.simulated is not None:
            self.config = config = _with_simulated_engine(config, self.base_dir)
        self.max_model_len_source = "model.max_model_len"
        if config.model.max_model_len == "auto":  # the model's own limit (workers.model_limit)
            from workers.model_limit import model_limit

            limit, self.max_model_len_source = model_limit(self.model_path)
            self.config = config = config.model_copy(update={"model": config.model.model_copy(
                update={"max_model_len": limit})})
        self.schema_table = self._schema_table()
        self.contract = self._contract()
        self.chat_template = self._chat_template()
        self.examples = self._examples()

    @property
    def schema_limits(self) -> Any:
        from schemas.limits import SchemaLimits

        p = self.config.schema_policy
        return SchemaLimits(max_bytes=p.max_bytes, max_depth=p.max_depth, max_enum=p.max_enum,
                            max_pattern_length=p.max_pattern_length, compile_timeout_s=p.compile_timeout_s)

    def _schema_table(self) -> dict[str, dict[str, Any]]:
        """`input.schema_table`: {key: JSON Schema} from a JSON file, or from a folder's <key>.json files."""
        ref = self.config.input.schema_table
        if ref is None:
            return {}
        path = Path(_resolve_local(ref, self.base_dir))
        try:
            if path.is_dir():
                table = {f.stem: json.loads(f.read_text()) for f in sorted(path.glob("*.json"))}
            else:
                table = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError) as exc:
            raise ConfigError(f"{self.path}: input.schema_table: {path}: {exc}") from None
        except RecursionError:
            raise ConfigError(f"{self.path}: input.schema_table: {path}: nests too deep to read") from None
        if not isinstance(table, dict) or not all(isinstance(v, dict) for v in table.values()):
            raise ConfigError(f"{self.path}: input.schema_table: {path}: expected an object of "
                              "{key: JSON Schema object}")
        if not table:
            raise ConfigError(f"{self.path}: input.schema_table: {path}: holds no schemas")
        return {str(k): v for k, v in table.items()}

    def _chat_template(self) -> str | None:
        ref = self.config.model.chat_template
        if ref is None:
            return None
        path = Path(_resolve_local(ref, self.base_dir))
        try:
            return path.read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigError(f"{self.path}: model.chat_template: {path}: {exc.strerror}") from None

    def _examples(self) -> list[tuple[Any, str]]:
        """The few-shot examples (file, else the model's own), each checked against the contract:
        (Example, its output as the grammar emits it)."""
        from schemas.examples import ExampleError, check_examples, load_examples_file, model_examples

        if self.contract.per_row or self.config.examples is False:
            return []
        try:
            ref = self.config.examples
            found = load_examples_file(Path(_resolve_local(ref, self.base_dir))) if ref else \
                model_examples(self.contract)
            policy = self.config.schema_policy
            return check_examples(found, self.contract, policy.grounding, policy.ground_numbers)
        except ExampleError as exc:
            raise ConfigError(f"{self.path}: examples: {exc}") from None

    def _contract(self) -> SchemaContract:
        cfg = self.config
        if cfg.input.schema_column is not None:
            table_hash = hashlib.sha256(json.dumps(self.schema_table, sort_keys=True).encode()).hexdigest()[:16]
            return SchemaContract.for_rows(cfg.name, f"input.schema_column: {cfg.input.schema_column}", table_hash)
        from schemas.grounding import bad_marks

        key = "schema" if cfg.schema_ref is not None else "schema_file"
        try:
            if cfg.schema_ref is not None:
                contract = SchemaContract.from_model_ref(cfg.schema_ref, self.base_dir)
            else:
                assert cfg.schema_file is not None
                contract = SchemaContract.from_file(Path(_resolve_local(cfg.schema_file, self.base_dir)),
                                                    self.schema_limits)
        except (SchemaNotFoundError, ValueError) as exc:
            raise ConfigError(f"{self.path}: {key}: {exc}") from exc
        except RecursionError:  # JSON nested thousands deep: the decoder's own stack, before any schema limit
            raise ConfigError(f"{self.path}: {key}: the schema nests too deep to read (schema_policy.max_depth is "
                              f"{cfg.schema_policy.max_depth})") from None
        marks = bad_marks(contract.json_schema)
        if marks:
            raise ConfigError(f"{self.path}: {key}: {marks[0]}")
        return contract

    @cached_property
    def calibration(self) -> dict[str, Any] | None:
        """output.calibration's content (a per-field calibration of _confidence), checked; None when unset."""
        from workers.calibrator import Calibrator

        name = self.config.output.calibration
        if name is None:
            return None
        path = Path(_resolve_local(name, self.base_dir))
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            Calibrator.from_json(data)
        except (OSError, UnicodeDecodeError, json.JSONDecodeError, ValueError, AttributeError, RecursionError) as exc:
            raise ConfigError(f"{self.path}: output.calibration: {path}: {exc}") from None
        return data

    @property
    def s3_settings(self) -> S3Settings:
        return S3Settings.resolve(self.config.storage.endpoint_url, self.config.storage.region)

    @property
    def decisive(self) -> dict[str, Any]:
        """Everything that decides what a document's outcome is (the output hash's inputs)."""
        cfg = self.config
        from schemas.examples import examples_hash

        prompting = {"schema": cfg.prompt_schema, "system": cfg.system, "examples": examples_hash(self.examples),
                     "chat_template": self.chat_template}
        model = cfg.model.model_dump()
        if cfg.model.retry.attempts == 1:  # one attempt is the behaviour from before model.retry: the same hash
            model.pop("retry")
        policy = self._decisive_policy()
        decisive = {"schema": self.contract.hash, "model": model, "prompt": cfg.prompt,
                    "prompting": prompting, "id": cfg.input.id_column, "text": cfg.input.text_column,
                    "policy": policy}
        if cfg.input.long_documents == "windows":  # how a long document is read decides its outcome
            decisive["windows"] = [cfg.input.window_tokens, cfg.input.window_overlap, cfg.input.max_windows]
        if cfg.output.min_confidence is not None:  # it decides rows against dead letters; unset, the old hash
            decisive["min_confidence"] = cfg.output.min_confidence
            if self.calibration is not None:  # what the threshold compares: the calibrated confidence
                decisive["calibration"] = self.calibration
        return decisive

    def _decisive_policy(self) -> dict[str, Any]:
        """schema_policy as it enters the output hash: keys at the defaults they replaced are left out, so a job
        that does not use them keeps its hash."""
        cfg = self.config
        policy = cfg.schema_policy.model_dump()
        if policy["ground_numbers"] is False:  # the default, and all there was before the key: the same hash
            policy.pop("ground_numbers")
        # Grounding modes keep the hash of the boolean they replaced (true: marked, popped as the old default;
        # false: off), and `auto` is `marked` where it grounds no field the marks do not: the same grammar.
        for key in ("max_string_length", "max_array_items"):  # auto that bounds nothing: the old default's hash
            if policy[key] == "auto" and not self.auto_bounds_act:
                policy[key] = None
        # `cut` changes outputs only where the schema has a list: elsewhere the hash from before the key.
        if policy["repeated_items"] == "keep" or not has_lists(self.contract.json_schema) and not self.contract.per_row:
            policy.pop("repeated_items")
        for key, default in (("grounding_locale", None), ("grounding_screens", DEFAULT_SCREENS)):
            if policy[key] == default:  # the default, and all there was before the key: the same hash
                policy.pop(key)
        if cfg.input.locale != "auto":
            policy["input_locale"] = cfg.input.locale
        mode = self.grounding_in_effect
        if mode == "marked":
            policy.pop("grounding")
        else:
            policy["grounding"] = False if mode == "off" else mode
        return policy

    @property
    def grounding_in_effect(self) -> str:
        """schema_policy.grounding as it acts on this job's schema: `auto` over a schema whose every field auto
        would ground is marked already (the sample Invoice) acts as `marked`."""
        from schemas.grounding import field_kinds

        policy = self.config.schema_policy
        if policy.grounding != "auto" or self.contract.per_row:
            return policy.grounding
        schema = self.contract.json_schema
        auto = field_kinds(schema, "auto", policy.ground_numbers)
        return "marked" if auto == field_kinds(schema, "marked", policy.ground_numbers) else "auto"

    @property
    def auto_bounds_act(self) -> bool:
        """Whether `auto` grammar bounds change this job's schema (per-row schemas: assumed so)."""
        from schemas.bounds import grammar_schema

        if self.contract.per_row:
            return True
        schema = self.contract.json_schema
        return grammar_schema(schema, "auto", "auto", self.config.model.max_tokens) != schema

    @property
    def output_hash(self) -> str:
        """Staged and committed work is reused only under the same hash."""
        return hashlib.sha256(json.dumps(self.decisive, sort_keys=True, default=str).encode()).hexdigest()[:16]

    @property
    def model_path(self) -> str:
        path = self.config.model.path
        if path in ("bundled", SIMULATED) or "://" in path:
            return path
        local = self.base_dir / path
        return str(local.resolve()) if local.exists() else path


def _with_simulated_engine(config: ExtractConfig, base: Path) -> ExtractConfig:
    """`config` with `model.simulated` carried to the actors as the engine's arguments (`engine_kwargs`, which the
    ExtractionSpec holds), a gold file's path resolved against the config's folder."""
    simulated = config.model.simulated
    assert simulated is not None
    settings = simulated.model_dump(exclude={"allow"})
    if settings["answers"] == "gold" and settings["outputs"] == "schema":
        raise ConfigError("model.simulated.answers: gold needs model.simulated.outputs, a gold JSONL file "
                          "({\"document\": ..., \"output\": ...} lines)")
    if settings["outputs"] != "schema":
        gold = Path(_resolve_local(settings["outputs"], base))
        if not gold.is_file():
            raise ConfigError(f"model.simulated.outputs: {gold}: no such file (a gold JSONL file, or \"schema\")")
        settings["outputs"] = str(gold)
    model = config.model.model_copy(update={"engine_kwargs": {"simulated": settings}})
    return config.model_copy(update={"model": model})


def parse_config(raw: Any, source: str = "extract.yaml", sets: tuple[str, ...] = ()) -> ExtractConfig:
    if not isinstance(raw, dict):
        raise ConfigError(f"{source}: the file must be a mapping of keys, got {type(raw).__name__}")
    try:
        return ExtractConfig.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError(_one_line(exc, source, sets)) from None


def load_config(path: str | Path, overrides: dict[str, Any] | None = None) -> LoadedConfig:
    """Read, validate and resolve `path`. `overrides` are dotted keys (`model.max_tokens`) applied on top."""
    path = Path(path).expanduser().resolve()
    raw = read_yaml(path)
    if isinstance(raw, dict) and overrides:
        for dotted, value in overrides.items():
            node = raw
            *parents, leaf = dotted.split(".")
            for depth, part in enumerate(parents):
                node = node.setdefault(part, {})
                if not isinstance(node, dict):
                    held = ".".join(parents[:depth + 1])
                    raise ConfigError(f"--set {dotted}: {held} holds {node!r}, not a mapping, so it has no key "
                                      f"{'.'.join([*parents[depth + 1:], leaf])!r}")
            node[leaf] = value
            if nesting_depth(value) + len(parents) + 1 > MAX_CONFIG_DEPTH:
                raise ConfigError(f"--set {dotted}: the value nests more than {MAX_CONFIG_DEPTH} mappings or lists "
                                  "deep (with its key); a config is a few levels of keys")
    return LoadedConfig(parse_config(raw, str(path), tuple(overrides or ())), path, raw)


def output_of(path: str | Path) -> tuple[str, S3Settings]:
    """The output a config names and its storage settings, read as data only: the job's schema module is not
    imported, nor its examples or templates read (`extract report extract.yaml` reads an output, runs no code)."""
    path = Path(path).expanduser().resolve()
    cfg = parse_config(read_yaml(path), str(path))
    return _resolve_local(cfg.output.uri, path.parent), S3Settings.resolve(cfg.storage.endpoint_url, cfg.storage.region)
