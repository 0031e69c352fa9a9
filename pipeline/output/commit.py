"""Staging and committing partitions: one commit point per partition, for both tables.

During a run each finished unit is staged as one Parquet file of raw outcomes under
`_staging/<partition>/<output_hash>/`. When every unit of a partition is staged, the partition is committed:
1. the outcomes are compacted into `rows/<key>/part-<commit_id>.parquet` and
   `dead_letters/<key>/part-<commit_id>.parquet`, names no other commit uses (each written whole under a
   hidden name, then renamed locally or copied on S3, so no reader ever sees half a file);
2. `publish()` writes the partition manifest naming both files (relative to the output root). That single
   write (a rename locally, one PUT on S3) is the commit point: before it readers see the old state, after
   it the new one, both tables together;
3. `sweep()` deletes the partition's data files the manifest does not name (the superseded commit's, or
   those of a commit that died before its manifest), then the staging.

A process killed at any step leaves the old manifest naming the old files, or the new one naming the new
files; the next commit of the partition (a run or a retry) sweeps what the dead one left.
Staging under another output hash (the model, prompt or schema changed) is deleted, never reused.
"""

from __future__ import annotations

import hashlib
import json
import secrets
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import structlog

from pipeline.config import ConfigError
from pipeline.output.layout import KINDS, OutputLayout
from pipeline.output.manifest import AccountingError, PartitionManifest, read_manifest, relative
from pipeline.output.tables import RecordTables
from pipeline.partition import Partition
from pipeline.storage import Storage, join
from pipeline.units import PartitionInput
from schemas.contract import SchemaContract

log = structlog.get_logger(__name__)

Hook = Callable[[str], None]  # called with a step name as a commit passes it (tests kill the process there)


def new_commit_id(run_id: str) -> str:
    """Names one commit's files: the run id (lineage) and a token (a run may commit a partition again)."""
    return f"{run_id}-{secrets.token_hex(3)}"


def output_parts(decisive: dict[str, Any]) -> dict[str, str]:
    """Each setting that decides the output (model keys one by one), hashed: what `changes()` compares."""
    flat: dict[str, Any] = {}
    for key, value in decisive.items():
        if key == "model" and isinstance(value, dict):
            flat.update({f"model.{k}": v for k, v in value.items()})
        else:
            flat[key] = value
    return {k: hashlib.sha256(json.dumps(v, sort_keys=True, default=str).encode()).hexdigest()[:12]
            for k, v in sorted(flat.items())}


def changes(old: dict[str, str], new: dict[str, str]) -> list[str]:
    """The settings whose hashes differ (empty when the old manifest did not record them)."""
    if not old:
        return []
    return sorted(k for k in set(old) | set(new) if old.get(k) != new.get(k))


def sweep(storage: Storage, layout: OutputLayout, p: Partition, manifest: PartitionManifest | None) -> list[str]:
    """Delete the partition's data files that `manifest` does not name (all of them if nothing is committed),
    and a format-1 `_SUCCESS` marker. Only a lease holder may call it: it would delete a running commit's files."""
    named = manifest.uris(layout.root) if manifest else set()
    removed = []
    for kind in KINDS:
        folder = layout.folder(kind, p)
        for path in storage.list_files(folder):
            parent, name = path.rsplit("/", 1)
            if parent == folder and path not in named and (name.startswith("part-") or name.startswith(".part-")):
                storage.delete(path)
                removed.append(path)
    if manifest and storage.exists(layout.success(p)):
        storage.delete(layout.success(p))
    if removed:
        log.info("partition.swept", partition=p.label, files=len(removed))
    return removed


def publish(storage: Storage, layout: OutputLayout, p: Partition, manifest: PartitionManifest,
            hook: Hook | None = None) -> None:
    """The commit point: one write of the manifest; then every file it does not name is deleted."""
    storage.write_text(layout.manifest(p), manifest.to_json())
    if hook:
        hook("manifest_written")
    sweep(storage, layout, p, manifest)
    if hook:
        hook("swept")


