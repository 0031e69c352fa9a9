"""`CommittedOutput.runs`: the run records, oldest first; a file of `_runs/` that is not a record fails the read, or
with `skip_unreadable` (the report, reading beside live jobs) is left out."""

from __future__ import annotations

import pytest

from pipeline.output.committed import CommittedOutput
from pipeline.output.manifest import ManifestError, RunManifest


def _write(output: CommittedOutput, run_id: str, started_at: str) -> str:
    text = RunManifest(run_id, "job", "c.yaml", "h", "committed", started_at).to_json()
    output.storage.write_text(output.layout.run_manifest(run_id), text)
    return text


def test_runs_are_oldest_first_and_an_unreadable_record_fails_unless_skipped(tmp_path):
    output = CommittedOutput(str(tmp_path / "out"))
    _write(output, "b", "2026-01-01T00:00:00")
    _write(output, "a", "2026-01-02T00:00:00")
    _write(output, "c", "2026-01-01T00:00:00")  # the same start as b: then by run id
    assert [r.run_id for r in output.runs()] == ["b", "c", "a"]
    text = _write(output, "d", "2026-01-03T00:00:00")
    output.storage.write_text(output.layout.run_manifest("d"), text[: len(text) // 2])  # a live run writing it
    with pytest.raises(ManifestError, match="not a run manifest"):
        output.runs()
    assert [r.run_id for r in output.runs(skip_unreadable=True)] == ["b", "c", "a"]
    output.storage.write_text(output.layout.run_manifest("e"), '{"run_id": "e"}')  # no name, config, status
    assert [r.run_id for r in output.runs(skip_unreadable=True)] == ["b", "c", "a"]
