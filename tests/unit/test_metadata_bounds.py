"""Issue 55: every piece of metadata read from an output is parsed with bounds. A partition manifest nested 200,000
deep, a run record holding `[]` or nested deep, a record whose fields have the wrong types: exit 8 in one line,
never a traceback; a report skips such a run record, a run refuses to read over it."""

from __future__ import annotations

import json

import pytest

from pipeline import exit_codes
from pipeline.cli.main import main
from pipeline.output.manifest import ManifestError, PartitionManifest, RunManifest
from pipeline.output.metadata import MAX_DEPTH, MetadataBoundsError, bounded_json, nesting
from tests.unit.test_output_integrity import committed, manifest_path

DEEP = "[" * 200_000 + "]" * 200_000


@pytest.mark.parametrize(("text", "problem"), [
    (DEEP, "nests 200000 levels"), ("[]", "not the object"), ('{"a": NaN}', "NaN"), ('{"a": Infinity}', "Infinity"),
    ('"x"', "not the object"), ('{"a": ' + "[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1) + "}", "levels"),
])
def test_bounded_json_refuses_in_one_line(text, problem):
    with pytest.raises(MetadataBoundsError, match=problem) as refused:
        bounded_json(text, "run record")
    assert "\n" not in str(refused.value)


def test_brackets_inside_strings_do_not_count():
    assert nesting('{"a": "[[[[[[[[{{{{", "b": [1, {"c": "]]]"}]}') == 3


@pytest.mark.parametrize("text", [DEEP, "[]", '{"run_id": "r", "partitions": "x"}', '{"run_id": ["r"]}',
                                  '{"rows": true}'])
def test_a_bad_run_record_is_a_manifest_error(text):
    with pytest.raises(ManifestError, match="not a run manifest"):
        RunManifest.from_json(text, "_runs/x.json")


def test_a_deep_partition_manifest_is_exit_8(tmp_path, capsys):
    cfg = committed(tmp_path)
    manifest_path(tmp_path).write_text(DEEP)
    with pytest.raises(ManifestError):
        PartitionManifest.from_json(DEEP, str(tmp_path / "out"))
    assert main(["query", str(cfg), "SELECT count(*) FROM rows"]) == exit_codes.OUTPUT_CORRUPT
    errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "nests 200000 levels" in errors[0]


@pytest.mark.parametrize("text", ["[]", DEEP])
def test_a_report_over_a_bad_run_record_skips_it(tmp_path, capsys, text):
    from tests.unit.test_report import write_output

    root = write_output(tmp_path / "output")
    (root / "_runs" / "x.json").write_text(text)
    assert main(["report", str(root), "--out", str(tmp_path / "pages")]) == 0
    assert "Traceback" not in capsys.readouterr().err


def test_a_run_record_of_wrong_types_is_refused_by_the_history(tmp_path):
    from pipeline.output.committed import CommittedOutput
    from pipeline.storage import storage_for

    cfg = committed(tmp_path)
    out = tmp_path / "out"
    (out / "_runs").mkdir(exist_ok=True)
    (out / "_runs" / "x.json").write_text(json.dumps({"run_id": "x", "partitions": {"a": 1}}))
    with pytest.raises(ManifestError, match="'partitions'"):
        CommittedOutput(str(out), storage_for(str(out))).runs()
    assert cfg.exists()


def test_a_deep_run_record_does_not_stop_later_runs_from_cleaning_up(tmp_path):
    """The cleanup at a run's start (marking dead runs failed) read every recent record without bounds: a deep one
    made every later run of the output fail with a RecursionError."""
    from pipeline.lifecycle import fail_dead_records
    from pipeline.output.layout import OutputLayout
    from pipeline.storage import storage_for

    out = tmp_path / "out"
    (out / "_runs").mkdir(parents=True)
    (out / "_runs" / "a-deep.json").write_text(DEEP)
    (out / "_runs" / "b-dead.json").write_text(json.dumps({"run_id": "b-dead", "status": "running"}))
    assert fail_dead_records(storage_for(str(out)), OutputLayout(str(out)), "c-me") == 1
    assert json.loads((out / "_runs" / "b-dead.json").read_text())["status"] == "failed"
