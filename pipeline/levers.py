"""A job's levers as `extract validate` prints them and a run logs them: how each field is decoded, what the
prompt shows, and one warning per setting that measured worse (schemas.levers)."""

from __future__ import annotations

from dataclasses import dataclass, field

from pipeline.config import LoadedConfig
from schemas.asked_form import asked_form_warnings
from schemas.bounds import budget_bounds
from schemas.levers import FieldDecoding, field_decodings, summary, warnings
from schemas.repeats import has_lists
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
    lists: str = ""  # what schema_policy.repeated_items does to this job's lists


def job_levers(loaded: LoadedConfig) -> JobLevers:
    cfg = loaded.config
    policy = cfg.schema_policy
    per_row = loaded.contract.per_row
    bound, problems = policy.max_string_length, []
    if not per_row and cfg.model.constrained and "auto" in (policy.max_string_length, policy.max_array_items):
        budget = budget_bounds(loaded.contract.json_schema, cfg.model.max_tokens)
        problems = [f"schema {p} (schema_policy.max_string_length/max_array_items: auto; raise model.max_tokens or "
                    "bound the schema)" for p in budget.problems]
        bound = budget.max_string if bound == "auto" else bound
    decodings = [] if per_row or not cfg.model.constrained else field_decodings(
        loaded.contract.json_schema, policy.grounding, policy.ground_numbers, bound)
    fields = summary(decodings) if decodings else "each row's own schema" if per_row else "free (unconstrained)"
    count = len(loaded.examples)
    source = "none (examples: false)" if cfg.examples is False else "none (per-row schemas)" if per_row else \
        f"from {cfg.examples}" if cfg.examples else \
        "the schema's own (json_schema_extra examples)" if count else "none given"
    lists = "" if not per_row and not has_lists(loaded.contract.json_schema) else \
        "cut before their first repeated item" if policy.repeated_items == "cut" else "kept as decoded"
    asked = [] if per_row or not cfg.model.constrained else asked_form_warnings(
        loaded.contract.json_schema, policy.grounding, policy.ground_numbers)
    return JobLevers(policy.grounding, decodings, fields, count, source, resolve_mode(cfg.prompt_schema, bool(count)),
                     warnings(decodings, count if not per_row else -1, cfg.model.constrained) + problems + asked, lists)
