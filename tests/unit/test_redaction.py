"""Issue 55: one redactor at every exit. Config errors name the key and type, never a secret-looking value; every
error line and log line goes through the redactor; botocore's endpoint and credential errors are exit 6, one line."""

from __future__ import annotations

import argparse

import pytest
import yaml

from pipeline import exit_codes
from pipeline.cli.main import exit_code
from pipeline.config import ConfigError, parse_config
from pipeline.storage import StorageError
from tests.conftest import write_config

SECRET = "plainSecret4242"


def test_a_config_error_shows_the_type_not_the_value_of_a_secret_looking_setting(tmp_path):
    raw = yaml.safe_load(write_config(tmp_path).read_text())
    raw["model"]["engine_kwargs"] = f"hf_token={SECRET} api_key: {SECRET}"
    raw["storage"] = {"endpoint_url": [f"https://user:{SECRET}@minio.local"]}
    with pytest.raises(ConfigError) as caught:
        parse_config(raw)
    message = str(caught.value)
    assert SECRET not in message
    assert "model.engine_kwargs" in message and "type str" in message and "type list" in message


def test_a_config_error_cuts_a_long_value(tmp_path):
    raw = yaml.safe_load(write_config(tmp_path).read_text())
    raw["model"]["max_tokens"] = "x" * 100_000
    with pytest.raises(ConfigError) as caught:
        parse_config(raw)
    assert len(str(caught.value)) < 1000


@pytest.mark.parametrize("message", [f"could not read s3://user:{SECRET}@bucket/in.parquet",
                                     f"refused: Authorization: Basic dXNl{SECRET}==",
                                     f"https://u:{SECRET}@host/{{date}}.parquet: no such file"])
def test_every_error_line_is_redacted(message, capsys):
    def command(_args):
        raise StorageError(message)

    assert exit_code(command, argparse.Namespace()) == exit_codes.STORAGE
    err = capsys.readouterr().err
    assert SECRET not in err and err.startswith("error: ") and err.count("\n") == 1


def test_an_unreachable_endpoint_is_exit_6_in_one_line(capsys):
    from botocore.exceptions import EndpointConnectionError

    def command(_args):
        try:
            raise ConnectionRefusedError(111, "refused")
        except ConnectionRefusedError as exc:
            raise EndpointConnectionError(endpoint_url=f"https://admin:{SECRET}@nowhere.invalid:9") from exc

    assert exit_code(command, argparse.Namespace()) == exit_codes.STORAGE
    err = capsys.readouterr().err
    assert SECRET not in err and err.count("\n") == 1 and "EndpointConnectionError" in err


def test_missing_credentials_are_exit_6(capsys):
    from botocore.exceptions import NoCredentialsError

    def command(_args):
        raise RuntimeError("listing failed") from NoCredentialsError()

    assert exit_code(command, argparse.Namespace()) == exit_codes.STORAGE
    assert "NoCredentialsError" in capsys.readouterr().err


def test_log_lines_are_redacted(capsys, monkeypatch):
    import structlog

    from workers import logs

    monkeypatch.setenv("EXTRACT_LOG_FORMAT", "json")  # restored after the test
    logs.configure(json_logs=True)
    structlog.get_logger().warning("storage.retry", uri=f"s3://u:{SECRET}@b/k", hf_token=SECRET,
                                   detail={"password": SECRET}, header=f"Authorization: Bearer {SECRET}",
                                   tokens={"prompt": 3})
    err = capsys.readouterr().err
    monkeypatch.delenv("EXTRACT_LOG_FORMAT")
    logs.configure()
    assert SECRET not in err and '"prompt": 3' in err
