"""A changed job is told, not skipped: a partition committed under another output hash stops the run before
Ray starts, naming what changed and offering --force or a new output. A partition whose input changed since
its commit (another input fingerprint) is rerun, not skipped. No engine: nothing gets as far as Ray."""

from __future__ import annotations

import pytest

from pipeline import exit_codes
from tests.conftest import run_cli, write_config, write_docs
from tests.fixtures.commits import DOCS, commit_outcome, invoice


@pytest.fixture
def job(tmp_path):
    docs = write_docs(tmp_path / "docs.parquet", DOCS, ["A-1 1.0", "b", "c", "d"])
    cfg = write_config(tmp_path, **{"input.uri": str(docs)})
    commit_outcome(cfg, "first", {"a": invoice("A-1")}, {"b": "truncated", "c": "truncated", "d": "empty_input"})
    return cfg, docs


def test_the_cli_says_it_in_one_line_with_exit_2(job, cli_env):
    cfg, _ = job
    done = run_cli(["run", str(cfg), "--set", "model.max_tokens=77"], cli_env)
    assert done.returncode == exit_codes.USAGE, done.stderr[-2000:]
    (line,) = [x for x in done.stderr.splitlines() if x.startswith("error:")]
    assert "model.max_tokens changed" in line and "--force" in line
    assert "Traceback" not in done.stderr


