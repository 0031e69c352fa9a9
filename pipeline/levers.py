"""A job's levers as `extract validate` prints them and a run logs them: how each field is decoded, what the
prompt shows, and one warning per setting that measured worse (schemas.levers)."""

from __future__ import annotations

from dataclasses import dataclass, field

from pipeline.config import LoadedConfig
from schemas.levers import FieldDecoding, field_decodings, summary, warnings
from workers.prompt import resolve_mode


@dataclass(frozen=True)
class JobLevers:
    grounding: str
    decodings: list[FieldDecoding]
    fields: str  # the one-line summary of `decodings`
    examples: int
    example_source: str
    schema_shown: str
    warnings: list[str] = field(default_factory=list)


def job_levers(loaded: LoadedConfig) -> JobLevers:
    cfg = loaded.config
    policy = cfg.schema_policy
    per_row = loaded.contract.per_row
    decodings = [] if per_row or not cfg.model.constrained else field_decodings(
        loaded.contract.json_schema, policy.grounding, policy.ground_numbers, policy.max_string_length)
    fields = summary(decodings) if decodings else "each row's own schema" if per_row else "free (unconstrained)"
    count = len(loaded.examples)
    source = "none (examples: false)" if cfg.examples is False else "none (per-row schemas)" if per_row else \
        f"from {cfg.examples}" if cfg.examples else \
        "the schema's own (json_schema_extra examples)" if count else "none given"
    return JobLevers(policy.grounding, decodings, fields, count, source, resolve_mode(cfg.prompt_schema, bool(count)),
                     warnings(decodings, count if not per_row else -1, cfg.model.constrained))
