"""`ExtractionSpec`: everything an actor needs, as plain picklable data, built by the driver; and the parts each
stage reads of it (`EngineSpec`, `PromptSpec`, `DecodeSpec`, `SchemaSpec`: `spec.engine`, `spec.prompt`, …)."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

from schemas.contract import SchemaContract


@dataclass(frozen=True)
class RetryPolicy:
    """`model.retry` (pipeline.config.RetryConfig): up to `attempts` outputs per document, the first that passes
    kept. A further attempt adds the refused output and its errors as chat turns (`feedback`) and samples at
    `temperature`; above 0 each attempt has its own seed, from `seed`, the document id and the attempt."""

    attempts: int = 1
    feedback: bool = True
    temperature: float = 0.0
    on: tuple[str, ...] = ("semantic_invalid", "schema_violation", "invalid_json")
    seed: int = 0


@dataclass(frozen=True)
class ExtractionSpec:
    run_id: str
    id_column: str
    text_column: str
    prompt_template: str
    contract: SchemaContract
    model_path: str
    model_name: str
    max_tokens: int
    temperature: float
    max_model_len: int
    tensor_parallel_size: int = 1
    sequences_in_flight: int = 1  # batch_size × batches_in_flight: what the KV cache is sized for on CPU
    kv_sample: Any = None  # workers.memory.KvSample: the input's sizing document, for the CPU KV cache
    engine_kwargs: dict[str, Any] = field(default_factory=dict)
    constrained: bool = True  # false: free generation (a baseline); outputs are checked all the same
    backend: str = "xgrammar"  # the structured-output backend of this actor pool's engines
    # Per-row schemas: the column holding each row's schema (JSON text, or a key into schema_table).
    schema_column: str | None = None
    schema_table: dict[str, dict[str, Any]] = field(default_factory=dict)
    schema_limits: Any = None  # schemas.limits.SchemaLimits for per-row schemas
    # Per-row schema values routed off the default backend (the rest go to `default_backend`'s pool).
    routes: dict[str, str] = field(default_factory=dict)
    default_backend: str = "xgrammar"
    # Schema hashes no backend compiles, under `schema_policy.on_unsupported: dead_letter`.
    unsupported: dict[str, str] = field(default_factory=dict)
    # Prompting (workers.prompt): how the schema is shown without {schema}, a system prompt, few-shot
    # (document, compact output) turns, a chat template; and extra vLLM SamplingParams (model.sampling).
    prompt_schema: str = "none"
    system: str | None = None
    examples: tuple[tuple[str, str], ...] = ()
    chat_template: str | None = None
    sampling: dict[str, Any] = field(default_factory=dict)
    # schema_policy.max_string_length, max_array_items: an int, "auto" (fitted to max_tokens per schema) or None
    grammar_bounds: tuple[int | str | None, int | str | None] = (None, None)
    retry: RetryPolicy = field(default_factory=RetryPolicy)  # model.retry
    grounding: str = "marked"  # schema_policy.grounding (auto, marked, off): fields narrowed to each document's values
    ground_numbers: bool = False  # schema_policy.ground_numbers: plain number fields grounded as well
    # schema_policy.grounding.locale (else input.locale): how documents are read, `auto` detects; .screens
    grounding_locale: str = "auto"
    grounding_screens: tuple[str, ...] = ("placeholders", "sent", "labels")
    repeated_items: str = "keep"  # schema_policy.repeated_items (cut, keep): lists end before a repeated item
    min_confidence: float | None = None  # output.min_confidence: a row below it is a `low_confidence` dead letter
    calibration: dict[str, Any] | None = None  # output.calibration's content (workers.calibrator.Calibrator)
    # input.long_documents (windows, dead_letter) and its window settings (workers.windows.WindowPolicy); a spec
    # made without them refuses a long document, as before windows
    long_documents: str = "dead_letter"
    windows: Any = None  # workers.windows.WindowPolicy

    @property
    def engine(self) -> EngineSpec:
        return engine_part(self)

    @property
    def prompt(self) -> PromptSpec:
        return prompt_part(self)

    @property
    def decode(self) -> DecodeSpec:
        return decode_part(self)

    @property
    def schema(self) -> SchemaSpec:
        return schema_part(self)


# ---------------------------------------------------------------- the parts each stage reads
#
# `ExtractionSpec` travels to the actors as one flat, picklable record (the driver builds it in
# `pipeline.dataflow.build_spec`); each stage reads only its own part of it, below.


@dataclass(frozen=True)
class EngineSpec:
    """What the engine is started and sampled with (`workers.engine`)."""

    model_path: str
    model_name: str
    max_model_len: int
    tensor_parallel_size: int
    sequences_in_flight: int
    kv_sample: Any
    engine_kwargs: dict[str, Any]
    backend: str
    sampling: dict[str, Any]
    grammar_bounds: tuple[int | str | None, int | str | None]


@dataclass(frozen=True)
class PromptSpec:
    """What a document's prompt is built from (`workers.prompt.prompt_for`)."""

    prompt_template: str
    prompt_schema: str
    system: str | None
    examples: tuple[tuple[str, str], ...]
    chat_template: str | None
    long_documents: str  # a document too long for one prompt: windows (several prompts) or dead_letter
    windows: Any  # workers.windows.WindowPolicy


@dataclass(frozen=True)
class DecodeSpec:
    """How outputs are decoded and judged (`workers.extractor`, `workers.classify`)."""

    max_tokens: int
    temperature: float
    constrained: bool
    retry: RetryPolicy
    grounding: str
    ground_numbers: bool
    grounding_locale: str
    grounding_screens: tuple[str, ...]
    repeated_items: str
    min_confidence: float | None
    calibration: dict[str, Any] | None


@dataclass(frozen=True)
class SchemaSpec:
    """Which schema each row is held to, and which pool serves it (`workers.extractor`, `workers.actor`)."""

    contract: SchemaContract
    schema_column: str | None
    schema_table: dict[str, dict[str, Any]]
    schema_limits: Any
    routes: dict[str, str]
    default_backend: str
    unsupported: dict[str, str]


def _part(cls: type, spec: ExtractionSpec) -> Any:
    return cls(**{f.name: getattr(spec, f.name) for f in fields(cls)})


def engine_part(spec: ExtractionSpec) -> EngineSpec:
    return _part(EngineSpec, spec)


def prompt_part(spec: ExtractionSpec) -> PromptSpec:
    return _part(PromptSpec, spec)


def decode_part(spec: ExtractionSpec) -> DecodeSpec:
    return _part(DecodeSpec, spec)


def schema_part(spec: ExtractionSpec) -> SchemaSpec:
    return _part(SchemaSpec, spec)
