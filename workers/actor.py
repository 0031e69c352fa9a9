"""`ExtractionActor`: a Ray Data actor-pool UDF that owns one vLLM engine.

It builds the engine and pre-warms the job's compiled schema before it takes a batch, then hands
each batch to a `BatchExtractor`, which returns one outcome line per input line, in order.
"""

from __future__ import annotations

import os
import socket
import time
from typing import Any

import pyarrow as pa
import structlog

from pipeline import logs
from workers.bundled_model import resolve_model_path
from workers.engine import VllmEngine, engine_arguments, has_accelerator
from workers.extractor import BatchExtractor
from workers.spec import ExtractionSpec

log = structlog.get_logger(__name__)


def _node_id() -> str | None:
    try:
        import ray

        return ray.get_runtime_context().get_node_id()
    except Exception:  # noqa: BLE001 - outside Ray (tests, tools) there is no node
        return None


class ExtractionActor:
    def __init__(self, spec: ExtractionSpec, stats: Any = None) -> None:
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
        logs.configure()
        self.stats = stats
        self.name = f"{socket.gethostname()}:{os.getpid()}"
        contract = spec.contract
        engine = VllmEngine(
            **engine_arguments(
                resolve_model_path(spec.model_path),
                spec.max_model_len,
                spec.tensor_parallel_size,
                spec.engine_kwargs,
                has_accelerator(),
            )
        )
        compile_seconds = engine.warm(contract.json_schema)
        self.extractor = BatchExtractor(engine, spec, min(spec.max_model_len, engine.max_model_len))
        log.info("actor.warm", actor=self.name, schema=f"{contract.name}@{contract.version}",
                 schema_hash=contract.hash, engine_init_s=round(engine.init_seconds, 2),
                 compile_s=round(compile_seconds, 3))
        if stats is not None:
            stats.record_actor.remote({"actor": self.name, "engine_init_s": engine.init_seconds,
                                       "schema_compile_s": {contract.hash: compile_seconds},
                                       "ready_unix": time.time(), "node": _node_id()})

    def __call__(self, batch: pa.Table) -> pa.Table:
        table = self.extractor(batch)
        if self.stats is not None and self.extractor.last_generation_s:
            self.stats.record_batch.remote(self.extractor.last_generation_s)
        return table
