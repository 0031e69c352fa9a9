"""Config errors fail before Ray starts, with one line naming the key or column."""


import pytest

from tests.conftest import run_main, write_config


def test_cli_reports_config_error_in_one_line_without_starting_ray(tmp_path):
    config = write_config(tmp_path, **{"model.max_tokenz": 5})
    result = run_main(["run", str(config)])  # in this process: it must not start Ray here either
    assert result.returncode == 2
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert lines == [f"error: {config}: model.max_tokenz: unknown key"]
    assert "ray" not in result.stderr.lower()


@pytest.mark.engine  # compiles the schema in a child process, against the model's tokenizer
def test_cli_validate_reports_the_plan():
    result = run_main(["validate", "jobs/extract.yaml"])  # starts no Ray: in this process
    assert result.returncode == 0, result.stderr
    assert "52 of 52 documents in 1 file(s), 1 unit(s)" in result.stdout
    assert "issue_date: date32" in result.stdout
