"""Where a job's output lives: the one place that names the files and folders under OUTPUT.

Under OUTPUT, per partition KEY (`dt=YYYY-MM-DD`, or none for an undated input):
    rows/KEY/part-<commit_id>.parquet          typed rows of one commit
    dead_letters/KEY/part-<commit_id>.parquet  dead letters of the same commit
    _partitions/KEY|all/manifest.json          the commit point: names the two files above (relative paths)
    _staging/KEY|all/<output_hash>/            the slices (and a split run's unit files) of a run in progress,
                                               never read as output (pipeline.output.slices)
    _staging/KEY|all/_commits/<commit_id>      a commit begun: its files are this output's to sweep
    _runs/<run_id>.json                        one manifest per run
    _lease.json                                the writer holding the output (see pipeline.lease)
    _job.json                                  the job the output belongs to (pipeline.job_identity)
    _partitions/_lease_generation              the last lease generation handed out (pipeline.lease)
    _previous/<time>/                          an earlier job's manifests and run records (--force-new-job)

Every commit writes files under names no other commit uses; the manifest write publishes them; files
the manifest does not name (superseded, or left by a crash) are deleted after the publish. See
docs/outputs.md.
"""

from __future__ import annotations

from dataclasses import dataclass

from pipeline.partition import WHOLE, Partition
from pipeline.storage import join

KINDS = ("rows", "dead_letters")  # the two tables of an output


@dataclass(frozen=True)
class OutputLayout:
    root: str

    def folder(self, kind: str, p: Partition) -> str:
        """The folder of one table's files for one partition (the output root's table folder if undated)."""
        return join(self.root, kind, p.key)

    def data_file(self, kind: str, p: Partition, commit_id: str) -> str:
        return join(self.folder(kind, p), f"part-{commit_id}.parquet")

    def _meta(self, p: Partition) -> str:
        return join(self.root, "_partitions", p.key or WHOLE)

    def manifest(self, p: Partition) -> str:
        return join(self._meta(p), "manifest.json")

    def success(self, p: Partition) -> str:
        """The marker format-1 outputs wrote after the manifest; no longer written, deleted on the next commit."""
        return join(self._meta(p), "_SUCCESS")

    def staging_root(self, p: Partition) -> str:
        return join(self.root, "_staging", p.key or WHOLE)

    def staging(self, p: Partition, output_hash: str) -> str:
        return join(self.staging_root(p), output_hash)

    def scratch(self, p: Partition) -> str:
        """Where a write to the partition's folders keeps its temporary files on a store without renames (S3)."""
        return join(self.staging_root(p), "_scratch")

    def commits_root(self, p: Partition) -> str:
        return join(self.staging_root(p), "_commits")

    def commit_marker(self, p: Partition, commit_id: str) -> str:
        return join(self.commits_root(p), commit_id)

    def retry_staging(self) -> str:
        """The scratch of `extract retry`: the documents it retries and its inner run's output."""
        return join(self.root, "_staging", "_retry")

    def runs_root(self) -> str:
        return join(self.root, "_runs")

    def run_manifest(self, run_id: str) -> str:
        return join(self.runs_root(), f"{run_id}.json")

    def partitions_root(self) -> str:
        return join(self.root, "_partitions")

    def lease(self) -> str:
        return join(self.root, "_lease.json")

    def job_file(self) -> str:
        """The fingerprint of the job the output belongs to (`pipeline.job_identity`)."""
        return join(self.root, "_job.json")

    def previous(self, stamp: str) -> str:
        """Where `--force-new-job` moves the old job's manifests and run records."""
        return join(self.root, "_previous", stamp)
