"""Bad input and bad config are one clear line before Ray starts, never a traceback or a silent duplicate. The
commands run in this process (`tests.conftest.run_main`): the subject is the line and the exit code."""

from __future__ import annotations

from tests.conftest import run_main, write_config
from tests.unit.test_bad_input import _job


def test_a_run_on_repeated_ids_is_one_line_and_exit_2(tmp_path):
    config = _job(tmp_path, ["inv-0000", "inv-0000", "inv-0001"])
    result = run_main(["run", str(config)])
    assert result.returncode == 2, result.stderr[-2000:]
    assert "Traceback" not in result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("error: input.id_column 'doc_id': 1 repeated id(s)")
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").rglob("*.parquet"))


def test_a_schema_module_that_fails_to_import_is_one_line_from_the_cli(tmp_path):
    (tmp_path / "crashing.py").write_text("import json\njson.loads('{')\n")
    config = write_config(tmp_path, schema="crashing:Model")
    result = run_main(["validate", str(config)], tmp_path)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "importing module 'crashing' raised JSONDecodeError" in lines[0], result.stderr


def test_set_into_a_scalar_from_the_cli_is_one_line(tmp_path):
    config = write_config(tmp_path)
    result = run_main(["validate", str(config), "--set", "model.max_tokens.x=1"])
    assert result.returncode == 2
    assert result.stderr.strip() == ("error: --set model.max_tokens.x: model.max_tokens holds 512, not a mapping, "
                                     "so it has no key 'x'")
