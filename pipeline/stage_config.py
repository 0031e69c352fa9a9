"""What each stage of a run reads of the job: typed, frozen slices of `LoadedConfig`, built once where the job is
run (`pipeline.run`), so that planning, routing and the actors' spec take what they read and nothing more. The
actors get `workers.spec.ExtractionSpec`, built from `ActorConfig` by `pipeline.dataflow.build_spec`; the dataflow
reads the job's `workers` section alone.

- `InputSource`: where the documents are and how a partition is cut into units (`pipeline.planning.plan_input`).
- `PlanningConfig`: that, and the job's identity a committed partition is held to (`pipeline.planning.plan_run`).
- `RoutingConfig`: the model, the schema policy, the schemas and the few-shot examples routing checks
  (`pipeline.routing.route_schemas`).
- `ActorConfig`: what an extraction actor reads of the job: the prompt, the model, the schemas and their policy,
  the input's columns and windows, the confidence settings (`pipeline.dataflow.build_spec`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pipeline.config import InputConfig, SchemaPolicyConfig
from pipeline.config_model import ModelConfig, WorkersConfig
from pipeline.output.commit import output_parts
from pipeline.storage import S3Settings
from schemas.contract import SchemaContract

if TYPE_CHECKING:
    from pipeline.config import LoadedConfig


@dataclass(frozen=True)
class InputSource:
    """A job's input, as planning cuts it: `uri` resolved (a `{date}` template, a folder or a file), its columns,
    `input.limit`, and `output.checkpoint_rows` (the documents of a unit)."""

    uri: str
    s3_settings: S3Settings
    id_column: str
    text_column: str
    schema_column: str | None
    limit: int | None
    checkpoint_rows: int

    @classmethod
    def of(cls, loaded: LoadedConfig) -> InputSource:
        source = loaded.config.input
        return cls(uri=loaded.input_uri, s3_settings=loaded.s3_settings, id_column=source.id_column,
                   text_column=source.text_column, schema_column=source.schema_column, limit=source.limit,
                   checkpoint_rows=loaded.config.output.checkpoint_rows)


@dataclass(frozen=True)
class PlanningConfig:
    """What planning a run reads: its input, and the job's output hash and its parts (`output_parts`), which a
    committed partition is compared with (another job stops the run before anything starts)."""

    source: InputSource
    output_uri: str
    output_hash: str
    parts: dict[str, str]  # output_parts(decisive): a hash per part of what decides an outcome

    @classmethod
    def of(cls, loaded: LoadedConfig) -> PlanningConfig:
        return cls(source=InputSource.of(loaded), output_uri=loaded.output_uri, output_hash=loaded.output_hash,
                   parts=output_parts(loaded.decisive))


@dataclass(frozen=True)
class RoutingConfig:
    """What routing the schemas reads: the model whose tokenizer compiles them (`model_path` resolved), whether it
    decodes under a grammar at all, `schema_policy` and its limits, the job's schema or the per-row column and
    table, and the few-shot examples the routed grammar must accept; `source` (the config file) names its errors."""

    model_path: str
    constrained: bool
    policy: SchemaPolicyConfig
    limits: Any  # schemas.limits.SchemaLimits
    contract: SchemaContract
    schema_column: str | None
    schema_table: dict[str, dict[str, Any]]
    examples: list[tuple[Any, str]]  # (schemas.examples.Example, its output as the grammar emits it)
    source: str

    @classmethod
    def of(cls, loaded: LoadedConfig) -> RoutingConfig:
        cfg = loaded.config
        return cls(model_path=loaded.model_path, constrained=cfg.model.constrained, policy=cfg.schema_policy,
                   limits=loaded.schema_limits, contract=loaded.contract, schema_column=cfg.input.schema_column,
                   schema_table=loaded.schema_table, examples=loaded.examples, source=str(loaded.path))


@dataclass(frozen=True)
class ActorConfig:
    """What the actors' spec is built from: the prompt and how it shows the schema, the model (`model_path`
    resolved) and its chat template, the job's `input` (columns, long documents and windows), `workers` (the
    sequences an engine holds), `schema_policy`, the schemas and limits, the few-shot examples, the grounding
    locale, and the confidence settings with their calibration (`output.calibration`'s content, checked)."""

    prompt: str
    prompt_schema: str
    system: str | None
    model_path: str
    model: ModelConfig
    chat_template: str | None
    input: InputConfig
    workers: WorkersConfig
    policy: SchemaPolicyConfig
    contract: SchemaContract
    schema_table: dict[str, dict[str, Any]]
    limits: Any  # schemas.limits.SchemaLimits
    examples: list[tuple[Any, str]]  # (schemas.examples.Example, its output as the grammar emits it)
    grounding_locale: str
    confidence: bool
    min_confidence: float | None
    calibration: dict[str, Any] | None

    @classmethod
    def of(cls, loaded: LoadedConfig) -> ActorConfig:
        cfg = loaded.config
        return cls(prompt=cfg.prompt, prompt_schema=cfg.prompt_schema, system=cfg.system, model_path=loaded.model_path,
                   model=cfg.model, chat_template=loaded.chat_template, input=cfg.input, workers=cfg.workers,
                   policy=cfg.schema_policy, contract=loaded.contract, schema_table=loaded.schema_table,
                   limits=loaded.schema_limits, examples=loaded.examples, grounding_locale=cfg.grounding_locale,
                   confidence=cfg.output.confidence, min_confidence=cfg.output.min_confidence,
                   calibration=loaded.calibration)
