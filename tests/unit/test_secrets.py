"""What a run record or summary may not show (issue 23 item 8): URL passwords with quotes or spaces, a secret
`name=value` inside a value, and a `passphrase` key are masked; keys and harmless values are kept."""

from __future__ import annotations

import pytest

from pipeline.secrets import MASK, looks_secret, redact

PW = "hunter2X"


@pytest.mark.parametrize(("value", "shown"), [
    (f"https://admin:{PW}'q@minio.local:9000/b", f"https://admin:{MASK}@minio.local:9000/b"),
    (f'https://admin:{PW}"q@minio.local', f"https://admin:{MASK}@minio.local"),
    (f"https://admin:{PW} q w@minio.local:9000", f"https://admin:{MASK}@minio.local:9000"),
    (f"postgres://o'brien:{PW}@db/x", f"postgres://o'brien:{MASK}@db/x"),
    (f"https://admin:{PW}@minio.local:9000", f"https://admin:{MASK}@minio.local:9000"),
    (f"AWS_SECRET_ACCESS_KEY={PW} REGION=eu", f"AWS_SECRET_ACCESS_KEY={MASK} REGION=eu"),
    (f'--opt aws_secret_access_key="{PW} x"', f'--opt aws_secret_access_key="{MASK}"'),
    (f"https://api.example.com/v1?token={PW}&page=2", f"https://api.example.com/v1?token={MASK}&page=2"),
    (f'{{"password": "{PW}", "user": "bob"}}', f'{{"password": "{MASK}", "user": "bob"}}'),
    (f"aws_secret_access_key: {PW}", f"aws_secret_access_key: {MASK}"),  # a YAML line
    (f"{{'aws_secret_access_key': '{PW}', 'region': 'eu'}}", f"{{'aws_secret_access_key': '{MASK}', 'region': 'eu'}}"),
    (f"Authorization: Bearer {PW}abc", f"Authorization: {MASK}"),
])
def test_secrets_inside_a_value_are_masked(value, shown):
    assert redact({"model.engine_kwargs.extra": value}) == {"model.engine_kwargs.extra": shown}
    assert PW not in str(redact({"x": value}))


@pytest.mark.parametrize("value", ["https://minio.local:9000/bucket", "https://registry:443/@scope/pkg",
                                   "mode=fast batch=4", "Extract the invoice.\n{document}", 512,
                                   "url: https://minio.local:9000/b", "max_tokens: 512, name: inv"])
def test_harmless_values_are_kept(value):
    assert redact({"storage.endpoint_url": value}) == {"storage.endpoint_url": value}


@pytest.mark.parametrize("key", ["ssh.passphrase", "gpg_passphrase", "keyPassphrase", "db.passcode"])
def test_a_passphrase_key_is_secret(key):
    assert looks_secret(key, "anything") and redact({key: "anything"}) == {key: MASK}


def test_a_count_of_tokens_or_keys_is_not_a_secret():
    from pipeline.secrets import secret_key

    assert not secret_key("model.max_tokens") and not secret_key("prompt_tokens") and not secret_key("num_keys")
    assert secret_key("tokens") and secret_key("auth.token") and secret_key("api_key")
