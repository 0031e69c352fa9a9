"""`BatchExtractor`: one batch of documents in, one outcome per document out, in the same order.

It is the actor's whole job apart from owning the engine, so it takes the engine as an argument:
anything with `prompt_token_ids(text)` and `generate(prompts, json_schema, max_tokens, temperature)`.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from datetime import datetime, timezone
from typing import Any, Protocol

import pyarrow as pa
import structlog

from workers.classify import Outcome, check_input, classify, dead_letter, error_json
from workers.engine import Generation
from workers.prompt import render_prompt
from workers.spec import ExtractionSpec

log = structlog.get_logger(__name__)

OUTCOME_FIELDS = [
    pa.field("_kind", pa.string(), nullable=False),
    pa.field("_record", pa.string()),
    pa.field("_reason", pa.string()),
    pa.field("_error", pa.string()),
    pa.field("_raw_output", pa.string()),
    pa.field("_finish_reason", pa.string()),
    pa.field("_prompt_tokens", pa.int64()),
    pa.field("_output_tokens", pa.int64()),
    pa.field("_extracted_at", pa.timestamp("us", tz="UTC")),
]


class Engine(Protocol):
    def prompt_token_ids(self, text: str) -> list[int]: ...

    def generate(
        self, prompts: list[list[int]], json_schema: dict[str, Any], max_tokens: int, temperature: float
    ) -> list[Generation]: ...


class BatchExtractor:
    def __init__(self, engine: Engine, spec: ExtractionSpec, max_model_len: int) -> None:
        self.engine = engine
        self.spec = spec
        self.contract = spec.contract
        self.max_model_len = max_model_len
        self.schema_json = json.dumps(self.contract.json_schema, ensure_ascii=False)
        self.last_generation_s = 0.0

    def outcomes(self, ids: Sequence[Any], texts: Sequence[str | None]) -> list[Outcome]:
        results: list[Outcome | None] = [None] * len(texts)
        pending: list[int] = []
        prompts: list[list[int]] = []
        for i, text in enumerate(texts):
            early = check_input(text, None, self.spec.max_tokens, self.max_model_len)
            if early is None:
                assert text is not None
                token_ids = self.engine.prompt_token_ids(render_prompt(self.spec.prompt_template, text,
                                                                       self.schema_json))
                early = check_input(text, len(token_ids), self.spec.max_tokens, self.max_model_len)
                if early is None:
                    pending.append(i)
                    prompts.append(token_ids)
            results[i] = early

        self.last_generation_s = 0.0
        if prompts:
            started = time.perf_counter()
            try:
                generations = self.engine.generate(
                    prompts, self.contract.json_schema, self.spec.max_tokens, self.spec.temperature
                )
                if len(generations) != len(prompts):
                    raise RuntimeError(f"engine returned {len(generations)} outputs for {len(prompts)} prompts")
            except Exception as exc:  # noqa: BLE001 - dead-letter the batch, keep the job alive
                log.error("extract.engine_error", error=repr(exc), documents=len(prompts))
                for i in pending:
                    results[i] = dead_letter("engine_error", f"{type(exc).__name__}: {exc}")
            else:
                for i, generation in zip(pending, generations, strict=True):
                    results[i] = classify(generation, self.contract, {"document": texts[i], "document_id": ids[i]})
            self.last_generation_s = time.perf_counter() - started

        done = [o for o in results if o is not None]
        if len(done) != len(texts):
            raise RuntimeError("internal error: a document has no outcome")
        return done

    def __call__(self, batch: pa.Table) -> pa.Table:
        """Outcomes for a batch; every input column but the text (the id, the unit) passes through."""
        outcomes = self.outcomes(batch.column(self.spec.id_column).to_pylist(),
                                 batch.column(self.spec.text_column).to_pylist())
        passthrough = batch.drop_columns([self.spec.text_column])
        return outcome_table(passthrough, outcomes)


def outcome_table(passthrough: pa.Table, outcomes: list[Outcome]) -> pa.Table:
    now = datetime.now(timezone.utc)
    columns: dict[str, list[Any]] = {
        "_kind": ["row" if o.is_row else "dead_letter" for o in outcomes],
        "_record": [json.dumps(o.record, ensure_ascii=False) if o.is_row else None for o in outcomes],
        "_reason": [o.reason for o in outcomes],
        "_error": [error_json(o.error) for o in outcomes],
        "_raw_output": [o.raw_output for o in outcomes],
        "_finish_reason": [o.finish_reason for o in outcomes],
        "_prompt_tokens": [o.prompt_tokens for o in outcomes],
        "_output_tokens": [o.output_tokens for o in outcomes],
        "_extracted_at": [now] * len(outcomes),
    }
    table = passthrough.combine_chunks()
    for f in OUTCOME_FIELDS:
        table = table.append_column(f, pa.array(columns[f.name], type=f.type))
    return table
