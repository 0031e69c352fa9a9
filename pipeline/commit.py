"""Staging and committing partitions.

During a run each finished unit is staged as one Parquet file of raw outcomes under
`_staging/<partition>/<output_hash>/`. When every unit of a partition is staged, the partition is
committed: the staged outcomes are compacted into `rows/<partition>/part-0.parquet` and
`dead_letters/<partition>/part-0.parquet` (each written whole, then made visible in one step: a
rename locally, a completed upload on S3), then `manifest.json`, then `_SUCCESS`, then the staging
is deleted. A reader therefore sees the previous file or the new one, never half of one.

Staging under another output hash (the model, prompt or schema changed) is deleted, never reused.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import structlog

from pipeline.manifest import AccountingError
from pipeline.partition import OutputLayout, Partition
from pipeline.sink import RecordTables
from pipeline.storage import Storage, join
from pipeline.units import PartitionInput
from schemas.contract import SchemaContract

log = structlog.get_logger(__name__)


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
                 model_name: str, output_hash: str, run_id: str) -> None:
        self.storage = storage
        self.layout = layout
        self.contract = contract
        self.model_name = model_name
        self.output_hash = output_hash
        self.run_id = run_id

    def is_committed(self, p: Partition) -> bool:
        return self.storage.exists(self.layout.success(p))

    def _scratch(self, p: Partition) -> str:
        return join(self.layout.staging_root(p), "_scratch")

    def _unit_file(self, p: Partition, unit_id: str) -> str:
        return join(self.layout.staging(p, self.output_hash), f"unit-{unit_id}.parquet")

    def _named_files(self, p: Partition) -> set[str]:
        """The data files the committed manifest names, deleted once a new commit supersedes them."""
        path = self.layout.manifest(p)
        if not self.storage.exists(path):
            return set()
        files = json.loads(self.storage.read_text(path)).get("files", {})
        return {f for f in files.values() if isinstance(f, str)}

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
        p = pinput.partition
        fs = self.storage.arrow_fs()
        id_field = pinput.schema.field(pinput.id_column)
        tables = RecordTables(self.contract, id_field, self.run_id, self.model_name)
        rows = dead = 0
        reasons: Counter[str] = Counter()
        tokens = Counter()
        rows_path, dead_path = self.layout.rows_file(p), self.layout.dead_letters_file(p)
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
        result = PartitionResult(
            partition=p.label, status="committed", input_rows=pinput.rows_to_read, rows=rows, dead_letters=dead,
            dead_letters_by_reason=dict(sorted(reasons.items())), units=len(pinput.units),
            units_resumed=resumed_units, seconds=round(time.perf_counter() - started, 3), tokens=dict(tokens),
        )
        manifest: dict[str, Any] = {
            "partition": p.label,
            "committed_at": datetime.now(timezone.utc).isoformat(),
            "run_id": self.run_id,
            "input_uri": p.input_uri,
            "input_files": pinput.files,
            "files": {"rows": rows_path, "dead_letters": dead_path},
            "schema": {"name": self.contract.name, "version": self.contract.version, "hash": self.contract.hash},
            "model": self.model_name,
            "output_hash": self.output_hash,
            **{k: v for k, v in result.__dict__.items() if k not in {"partition", "status", "error"}},
        }
        previous = self._named_files(p)
        self.storage.write_text(self.layout.manifest(p), json.dumps(manifest, indent=2, default=str))
        self.storage.write_text(self.layout.success(p), self.run_id)
        for old in previous - {rows_path, dead_path}:  # e.g. part-<run_id> files of an `extract retry`
            self.storage.delete(old)
        self.discard_staging(p)
        log.info("partition.committed", partition=p.label, rows=rows, dead_letters=dead)
        return result
