"""The quality gate: a committed run that misses the bar records `alert` in its manifest and exits 4."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipeline import exit_codes
from tests.conftest import run_cli, write_config


@pytest.mark.engine
def test_a_real_run_below_the_bar_commits_records_the_alert_and_exits_4(tmp_path: Path, cli_env) -> None:
    # 16 output tokens cannot hold an invoice: every generated document is a `truncated` dead letter. The run is
    # real (Ray, the actors, classify, the commit) but its engine is the simulated one: the gate is the subject.
    config = write_config(tmp_path, simulated=True,
                          **{"input.limit": 3, "model.max_tokens": 16, "output.max_truncated_rate": 0.5})
    result = run_cli(["run", str(config), "--max-dead-letter-rate", "0.9"], cli_env)
    assert result.returncode == exit_codes.QUALITY_ALERT, result.stdout + result.stderr
    assert "quality alert (exit 4): dead-letter rate 1.000 (3 of 3) is above max_dead_letter_rate 0.9; " \
           "truncated rate 1.000 (3 of 3) is above max_truncated_rate 0.5" in result.stderr
    [manifest_path] = (tmp_path / "out" / "_runs").glob("*.json")
    manifest = json.loads(manifest_path.read_text())
    assert manifest["status"] == "committed" and manifest["alert"].startswith("dead-letter rate 1.000")
    assert manifest["dead_letters"] == 3 and list((tmp_path / "out").glob("dead_letters/**/*.parquet"))
