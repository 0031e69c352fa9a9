"""A schema field named as one of the pipeline's own columns, and a `max_tokens` that leaves no room for a prompt,
are refused before anything runs: one line naming the field or both keys."""

from __future__ import annotations

import json

import pytest

from pipeline.config import ConfigError, load_config
from pipeline.job_checks import reserved_columns
from pipeline.run import preflight
from tests.conftest import DELETE, write_config


def schema_with(tmp_path, field: str):
    path = tmp_path / "schema.json"
    path.write_text(json.dumps({"title": "t", "type": "object", "required": ["total"],
                                "properties": {"total": {"type": "number"}, field: {"type": "string"}}}))
    return path


def error_of(config) -> str:
    with pytest.raises(ConfigError) as info:
        preflight(load_config(config))
    message = str(info.value)
    assert "\n" not in message
    return message


@pytest.mark.parametrize("field", ["_source_file", "_run_id", "_extracted_at", "_model", "_unit"])
def test_a_schema_field_named_as_a_reserved_column_is_refused(tmp_path, field):
    config = write_config(tmp_path, schema=DELETE, schema_file=str(schema_with(tmp_path, field)))
    message = error_of(config)
    assert f"field '{field}' is a reserved output column name" in message
    assert "rename the field" in message


def test_an_ordinary_field_is_accepted(tmp_path):
    config = write_config(tmp_path, schema=DELETE, schema_file=str(schema_with(tmp_path, "reason")))
    assert preflight(load_config(config)).rows_to_read == 52


def test_dt_is_reserved_only_for_a_dated_input():
    assert "dt" in reserved_columns(dated=True)
    assert "dt" not in reserved_columns(dated=False)
    assert {"_source_file", "_run_id", "_schema_hash", "_prompt_tokens"} <= set(reserved_columns(dated=False))


@pytest.mark.parametrize("max_tokens", [4096, 5000])
def test_max_tokens_at_or_above_max_model_len_names_both_keys(tmp_path, max_tokens):
    message = error_of(write_config(tmp_path, **{"model.max_tokens": max_tokens, "model.max_model_len": 4096}))
    assert message.startswith(f"model.max_tokens ({max_tokens}) must be below model.max_model_len (4096)")


def test_max_tokens_that_leave_less_than_the_prompt_template_are_refused(tmp_path):
    """4095 of 4096: below max_model_len, but the template's own text cannot fit in the one token left."""
    message = error_of(write_config(tmp_path, **{"model.max_tokens": 4095, "model.max_model_len": 4096}))
    assert message.startswith("model.max_tokens (4095) leaves 1 of model.max_model_len (4096) for the prompt")


def test_the_prompt_floor_never_exceeds_a_real_tokenizers_count():
    """The floor counts at most one token per 16 characters, whitespace runs as one: below any real count."""
    from pipeline.job_checks import prompt_tokens_at_least

    assert prompt_tokens_at_least("{document}") == 0
    assert prompt_tokens_at_least("Extract the invoice.\n{document}") == 2
    assert prompt_tokens_at_least(" " * 400 + "x") == 1  # a long run of spaces may be one token
