"""Planning a run: what it does with each partition, decided once per partition, here and nowhere else.

For each partition of the run (`plan_run`), in order:
- **committed** (its manifest is there, and not `--force`): compared with the job first (`check_unchanged`: another
  output hash stops the run before anything starts), then with its input by fingerprint, from a listing and each
  file's version alone (`units.input_fingerprint`): no footer and no id is read. Same input and nothing more
  selected: **skipped**. A limited commit (`input.limit`) that this run selects more of: **run** from where it
  stopped (`offset`). Another input (re-delivered files): **run** whole again.
- otherwise **run**: its files, columns and units cut from Parquet metadata (`units.cut_units`), then its ids
  checked (`ids.check_ids`, a full read of the id column), the only partitions whose ids are read.
- a partition whose input cannot be planned is **failed** (or raises, with `fail_fast`).

`pipeline.run` acts on the plan (sweeps the skipped, resumes the staged, streams the rest); `pipeline.dataflow`
builds the Ray Data graph that runs it. What planning reads of the job is `pipeline.stage_config.PlanningConfig`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from datetime import date

import structlog

from pipeline.config import ConfigError
from pipeline.ids import check_ids
from pipeline.output.commit import check_unchanged, more_selected, skip_note
from pipeline.output.manifest import PartitionManifest
from pipeline.partition import Partition, partition_for
from pipeline.stage_config import InputSource, PlanningConfig
from pipeline.storage import StorageError, storage_for
from pipeline.units import PartitionInput, cut_units, input_fingerprint

log = structlog.get_logger(__name__)

RUN, SKIPPED, FAILED = "run", "skipped", "failed"


@dataclass
class PartitionPlan:
    """What a run does with one partition: `RUN` its `input`, or `SKIPPED`/`FAILED` with a `note` saying why."""

    partition: Partition
    action: str
    input: PartitionInput | None = None
    note: str | None = None
    committed: PartitionManifest | None = None  # the manifest a skipped partition keeps


def plan_input(source: InputSource, partition: Partition, offset: int = 0) -> PartitionInput:
    """One partition to process: its units cut from metadata (the first `offset` documents are committed already,
    by a limited run) and its ids checked, the committed ones included."""
    storage = storage_for(partition.input_uri, source.s3_settings)
    pinput = cut_units(storage, partition, source.id_column, source.text_column, source.limit,
                       source.checkpoint_rows, source.schema_column, offset=offset)
    check_ids(storage, dataclasses.replace(pinput, units=pinput.covered + pinput.units))
    return pinput


def plan_run(planning: PlanningConfig, days: list[date | None], committed: dict[str, PartitionManifest],
             fail_fast: bool) -> list[PartitionPlan]:
    """Each partition's plan, in the order of `days`. `committed`: the manifests of those committed (empty with
    `--force`); one of another job raises `ChangedJobError` before anything is planned."""
    source = planning.source
    partitions = [partition_for(source.uri, d) for d in days]
    check_unchanged([(p, committed[p.label]) for p in partitions if p.label in committed], planning.output_hash,
                    planning.parts, planning.output_uri)
    plans = []
    for p in partitions:
        manifest = committed.get(p.label)
        offset = 0 if manifest is None else _resume_at(source, p, manifest)
        if manifest is not None and offset is None:
            plans.append(PartitionPlan(p, SKIPPED, note=skip_note(manifest), committed=manifest))
            continue
        try:
            plans.append(PartitionPlan(p, RUN, plan_input(source, p, offset or 0)))
        except (ConfigError, StorageError) as exc:
            if fail_fast:
                raise
            plans.append(PartitionPlan(p, FAILED, note=str(exc)))
    return plans


def _resume_at(source: InputSource, p: Partition, manifest: PartitionManifest) -> int | None:
    """For a committed partition: None to skip it; else the documents to keep (a limited commit continued), or 0
    when its input changed since the commit (another fingerprint) and it is rerun whole."""
    storage = storage_for(p.input_uri, source.s3_settings)
    try:
        current = input_fingerprint(storage, p) if manifest.input_fingerprint else None
    except (ConfigError, StorageError):
        current = None  # the input of a committed day is gone: keep what was committed
    if current and current != manifest.input_fingerprint:
        log.warning("partition.input_changed", partition=p.label, committed_by=manifest.run_id)
        return 0
    more = more_selected(manifest, _legacy_total(source, p, manifest), source.limit)
    if more:
        log.info("partition.continue", partition=p.label, committed=manifest.input_rows, to_read=more)
        return manifest.input_rows
    return None


def _legacy_total(source: InputSource, p: Partition, manifest: PartitionManifest) -> PartitionInput | None:
    """A manifest written before format 3 records no input total: its input's, cut from the footers (no id read);
    None when the manifest has it, or the input is gone."""
    if manifest.input_total_rows is not None:
        return None
    try:
        return cut_units(storage_for(p.input_uri, source.s3_settings), p, source.id_column, source.text_column,
                         None, source.checkpoint_rows, source.schema_column)
    except (ConfigError, StorageError):
        return None
