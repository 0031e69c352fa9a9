"""`model.max_model_len: auto`: the model's own context length, read from its config.

A local folder's `config.json` (the bundled model's converted folder: `max_position_embeddings` 8192), else the
Hugging Face config of a hub id (transformers' AutoConfig, from the local cache first). The keys are the ones
models write their limit under (a multimodal model's under its `text_config`). Where none can be read, the
previous default (4096), and `source` says so. The simulated engine has no limit of its own: 4096.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

FALLBACK = 4096
LIMIT_KEYS = ("max_position_embeddings", "n_positions", "max_sequence_length", "seq_length", "max_seq_len")


def limit_of(config: dict[str, Any]) -> int | None:
    """The context length a model config states, or None."""
    for node in (config, config.get("text_config") or {}):
        for key in LIMIT_KEYS:
            value = node.get(key) if isinstance(node, dict) else None
            if isinstance(value, int) and not isinstance(value, bool) and value > 0:
                return value
    return None


@functools.lru_cache(maxsize=32)
def model_limit(model_path: str) -> tuple[int, str]:
    """(the context length of `model_path` — `bundled`, `simulated`, a folder or a hub id —, where it came from)."""
    if model_path == "simulated":
        return FALLBACK, "the simulated engine (no limit of its own)"
    if model_path == "bundled":
        from workers.bundled_model import resolve_model_path

        model_path = resolve_model_path(model_path)
    local = Path(model_path) / "config.json"
    try:
        if local.is_file():
            found = limit_of(json.loads(local.read_text(encoding="utf-8")))
        else:
            from transformers import AutoConfig

            found = limit_of(AutoConfig.from_pretrained(model_path).to_dict())
    except Exception as exc:  # noqa: BLE001 - an unreadable config: the previous default, said so
        return FALLBACK, f"the model's config could not be read ({type(exc).__name__}); the default {FALLBACK}"
    if found is None:
        return FALLBACK, f"the model's config states no context length; the default {FALLBACK}"
    return found, "the model's config"
