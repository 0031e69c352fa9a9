"""Issue 55: reading an output runs none of its code. `extract report` shows the job from the redacted snapshot its
run record carries; it never loads the config file a run record names, nor imports that job's schema module, and
no secret of the job reaches the page."""

from __future__ import annotations

import json
import sys

import yaml

from pipeline.cli.main import main
from pipeline.tools.report import write_report
from tests.unit.test_report import write_output

SECRETS = ("hf_Zz9Zz9Zz9Zz9Zz9Zz9Zz9Zz9", "plainPass4242", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY")


def evil_job(folder):
    """A job whose schema module writes a file when imported, and whose config holds three secrets."""
    folder.mkdir()
    marker = folder / "imported.txt"
    (folder / "evil_schema_55.py").write_text(
        f"from pathlib import Path\nPath({str(marker)!r}).write_text('ran')\n"
        "from pydantic import BaseModel\nclass Model(BaseModel):\n    x: str\n")
    config = {"name": "evil", "schema": "evil_schema_55:Model",
              "input": {"uri": f"https://bob:{SECRETS[1]}@files.example.com/in.parquet"},
              "output": {"uri": str(folder / "out")},
              "model": {"path": "m", "engine_kwargs": {"hf_token": SECRETS[0]}},
              "prompt": f"aws_secret_access_key {SECRETS[2]} {{document}}"}
    (folder / "extract.yaml").write_text(yaml.safe_dump(config))
    return folder / "extract.yaml", marker


def test_a_tampered_record_naming_a_job_runs_none_of_its_code(tmp_path):
    root = write_output(tmp_path / "output")
    config, marker = evil_job(tmp_path / "job")
    path = root / "_runs" / "r2.json"
    record = json.loads(path.read_text())
    snapshot = {"config": yaml.safe_dump({"input": {"uri": f"s3://u:{SECRETS[1]}@b/x"}, "api_key": SECRETS[0]}),
                "prompt": f"Authorization: Basic dXNl{SECRETS[1]}== {{document}}", "text_column": "text"}
    path.write_text(json.dumps({**record, "config_path": str(config), "job": snapshot,
                                "input_uri": f"https://bob:{SECRETS[1]}@files.example.com/in.parquet"}))
    report, out_dir = write_report(str(root), tmp_path / "pages", "r2")
    page = (out_dir / "report.html").read_text()
    assert not marker.exists() and "evil_schema_55" not in sys.modules
    assert not any(secret in page for secret in SECRETS)
    assert "the job as the run saw it" in page


def test_report_on_a_config_reads_its_output_without_importing_its_schema(tmp_path, capsys):
    config, marker = evil_job(tmp_path / "job")
    write_output(tmp_path / "job" / "out")
    assert main(["report", str(config), "--out", str(tmp_path / "pages")]) == 0
    assert not marker.exists() and "evil_schema_55" not in sys.modules
    found = capsys.readouterr()
    assert not any(secret in found.out + found.err for secret in SECRETS)


def test_the_snapshot_a_run_record_carries_holds_no_secret(tmp_path):
    from pipeline.config import load_config
    from pipeline.job_identity import job_snapshot
    from tests.conftest import write_config

    cfg = write_config(tmp_path, simulated=True, **{
        "storage.endpoint_url": f"https://admin:{SECRETS[1]}@minio.local:9000",
        "prompt": f"Authorization: Bearer {SECRETS[0]}\naws_secret_access_key={SECRETS[2]}\n{{document}}"})
    snapshot = job_snapshot(load_config(cfg))
    text = json.dumps(snapshot)
    assert not any(secret in text for secret in SECRETS)
    assert "minio.local:9000" in snapshot["config"] and "{document}" in snapshot["prompt"]
