"""`run_job`: check the config and input, run the plan on Ray, write, account, commit, and report."""

from __future__ import annotations

import os
import secrets
import time
from datetime import datetime, timezone

import ray
import structlog

from pipeline.config import ConfigError, LoadedConfig
from pipeline.manifest import RunManifest
from pipeline.plan import build_dataset, build_spec
from pipeline.progress import Progress
from pipeline.sink import DEAD_LETTER_COLUMNS, ROW_LINEAGE_COLUMNS, OutputWriter
from pipeline.source import InputPlan, plan_input
from pipeline.stats import RunStats

log = structlog.get_logger(__name__)


def new_run_id(name: str) -> str:
    return f"{name}-{datetime.now(timezone.utc):%Y%m%dT%H%M%SZ}-{secrets.token_hex(3)}"


def preflight(loaded: LoadedConfig) -> InputPlan:
    """Everything that can be checked without Ray: input files, columns, and name clashes."""
    cfg = loaded.config
    plan = plan_input(loaded.input_uri, cfg.input.id_column, cfg.input.text_column, cfg.input.limit)
    id_column = cfg.input.id_column
    fields = set(loaded.contract.layout.schema.names)
    if id_column in fields:
        raise ConfigError(f"input.id_column: {id_column!r} is also a field of schema {loaded.contract.name}")
    if id_column in DEAD_LETTER_COLUMNS or id_column in ROW_LINEAGE_COLUMNS:
        raise ConfigError(f"input.id_column: {id_column!r} is a reserved output column name")
    if "://" in loaded.output_uri:
        raise ConfigError(f"output.uri: {loaded.output_uri!r}: only local paths are supported by this version")
    return plan


def connect_ray() -> None:
    if ray.is_initialized():
        return
    address = os.environ.get("RAY_ADDRESS")
    ray.init(address=address or None, log_to_driver=True, include_dashboard=False if not address else None,
             logging_level="WARNING")


def run_job(loaded: LoadedConfig, run_id: str | None = None) -> RunManifest:
    cfg = loaded.config
    plan = preflight(loaded)
    run_id = run_id or new_run_id(cfg.name)
    structlog.contextvars.bind_contextvars(run_id=run_id)
    manifest = RunManifest(
        run_id=run_id,
        name=cfg.name,
        config_path=str(loaded.path),
        config_hash=loaded.config_hash,
        status="running",
        started_at=datetime.now(timezone.utc).isoformat(),
        input_uri=loaded.input_uri,
        input_files=len(plan.files),
        output_uri=loaded.output_uri,
        schema={"name": loaded.contract.name, "version": loaded.contract.version, "hash": loaded.contract.hash},
        model=cfg.model.path,
        input_rows=plan.rows_to_read,
    )
    log.info("run.start", job=cfg.name, documents=plan.rows_to_read, files=len(plan.files),
             schema=f"{loaded.contract.name}@{loaded.contract.version}", output=loaded.output_uri)
    started = time.perf_counter()
    connect_ray()
    stats = RunStats.remote()
    spec = build_spec(loaded, run_id)
    id_field = plan.schema.field(cfg.input.id_column)
    writer = OutputWriter(loaded.output_uri, run_id, loaded.contract, id_field, cfg.model.path)
    progress = Progress(plan.rows_to_read, cfg.name)
    generation_s: float | None = None
    try:
        dataset = build_dataset(loaded, plan, spec, stats)
        for batch in dataset.iter_batches(batch_format="pyarrow", batch_size=None):
            writer.write(batch)
            progress.update(writer.row_count + writer.dead_letter_count, writer.dead_letter_count)
        progress.close()
        manifest.rows = writer.row_count
        manifest.dead_letters = writer.dead_letter_count
        manifest.dead_letters_by_reason = dict(sorted(writer.reasons.items()))
        manifest.tokens = {"prompt": writer.prompt_tokens, "output": writer.output_tokens}
        snapshot = ray.get(stats.snapshot.remote())
        manifest.actors = snapshot["actors"]
        generation_s = snapshot["generation_s"]
        manifest.check_accounting()
        writer.commit()
        manifest.status = "committed"
    except BaseException as exc:
        progress.close()
        writer.abort()
        manifest.status = "failed"
        manifest.error = f"{type(exc).__name__}: {exc}"
        raise
    finally:
        total = time.perf_counter() - started
        inits = [a["engine_init_s"] for a in manifest.actors]
        compiles = [s for a in manifest.actors for s in a["schema_compile_s"].values()]
        manifest.timings = {
            "engine_init_s": round(max(inits), 3) if inits else None,
            "schema_compile_s": round(max(compiles), 3) if compiles else None,
            "generation_s": round(generation_s, 3) if generation_s is not None else None,
            "first_output_s": round(progress.first_output_s, 3) if progress.first_output_s else None,
            "total_s": round(total, 3),
            "docs_per_s": round(manifest.rows_processed() / total, 3) if total else None,
        }
        manifest.finished_at = datetime.now(timezone.utc).isoformat()
        manifest.save(loaded.output_uri)
        ray.kill(stats, no_restart=True)
        structlog.contextvars.unbind_contextvars("run_id")
    log.info("run.committed", rows=manifest.rows, dead_letters=manifest.dead_letters, seconds=round(total, 1))
    return manifest
