"""`ExtractionSpec`: everything an actor needs, as plain picklable data, built by the driver."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from schemas.contract import SchemaContract


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
    engine_kwargs: dict[str, Any] = field(default_factory=dict)
