"""The engine's and the workers' sections of `extract.yaml` (model, its sampling, retries and simulated engine;
workers): strict Pydantic models, part of the contract `pipeline.config` loads and re-exports."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class SamplingConfig(_Strict):
    """`model.sampling`: vLLM `SamplingParams` passed through, by name (an unknown name fails before Ray starts)."""

    repetition_penalty: float | None = Field(default=None, gt=0)
    frequency_penalty: float | None = Field(default=None, ge=-2, le=2)
    presence_penalty: float | None = Field(default=None, ge=-2, le=2)
    top_p: float | None = Field(default=None, gt=0, le=1)
    top_k: int | None = Field(default=None, ge=-1)
    min_p: float | None = Field(default=None, ge=0, le=1)
    seed: int | None = None
    stop: list[str] | None = None

    def options(self) -> dict[str, Any]:
        return {k: v for k, v in self.model_dump().items() if v is not None}


RETRY_REASONS = ("semantic_invalid", "schema_violation", "invalid_json", "truncated")


class RetryConfig(_Strict):
    """`model.retry`: more attempts, in the same batch, for a document whose output the checks refuse.

    Each further attempt is the same prompt with the refused output as the assistant's turn and the checks'
    errors as a user turn (`feedback`), and/or sampled again at `temperature` with a seed of its own (from the
    document id and the attempt number, so a rerun samples the same). The first output that passes is the
    row; a document that fails every attempt is one dead letter: the last attempt's reason and errors, and
    how many attempts ran."""

    attempts: int = Field(default=1, ge=1, le=10)  # 1: one attempt (no retry)
    feedback: bool = True  # the refused output and the errors as extra chat turns ("instructor max_retries")
    temperature: float | None = Field(default=None, ge=0)  # None: model.temperature; > 0: resample, seeded
    on: list[Literal[RETRY_REASONS]] = Field(  # type: ignore[valid-type]
        default_factory=lambda: ["semantic_invalid", "schema_violation", "invalid_json"])

    def policy(self, base_temperature: float, seed: int | None) -> Any:
        from workers.spec import RetryPolicy

        return RetryPolicy(attempts=self.attempts, feedback=self.feedback,
                           temperature=base_temperature if self.temperature is None else self.temperature,
                           on=tuple(dict.fromkeys(self.on)), seed=seed or 0)


SIMULATED = "simulated"  # the model.path of the simulated engine (workers.simulated)


class SimulatedMix(_Strict):
    """`model.simulated.mix`: the share of documents whose output is truncated, invalid or refused (the rest rows)."""

    truncated: float = Field(default=0.0, ge=0, le=1)
    invalid: float = Field(default=0.0, ge=0, le=1)  # half not JSON, half JSON that breaks the schema
    refused: float = Field(default=0.0, ge=0, le=1)

    @model_validator(mode="after")
    def at_most_all(self) -> SimulatedMix:
        if self.truncated + self.invalid + self.refused > 1:
            raise ValueError("the shares of truncated, invalid and refused outputs add up to more than 1")
        return self


class SimulatedConfig(_Strict):
    """`model.simulated` (with `model.path: simulated`): the simulated engine's settings (workers.simulated). It
    writes made-up records, so a run needs `allow: true` to write them to output.uri."""

    allow: bool = False
    tokens_per_s: float = Field(default=0.0, ge=0)  # per sequence; 0: answers at once (the pipeline's own ceiling)
    ttft_s: float = Field(default=0.0, ge=0)  # time to the first token, per request
    max_seqs: int | None = Field(default=None, gt=0)  # decoding at once; unset: batch_size × batches_in_flight
    output_tokens: int | None = Field(default=None, gt=0)  # per output; unset: its characters / 4
    init_s: float = Field(default=0.0, ge=0)  # the engine's start-up (a model load), slept once per actor
    outputs: str = "schema"  # "schema": records generated from the JSON Schema; else a gold JSONL file
    # mix: gold where `outputs` has the document, else schema-made records (which the sample's validators refuse);
    # valid: records that pass the schema and the job's validators where one can be made; gold: `outputs` only
    answers: Literal["mix", "valid", "gold"] = "mix"
    seed: int = 0  # the draws of records and log-probabilities (the same per document and seed)
    mix: SimulatedMix = Field(default_factory=SimulatedMix)


class ModelConfig(_Strict):
    path: str = "bundled"
    max_tokens: int = Field(default=512, gt=0)
    temperature: float = Field(default=0.0, ge=0.0)
    # auto: the model's own limit, from its config (8192 for the bundled model); resolved when the job is loaded
    max_model_len: Annotated[int, Field(gt=0)] | Literal["auto"] = "auto"
    # false: free generation with the same prompt, no grammar (a baseline; outputs are still checked).
    constrained: bool = True
    engine_kwargs: dict[str, Any] = Field(default_factory=dict)
    chat_template: str | None = None  # a Jinja chat template file, for a model whose tokenizer has none
    sampling: SamplingConfig = Field(default_factory=SamplingConfig)
    retry: RetryConfig = Field(default_factory=RetryConfig)
    simulated: SimulatedConfig | None = None  # model.path: simulated only

    @model_validator(mode="before")
    @classmethod
    def simulated_is_unconstrained(cls, data: Any) -> Any:
        """The simulated engine applies no grammar, so its job runs unconstrained (no grammar compile either)."""
        if isinstance(data, dict) and data.get("path") == SIMULATED:
            if data.get("constrained", False) is not False:
                raise ValueError("model.constrained: the simulated engine (model.path: simulated) applies no "
                                 "grammar; leave model.constrained unset or false")
            return {**data, "constrained": False, "simulated": data.get("simulated") or {}}
        return data

    @model_validator(mode="after")
    def simulated_settings(self) -> ModelConfig:
        if self.simulated is not None and self.path != SIMULATED:
            raise ValueError("model.simulated: only with model.path: simulated")
        if self.path == SIMULATED and self.engine_kwargs:
            raise ValueError("model.engine_kwargs: the simulated engine takes none (its settings are model.simulated)")
        return self


class WorkersConfig(_Strict):
    actors: int = Field(default=1, gt=0)
    gpus_per_actor: float = Field(default=0, ge=0)
    cpus_per_actor: float = Field(default=1, gt=0)
    batch_size: int = Field(default=32, gt=0)
    # Batches each actor works on at once. Their requests share one running engine (continuous batching),
    # so a new batch joins sequences still decoding instead of waiting for the engine to drain.
    batches_in_flight: int = Field(default=4, gt=0)
    # How often Ray restarts an actor whose engine died (its batches are redone on the fresh engine); past
    # that the run fails, keeping what it staged. Bounded, so a batch that kills its engine every time
    # cannot retry forever.
    max_restarts: int = Field(default=3, ge=0)

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
