"""`RunManifest`: what one run read, wrote and spent, saved as OUTPUT/_runs/<run_id>.json."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any


class AccountingError(RuntimeError):
    """input_rows != rows + dead_letters: a document was lost or duplicated, so nothing is committed."""


@dataclass
class RunManifest:
    run_id: str
    name: str
    config_path: str
    config_hash: str
    status: str
    started_at: str
    finished_at: str | None = None
    input_uri: str = ""
    input_files: int = 0
    output_uri: str = ""
    schema: dict[str, str] = field(default_factory=dict)
    model: str = ""
    max_tokens: int | None = None
    constrained: bool = True
    schema_checks: list[dict[str, Any]] = field(default_factory=list)  # per schema: backend, compile, unenforced
    input_rows: int = 0
    rows: int = 0
    dead_letters: int = 0
    dead_letters_by_reason: dict[str, int] = field(default_factory=dict)
    tokens: dict[str, int] = field(default_factory=dict)
    timings: dict[str, float | None] = field(default_factory=dict)
    actors: list[dict[str, Any]] = field(default_factory=list)
    partitions: list[dict[str, Any]] = field(default_factory=list)
    error: str | None = None

    def check_accounting(self) -> None:
        if self.input_rows != self.rows + self.dead_letters:
            raise AccountingError(
                f"accounting failed: input_rows {self.input_rows} != "
                f"rows {self.rows} + dead_letters {self.dead_letters}"
            )

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2, sort_keys=False, default=str)
