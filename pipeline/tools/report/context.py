"""What the run used (prompt, schema, model, config) and its `extract eval` scores, where they are found."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from pipeline.storage import Storage, StorageError, join
from workers.secrets import redact_text


@dataclass
class RunContext:
    prompt: str | None
    config_text: str | None
    config_note: str
    schema: dict[str, Any]
    model: str | None
    settings: list[tuple[str, str]]
    text_column: str = "text"  # the job's input.text_column, where its config still loads (else the usual name)


def run_context(record: dict[str, Any]) -> RunContext:
    """The prompt, schema, model and config the run used, from the redacted job snapshot its run record carries
    (`pipeline.job_identity.job_snapshot`). Reading an output runs no code: the job's config file is never read
    again and its schema module never imported, whatever the record names (a record can be tampered with)."""
    settings = [(k, redact_text(str(record.get(k)))) for k in ("model", "max_tokens", "constrained", "config_hash",
                                                               "input_uri", "output_uri") if record.get(k) is not None]
    job = record.get("job") if isinstance(record.get("job"), dict) else {}
    text_column = str(job.get("text_column") or "text")
    if not job:
        note = ("this run record holds no snapshot of its job (written before snapshots were recorded); the report "
                "never loads the job's config or code")
        return RunContext(None, None, note, _schema(record), _text(record.get("model")), settings, text_column)
    config = _text(job.get("config"))
    prompt = _text(job.get("prompt"))
    note = f"the job as the run saw it, secrets masked (config hash {_text(job.get('config_hash'))})"
    return RunContext(prompt, config, note, _schema(record), _text(record.get("model")), settings, text_column)


def _text(value: Any) -> str | None:
    return None if value is None else redact_text(str(value))


def _schema(record: dict[str, Any]) -> dict[str, Any]:
    schema = record.get("schema")
    return {str(k): _text(v) for k, v in schema.items()} if isinstance(schema, dict) else {}


def eval_scores(storage: Storage, output_uri: str, run_id: str) -> dict[str, Any] | None:
    """`extract eval`'s result for the run (OUTPUT/_eval/RUN_ID/eval.json), if it was evaluated."""
    path = join(output_uri, "_eval", run_id, "eval.json")
    try:
        if not storage.exists(path):
            return None
        return json.loads(storage.read_text(path))
    except (OSError, json.JSONDecodeError, StorageError):
        return None
