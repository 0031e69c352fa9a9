"""`ExtractionActor`: a Ray Data actor-pool UDF that owns one vLLM engine.

It builds the engine and pre-warms the job's compiled schemas before it takes a batch, then turns
each batch of documents into a batch of outcomes (rows and dead letters, tagged by `_kind`).
The output batch has exactly one line per input line, in order: nothing is dropped or duplicated.
"""

from __future__ import annotations

import json
import os
import socket
import time
from datetime import datetime, timezone
from typing import Any

import pyarrow as pa
import structlog

from pipeline import logs
from workers.bundled_model import resolve_model_path
from workers.classify import Outcome, check_input, classify, dead_letter, error_json
from workers.engine import VllmEngine, engine_arguments, has_accelerator
from workers.prompt import render_prompt
from workers.spec import ExtractionSpec

log = structlog.get_logger(__name__)

OUTCOME_SCHEMA_FIELDS = [
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


class ExtractionActor:
    def __init__(self, spec: ExtractionSpec, stats: Any = None) -> None:
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
        logs.configure()
        self.spec = spec
        self.contract = spec.contract
        self.schema_json = json.dumps(self.contract.json_schema, ensure_ascii=False)
        model_path = resolve_model_path(spec.model_path)
        self.engine = VllmEngine(
            **engine_arguments(
                model_path, spec.max_model_len, spec.tensor_parallel_size, spec.engine_kwargs, has_accelerator()
            )
        )
        self.max_model_len = min(spec.max_model_len, self.engine.max_model_len)
        compile_seconds = self.engine.warm(self.contract.json_schema)
        self.actor_name = f"{socket.gethostname()}:{os.getpid()}"
        log.info(
            "actor.warm",
            actor=self.actor_name,
            schema=f"{self.contract.name}@{self.contract.version}",
            schema_hash=self.contract.hash,
            engine_init_s=round(self.engine.init_seconds, 2),
            compile_s=round(compile_seconds, 3),
        )
        self.stats = stats
        if stats is not None:
            stats.record_actor.remote(
                {
                    "actor": self.actor_name,
                    "engine_init_s": self.engine.init_seconds,
                    "schema_compile_s": {self.contract.hash: compile_seconds},
                }
            )

    def __call__(self, batch: pa.Table) -> pa.Table:
        ids = batch.column(self.spec.id_column)
        texts = batch.column(self.spec.text_column).to_pylist()
        outcomes: list[Outcome | None] = [None] * len(texts)
        pending: list[int] = []
        prompts: list[list[int]] = []
        for i, text in enumerate(texts):
            early = check_input(text, None, self.spec.max_tokens, self.max_model_len)
            if early is None:
                ids_i = self.engine.prompt_token_ids(render_prompt(self.spec.prompt_template, text, self.schema_json))
                early = check_input(text, len(ids_i), self.spec.max_tokens, self.max_model_len)
                if early is None:
                    pending.append(i)
                    prompts.append(ids_i)
            outcomes[i] = early

        if prompts:
            started = time.perf_counter()
            try:
                generations = self.engine.generate(
                    prompts, self.contract.json_schema, self.spec.max_tokens, self.spec.temperature
                )
            except Exception as exc:  # noqa: BLE001 - dead-letter the batch, keep the job alive
                log.error("actor.engine_error", actor=self.actor_name, error=repr(exc), documents=len(prompts))
                for i in pending:
                    outcomes[i] = dead_letter("engine_error", f"{type(exc).__name__}: {exc}")
            else:
                id_values = ids.to_pylist()
                for i, generation in zip(pending, generations, strict=True):
                    context = {"document": texts[i], "document_id": id_values[i]}
                    outcomes[i] = classify(generation, self.contract, context)
                seconds = time.perf_counter() - started
                log.debug("actor.batch", documents=len(prompts), seconds=round(seconds, 2))
                if self.stats is not None:
                    self.stats.record_batch.remote(seconds)

        return self._to_table(ids, outcomes)

    def _to_table(self, ids: pa.ChunkedArray, outcomes: list[Outcome | None]) -> pa.Table:
        now = datetime.now(timezone.utc)
        done = [o for o in outcomes if o is not None]
        assert len(done) == len(outcomes), "every document must have an outcome"
        columns: dict[str, Any] = {
            "_kind": ["row" if o.is_row else "dead_letter" for o in done],
            "_record": [json.dumps(o.record, ensure_ascii=False) if o.is_row else None for o in done],
            "_reason": [o.reason for o in done],
            "_error": [error_json(o.error) for o in done],
            "_raw_output": [o.raw_output for o in done],
            "_finish_reason": [o.finish_reason for o in done],
            "_prompt_tokens": [o.prompt_tokens for o in done],
            "_output_tokens": [o.output_tokens for o in done],
            "_extracted_at": [now] * len(done),
        }
        arrays = [ids.combine_chunks() if isinstance(ids, pa.ChunkedArray) else ids]
        fields = [pa.field(self.spec.id_column, ids.type)]
        for f in OUTCOME_SCHEMA_FIELDS:
            arrays.append(pa.array(columns[f.name], type=f.type))
            fields.append(f)
        return pa.Table.from_arrays(arrays, schema=pa.schema(fields))
