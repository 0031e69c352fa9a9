"""What the run used (prompt, schema, model, config) and its `extract eval` scores, where they are found."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pipeline.storage import Storage, StorageError, join


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
    """The prompt, schema, model and config the run used. The run record names its config file; that file is
    read as it is now, and said to be unchanged only when its hash still matches the record's."""
    settings = [(k, str(record.get(k))) for k in ("model", "max_tokens", "constrained", "config_hash", "input_uri",
                                                  "output_uri") if record.get(k) is not None]
    path = Path(str(record.get("config_path", "")))
    prompt = text = None
    text_column = "text"
    note = f"the config file {path} is not readable from here"
    if record.get("config_path") and path.is_file():
        text = path.read_text()
        try:
            from pipeline.config import load_config

            loaded = load_config(str(path))
            prompt, text_column = loaded.config.prompt, loaded.config.input.text_column
            same = loaded.config_hash == record.get("config_hash")
            note = (f"{path}: unchanged since the run (config hash {loaded.config_hash})" if same else
                    f"{path} as it is now, which is not what the run used: the file changed since, or the run had "
                    f"overrides (--set, --limit, --output); hash {loaded.config_hash}, the run's "
                    f"{record.get('config_hash')}")
        except Exception as exc:  # noqa: BLE001 - a config that no longer loads is still worth showing
            note = f"{path} as it is now (it no longer loads: {exc})"
    return RunContext(prompt, text, note, dict(record.get("schema") or {}), record.get("model"), settings,
                      text_column)


def eval_scores(storage: Storage, output_uri: str, run_id: str) -> dict[str, Any] | None:
    """`extract eval`'s result for the run (OUTPUT/_eval/RUN_ID/eval.json), if it was evaluated."""
    path = join(output_uri, "_eval", run_id, "eval.json")
    try:
        if not storage.exists(path):
            return None
        return json.loads(storage.read_text(path))
    except (OSError, json.JSONDecodeError, StorageError):
        return None
