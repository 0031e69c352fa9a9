"""What a run record keeps of its job, so that reading an output never has to load the job (issue 55).

`job_snapshot`: what `extract report` shows of the job (its config, prompt, schema, text and id columns), taken at
run time and passed through the one redactor (`pipeline.secrets`) before it is written: the report reads it from
the run record and never imports the job's schema module or reads its config file.

`job_fingerprint`: what makes an output one job's (its schema hash, partitioning and id column); the output keeps
the first commit's (`pipeline.output.layout.OutputLayout.job_file`) and a run of another job is refused."""

from __future__ import annotations

import json
from typing import Any

import yaml

from pipeline.partition import is_templated
from pipeline.secrets import redact, redact_text

# The snapshot's text parts are cut to this many characters (a run record stays small, and bounded to read).
MAX_SNAPSHOT_TEXT = 64 * 1024


def _cut(text: str) -> str:
    return text if len(text) <= MAX_SNAPSHOT_TEXT else text[:MAX_SNAPSHOT_TEXT] + f"\n… (cut at {MAX_SNAPSHOT_TEXT})"


def job_snapshot(loaded: Any) -> dict[str, Any]:
    """The redacted snapshot of the job a run record carries: config (as YAML), prompt, JSON Schema, columns."""
    cfg = loaded.config
    schema = json.dumps(redact(dict(loaded.contract.json_schema)), indent=1, sort_keys=True, default=str)
    return {
        "config": _cut(redact_text(yaml.safe_dump(redact(dict(loaded.raw)), sort_keys=False, allow_unicode=True))),
        "prompt": _cut(redact_text(str(cfg.prompt))) if cfg.prompt is not None else None,
        "json_schema": _cut(schema),
        "text_column": str(cfg.input.text_column),
        "id_column": str(cfg.input.id_column),
        "config_hash": loaded.config_hash,
    }


def job_fingerprint(loaded: Any) -> dict[str, str]:
    """What makes an output one job's: the schema's hash, the partitioning (by day or whole) and the id column."""
    return {"schema_hash": str(loaded.contract.hash),
            "partitioning": "daily" if is_templated(loaded.config.input.uri) else "whole",
            "id_column": str(loaded.config.input.id_column)}


def fingerprint_differences(recorded: dict[str, Any], current: dict[str, str]) -> list[str]:
    """What differs between the output's recorded fingerprint and this run's, one phrase each."""
    return [f"{key} {recorded.get(key)!r} (the output's) vs {value!r} (this run's)"
            for key, value in current.items() if key in recorded and str(recorded.get(key)) != value]
