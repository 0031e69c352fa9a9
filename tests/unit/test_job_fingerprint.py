"""Issue 55: an output belongs to one job. The first run records the job's fingerprint (schema hash, partitioning,
id column); a run of another job into the output is refused before Ray starts (exit 2, one line naming what
differs) unless --force-new-job, which moves the old job's manifests aside and starts a fresh version."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipeline import exit_codes
from pipeline.cli.main import main
from pipeline.config import ConfigError, load_config
from pipeline.job_identity import claim_output, job_fingerprint, recorded_fingerprint
from pipeline.storage import storage_for
from tests.conftest import write_config
from tests.unit.test_output_integrity import committed

OTHER_SCHEMA = {"title": "other", "type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}


def other_job(tmp_path, **keys):
    """Another job (another schema, dated input) writing to the same output folder."""
    folder = tmp_path / "other"
    (folder / "in").mkdir(parents=True)
    pq.write_table(pa.table({"doc_id": ["x"], "text": ["n is 3"]}), folder / "in" / "2026-11-01.parquet")
    (folder / "other.json").write_text(json.dumps(OTHER_SCHEMA))
    cfg = write_config(folder, **{"input.uri": str(folder / "in" / "{date}.parquet"), "output.uri":
                                  str(tmp_path / "out"), "schema": None, "schema_file": str(folder / "other.json"),
                                  **keys})
    raw = cfg.read_text().replace("schema: null\n", "")
    cfg.write_text(raw)
    return cfg


def test_the_first_claim_records_the_fingerprint_and_the_same_job_passes(tmp_path):
    cfg = committed(tmp_path)
    loaded = load_config(cfg)
    storage = storage_for(loaded.output_uri)
    claim_output(storage, loaded.output_uri, loaded)
    assert recorded_fingerprint(storage, loaded.output_uri) == job_fingerprint(loaded)
    claim_output(storage, loaded.output_uri, loaded)  # the same job again: passes


def test_an_output_committed_before_fingerprints_is_known_by_its_manifests(tmp_path):
    cfg = committed(tmp_path)
    loaded = load_config(cfg)
    found = recorded_fingerprint(storage_for(loaded.output_uri), loaded.output_uri)
    assert found == {"partitioning": "whole", "schema_hash": loaded.contract.hash}


def test_a_run_of_another_job_is_refused_in_one_line(tmp_path, capsys):
    committed(tmp_path)
    cfg = other_job(tmp_path)
    loaded = load_config(cfg)
    with pytest.raises(ConfigError, match="belongs to another job") as refused:
        claim_output(storage_for(loaded.output_uri), loaded.output_uri, loaded)
    message = str(refused.value)
    assert "schema_hash" in message and "partitioning 'whole'" in message and "\n" not in message
    assert main(["run", str(cfg), "--date", "2026-11-01"]) == exit_codes.USAGE
    errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "--force-new-job" in errors[0]
    assert not (tmp_path / "out" / "_partitions" / "dt=2026-11-01").exists()


def test_another_id_column_is_another_job(tmp_path):
    cfg = committed(tmp_path)
    loaded = load_config(cfg)
    storage = storage_for(loaded.output_uri)
    claim_output(storage, loaded.output_uri, loaded)
    renamed = load_config(cfg, {"input.id_column": "ticket"})
    with pytest.raises(ConfigError, match="id_column 'doc_id'"):
        claim_output(storage, renamed.output_uri, renamed)


def test_force_new_job_starts_a_fresh_version_and_keeps_the_old_one_aside(tmp_path):
    committed(tmp_path)
    out = tmp_path / "out"
    cfg = other_job(tmp_path)
    loaded = load_config(cfg)
    storage = storage_for(loaded.output_uri)
    claim_output(storage, loaded.output_uri, loaded, new_job=True)
    assert recorded_fingerprint(storage, loaded.output_uri) == job_fingerprint(loaded)
    assert not (out / "_partitions" / "all" / "manifest.json").exists()
    (previous,) = (out / "_previous").iterdir()
    assert (previous / "_partitions" / "all" / "manifest.json").is_file()
    assert list((out / "rows").glob("*.parquet"))  # the old data files stay, unread


@pytest.mark.parametrize("inside", ["in/out", "in"])
def test_an_output_inside_its_input_folder_is_refused(tmp_path, inside):
    """Issue 55: the second run read the first run's rows and dead letters as documents."""
    from pipeline.run import preflight

    (tmp_path / "in").mkdir()
    pq.write_table(pa.table({"doc_id": ["a"], "text": ["A-1"]}), tmp_path / "in" / "docs.parquet")
    cfg = write_config(tmp_path, **{"input.uri": str(tmp_path / "in"), "output.uri": str(tmp_path / inside)})
    with pytest.raises(ConfigError, match="is inside input.uri"):
        preflight(load_config(cfg))
    beside = write_config(tmp_path, **{"input.uri": str(tmp_path / "in"), "output.uri": str(tmp_path / "in-out")})
    assert preflight(load_config(beside)).rows_to_read == 1
