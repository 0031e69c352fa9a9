"""`extract report` names a folder after each run id (OUT/<run_id>/report.html): a run record whose `run_id` is not a
plain name is refused as a tampered output, and the default folder never lies inside the output it reports on."""

from __future__ import annotations

import json

import pytest

from pipeline.output.manifest import OutputCorruptError
from pipeline.tools.report import default_out, plain_run_id, write_index, write_report
from tests.unit.test_report import write_output


@pytest.mark.parametrize("run_id", ["/tmp/elsewhere", "../../x", "a/b", "two\nlines", "", ".", "..", "x" * 201])
def test_a_run_id_that_is_not_a_plain_name_is_refused(run_id):
    with pytest.raises(OutputCorruptError, match="not a plain name"):
        plain_run_id({"run_id": run_id}, "/out")


def test_plain_run_ids_pass():
    for run_id in ("invoices-20261201T020000Z-1a2b3c", "invoices-retry-20261201T020000Z-9f8e7d", "r1", "a.b_c"):
        assert plain_run_id({"run_id": run_id}, "/out") == run_id


def test_a_tampered_record_writes_nothing_outside_the_pages(tmp_path):
    root = write_output(tmp_path / "output")
    outside = tmp_path / "escaped"
    record = json.loads((root / "_runs" / "r2.json").read_text())
    (root / "_runs" / "r2.json").write_text(json.dumps({**record, "run_id": str(outside)}))
    with pytest.raises(OutputCorruptError):
        write_index(str(root), tmp_path / "pages")
    with pytest.raises(OutputCorruptError):
        write_report(str(root), None, str(outside))
    assert not outside.exists() and not (tmp_path / "pages").exists()


def test_the_default_folder_is_never_inside_the_output(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert default_out(str(tmp_path / "data" / "invoices")) == tmp_path / "out" / "report"
    assert default_out("out") == tmp_path / "out-report"  # an output named ./out
    assert default_out("./out/") == tmp_path / "out-report"
    assert default_out(str(tmp_path)) == tmp_path.parent / f"{tmp_path.name}-report"  # the working dir itself
    assert default_out("s3://bucket/out") == tmp_path / "out" / "report"