@dataclass
class PartitionResult:
    partition: str
    status: str  # committed | skipped | failed
    input_rows: int = 0
    rows: int = 0
    dead_letters: int = 0
    dead_letters_by_reason: dict[str, int] = field(default_factory=dict)
    units: int = 0
    units_resumed: int = 0
    seconds: float = 0.0
    error: str | None = None
    tokens: dict[str, int] = field(default_factory=dict)


class PartitionCommitter:
    def __init__(self, storage: Storage, layout: OutputLayout, contract: SchemaContract,
                 model_name: str, output_hash: str, run_id: str, parts: dict[str, str] | None = None,
                 hook: Hook | None = None, guard: Callable[[], None] | None = None) -> None:
        self.storage = storage
        self.layout = layout
        self.contract = contract
        self.model_name = model_name
        self.output_hash = output_hash
        self.run_id = run_id
        self.parts = parts or {}
        self.hook = hook
        self.guard = guard  # raises if this writer lost the output's lease: then nothing is published

    def committed(self, p: Partition) -> PartitionManifest | None:
        return read_manifest(self.storage, self.layout, p)

    def is_committed(self, p: Partition) -> bool:
        return self.storage.exists(self.layout.manifest(p))

    def _step(self, name: str) -> None:
        if self.hook:
            self.hook(name)

    def _scratch(self, p: Partition) -> str:
        return join(self.layout.staging_root(p), "_scratch")

    def _unit_file(self, p: Partition, unit_id: str) -> str:
        return join(self.layout.staging(p, self.output_hash), f"unit-{unit_id}.parquet")

    def prepare(self, p: Partition, fresh: bool) -> set[str]:
        """Delete staging that cannot be reused; return the unit ids already staged for this output."""
        current = self.layout.staging(p, self.output_hash) + "/"
        staged = set()
        for path in self.storage.list_files(self.layout.staging_root(p)):
            name = path.rsplit("/", 1)[-1]
            if fresh or not path.startswith(current):
                self.storage.delete(path)
            elif name.startswith("unit-") and name.endswith(".parquet"):
                staged.add(name[len("unit-"):-len(".parquet")])
        return staged

    def discard_staging(self, p: Partition) -> None:
        self.storage.delete_prefix(self.layout.staging_root(p))

    def stage(self, p: Partition, unit_id: str, outcomes: pa.Table) -> None:
        outcomes = outcomes.append_column("_run_id", pa.array([self.run_id] * outcomes.num_rows, pa.string()))
        path = self._unit_file(p, unit_id)
        with self.storage.atomic_output(path, self._scratch(p)) as target:
            pq.write_table(outcomes, self.storage.arrow_path(target), filesystem=self.storage.arrow_fs())

    def commit(self, pinput: PartitionInput, started: float, resumed_units: int) -> PartitionResult:
        """Compact the staged units into this commit's two files, publish them with one manifest write,
        then delete what the manifest no longer names."""
        p = pinput.partition
        commit_id = new_commit_id(self.run_id)
        rows_path = self.layout.data_file("rows", p, commit_id)
        dead_path = self.layout.data_file("dead_letters", p, commit_id)
        rows, dead, reasons, tokens = self._compact(pinput, rows_path, dead_path)
        self._step("files_written")
        result = PartitionResult(
            partition=p.label, status="committed", input_rows=pinput.rows_to_read, rows=rows, dead_letters=dead,
            dead_letters_by_reason=dict(sorted(reasons.items())), units=len(pinput.units),
            units_resumed=resumed_units, seconds=round(time.perf_counter() - started, 3), tokens=dict(tokens),
        )
        manifest = PartitionManifest(
            partition=p.label, run_id=self.run_id, commit_id=commit_id,
            files={kind: relative(self.layout.root, path) for kind, path in (("rows", rows_path),
                                                                             ("dead_letters", dead_path))},
            input_rows=result.input_rows, rows=rows, dead_letters=dead, output_hash=self.output_hash,
            committed_at=datetime.now(timezone.utc).isoformat(), input_uri=p.input_uri, input_files=pinput.files,
            input_fingerprint=getattr(pinput, "fingerprint", None),
            schema={"name": self.contract.name, "version": self.contract.version, "hash": self.contract.hash},
            model=self.model_name, output_parts=self.parts, dead_letters_by_reason=result.dead_letters_by_reason,
            units=result.units, units_resumed=resumed_units, seconds=result.seconds, tokens=result.tokens,
        )
        if self.guard:
            self.guard()
        publish(self.storage, self.layout, p, manifest, self.hook)
        self.discard_staging(p)
        self._step("staging_discarded")
        log.info("partition.committed", partition=p.label, rows=rows, dead_letters=dead, commit_id=commit_id)
        return result

    def _compact(self, pinput: PartitionInput, rows_path: str,
                 dead_path: str) -> tuple[int, int, Counter[str], Counter[str]]:
        """Write the staged units' rows and dead letters to the two files; check rows + dead == input."""
        p = pinput.partition
        fs = self.storage.arrow_fs()
        tables = RecordTables(self.contract, pinput.schema.field(pinput.id_column), self.run_id, self.model_name)
        rows = dead = 0
        reasons: Counter[str] = Counter()
        tokens: Counter[str] = Counter()
        scratch = self._scratch(p)
        with self.storage.atomic_output(rows_path, scratch) as rows_tmp, \
                self.storage.atomic_output(dead_path, scratch) as dead_tmp:
            rows_writer = pq.ParquetWriter(self.storage.arrow_path(rows_tmp), tables.rows_schema,
                                           filesystem=fs, compression="zstd")
            dead_writer = pq.ParquetWriter(self.storage.arrow_path(dead_tmp), tables.dead_schema,
                                           filesystem=fs, compression="zstd")
            try:
                for unit in pinput.units:
                    staged = pq.read_table(self.storage.arrow_path(self._unit_file(p, unit.id)), filesystem=fs)
                    if staged.num_rows != unit.rows:
                        raise AccountingError(f"partition {p.label}: unit {unit.id} has {staged.num_rows} "
                                              f"outcomes for {unit.rows} documents")
                    typed, letters = tables.split(staged)
                    if typed.num_rows:
                        rows_writer.write_table(typed)
                    if letters.num_rows:
                        dead_writer.write_table(letters)
                    self._step("compacting")
                    rows += typed.num_rows
                    dead += letters.num_rows
                    reasons.update(letters.column("reason").to_pylist())
                    tokens["prompt"] += pc.sum(staged.column("_prompt_tokens")).as_py() or 0
                    tokens["output"] += pc.sum(staged.column("_output_tokens")).as_py() or 0
            finally:
                rows_writer.close()
                dead_writer.close()
            if rows + dead != pinput.rows_to_read:
                raise AccountingError(f"partition {p.label}: input_rows {pinput.rows_to_read} != rows {rows} + "
                                      f"dead_letters {dead}")
        return rows, dead, reasons, tokens


class ChangedJobError(ConfigError):
    """Partitions were committed under another output hash: rerunning would silently keep the old output."""


def check_unchanged(committed: list[tuple[Partition, PartitionManifest]], output_hash: str, parts: dict[str, str],
                    output_uri: str) -> None:
    """Raise `ChangedJobError` naming what changed if any committed partition has another output hash."""
    changed = [(p, m) for p, m in committed if m.output_hash != output_hash]
    if not changed:
        return
    what = sorted({c for _, m in changed for c in changes(m.output_parts, parts)})
    said = ", ".join(what) if what else "the output hash (the manifest predates per-setting hashes)"
    labels = [p.label for p, _ in changed]
    shown = ", ".join(labels[:3]) + (f" and {len(labels) - 3} more" if len(labels) > 3 else "")
    raise ChangedJobError(
        f"partition {shown} of {output_uri} was committed by a different job: {said} changed "
        f"(output hash {changed[0][1].output_hash} -> {output_hash}). Rerun with --force to replace it, "
        f"or set output.uri to a new output")
