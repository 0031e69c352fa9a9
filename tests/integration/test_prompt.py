"""The rendered prompt: the schema is presented when the template has no {schema}; examples come first."""

from __future__ import annotations

import json

import pytest

from pipeline.config import load_config
from schemas.invoice import Invoice

SCHEMA = Invoice.model_json_schema()
@pytest.mark.engine
def test_a_job_without_schema_in_its_prompt_produces_rows(tmp_path, cli_env) -> None:
    """A JSON Schema job (shape only: no validators, no examples) whose prompt has no {schema}: the tool
    shows the schema itself (auto → the JSON Schema), and the outputs become rows. On the simulated engine: the
    subject is the config, the prompt's path to the actor and the commit (the rendering itself is
    tests/unit/test_prompt.py's; a real model's rows from the sample job, test_pipeline_e2e.py's)."""
    from tests.conftest import DELETE, run_cli, write_config

    schema = {k: v for k, v in SCHEMA.items() if k != "examples"}
    (tmp_path / "invoice.schema.json").write_text(json.dumps(schema))
    config = write_config(tmp_path, {"answers": "valid"}, **{"input.limit": 3, "model.max_tokens": 256,
                                                             "schema": DELETE,
                                                             "schema_file": "invoice.schema.json",
                                                             "prompt": "Extract the invoice from this document."
                                                                       "\n{document}"})
    loaded = load_config(config)
    assert "{schema}" not in loaded.config.prompt and not loaded.examples
    result = run_cli(["run", str(config)], cli_env)
    assert result.returncode == 0, result.stdout + result.stderr
    [manifest] = [json.loads(p.read_text()) for p in (tmp_path / "out" / "_runs").glob("*.json")]
    assert manifest["rows"] == 3, manifest["dead_letters_by_reason"]
