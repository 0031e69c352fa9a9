"""Canonical JSON and the schema hash: the bottom of `schemas/`, imported by the contract, the bounds and the
validator alike (so none of them imports another for it)."""

from __future__ import annotations

import hashlib
import json
from typing import Any


def canonical_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def schema_hash(json_schema: dict[str, Any]) -> str:
    """A stable hash of a JSON Schema's content: key order and whitespace do not change it."""
    return hashlib.sha256(canonical_json(json_schema).encode()).hexdigest()[:16]
