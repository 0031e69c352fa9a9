"""What a run record keeps of its job, so that reading an output never has to load the job (issue 55).

`job_snapshot`: what `extract report` shows of the job (its config, prompt, schema, text and id columns), taken at
run time and passed through the one redactor (`workers.secrets`) before it is written: the report reads it from
the run record and never imports the job's schema module or reads its config file.

`job_fingerprint`: what makes an output one job's (its schema hash, partitioning and id column); the output keeps
the first commit's (`pipeline.output.layout.OutputLayout.job_file`) and a run of another job is refused."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from typing import Any

import structlog
import yaml

from pipeline.config import ConfigError
from pipeline.output.layout import OutputLayout
from pipeline.output.links import refuse_links
from pipeline.output.manifest import ManifestError, PartitionManifest
from pipeline.output.metadata import bounded_json
from pipeline.partition import is_templated
from pipeline.storage import Storage, join
from workers.secrets import redact, redact_text

log = structlog.get_logger(__name__)

# The snapshot's text parts are cut to this many characters (a run record stays small, and bounded to read).
MAX_SNAPSHOT_TEXT = 64 * 1024


def _cut(text: str) -> str:
    return text if len(text) <= MAX_SNAPSHOT_TEXT else text[:MAX_SNAPSHOT_TEXT] + f"\n… (cut at {MAX_SNAPSHOT_TEXT})"


def job_snapshot(loaded: Any) -> dict[str, Any]:
    """The redacted snapshot of the job a run record carries: config (as YAML), prompt, JSON Schema, columns."""
    cfg = loaded.config
    schema = json.dumps(redact(dict(loaded.contract.json_schema)), indent=1, sort_keys=True, default=str)
    return {
        "config": _cut(redact_text(yaml.safe_dump(redact(dict(loaded.raw)), sort_keys=False, allow_unicode=True))),
        "prompt": _cut(redact_text(str(cfg.prompt))) if cfg.prompt is not None else None,
        "json_schema": _cut(schema),
        "text_column": str(cfg.input.text_column),
        "id_column": str(cfg.input.id_column),
        "config_hash": loaded.config_hash,
        "examples": [{"document": _cut(redact_text(str(e.document))), "output": _cut(redact_text(str(output)))}
                     for e, output in (loaded.examples or [])],
    }


def job_fingerprint(loaded: Any) -> dict[str, str]:
    """What makes an output one job's: the schema's hash, the partitioning (by day or whole) and the id column."""
    return {"schema_hash": str(loaded.contract.hash),
            "partitioning": "daily" if is_templated(loaded.config.input.uri) else "whole",
            "id_column": str(loaded.config.input.id_column)}


def fingerprint_differences(recorded: dict[str, Any], current: dict[str, str]) -> list[str]:
    """What differs between the output's recorded fingerprint and this run's, one phrase each."""
    return [f"{key} {recorded.get(key)!r} (the output's) vs {value!r} (this run's)"
            for key, value in current.items() if key in recorded and str(recorded.get(key)) != value]


def recorded_fingerprint(storage: Storage, root: str) -> dict[str, Any] | None:
    """The job fingerprint the output records; for an output committed before fingerprints were recorded, what its
    partition manifests say (their schema hash, dated or not); None for an output nothing was committed to."""
    layout = OutputLayout(root)
    path = layout.job_file()
    if storage.exists(path):
        try:
            raw = bounded_json(storage.read_text(path), "job fingerprint")
        except ValueError as exc:
            raise ManifestError(f"{path}: not a job fingerprint ({exc}); remove it to record this job's") from None
        return {str(k): str(v) for k, v in raw.items()}
    manifests = [m for m in storage.list_files(layout.partitions_root()) if m.endswith("/manifest.json")]
    if not manifests:
        return None
    newest = PartitionManifest.from_json(storage.read_text(sorted(manifests)[-1]), root, manifests[-1])
    found = {"partitioning": "daily" if newest.is_dated else "whole"}
    if newest.schema.get("hash"):
        found["schema_hash"] = str(newest.schema["hash"])
    return found


def claim_output(storage: Storage, root: str, loaded: Any, new_job: bool = False) -> None:
    """Refuse (`ConfigError`, exit 2, one line naming what differs) a run of another job than the one the output
    belongs to; record this job's fingerprint where none is. `new_job` (`--force-new-job`): the output starts a
    fresh version for this job; the old job's manifests and run records move to `_previous/<time>/`, its data files
    stay where they are, unread (no manifest names them)."""
    path = OutputLayout(root).job_file()
    refuse_links(root, path, write=True)
    current = job_fingerprint(loaded)
    recorded = recorded_fingerprint(storage, root)
    differs = fingerprint_differences(recorded or {}, current)
    if differs and not new_job:
        raise ConfigError(f"output {root} belongs to another job: {'; '.join(differs)}; write to another "
                          "output.uri, or pass --force-new-job to start a fresh version of this output for this job")
    if differs:
        _set_aside(storage, root)
    if differs or recorded != current or not storage.exists(path):
        storage.write_text(path, json.dumps(current, indent=2))


def _set_aside(storage: Storage, root: str) -> None:
    """Move the old job's manifests, run records and fingerprint under `_previous/<time>/`."""
    layout = OutputLayout(root)
    previous = layout.previous(datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S%fZ"))
    for top in (layout.partitions_root(), layout.runs_root(), layout.job_file()):
        for path in storage.list_files(top):
            if path.endswith("/_lease_generation"):
                continue  # lease generations only grow, whichever job holds the output
            storage.write_bytes(join(previous, path[len(root.rstrip("/")) + 1:]), storage.read_bytes(path))
            storage.delete(path)
    log.warning("output.new_job", output=root, previous=previous)
