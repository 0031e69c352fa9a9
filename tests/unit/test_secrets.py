"""What a run record or summary may not show (issue 23 item 8): URL passwords with quotes or spaces, a secret
`name=value` inside a value, and a `passphrase` key are masked; keys and harmless values are kept."""

from __future__ import annotations

import pytest

from workers.secrets import MASK, looks_secret, redact

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
    from workers.secrets import secret_key

    assert not secret_key("model.max_tokens") and not secret_key("prompt_tokens") and not secret_key("num_keys")
    # the window's size and vLLM's batch budget: `extract retry`'s hint printed `input.window_tokens=***` before
    assert not secret_key("input.window_tokens") and not secret_key("model.engine_kwargs.max_num_batched_tokens")
    assert secret_key("tokens") and secret_key("auth.token") and secret_key("api_key")


# Issue 55: every secret form, in free text (an error line, a log line, a page) as well as in a mapping.
AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
SECRET_TEXTS = [
    f"https://user:{PW}@host/x", f"s3://user:{PW}@bucket/key", f"https://user:p%40{PW}@host",
    f"https://user:'{PW} x'@host", f"Authorization: Basic dXNlcjp{PW}==", f'"Authorization": "Basic {PW}9xx"',
    f"Authorization: Bearer {PW}abc", f'Authorization: Digest username="bob", response="{PW}"',
    f"headers={{'Authorization': 'Basic {PW}1'}}", f"aws_secret_access_key {AWS_SECRET}",
    f"key id AKIA{'ABCDEFGHIJKLMNOP'} here", f"aws_secret={AWS_SECRET}",
]


@pytest.mark.parametrize("text", SECRET_TEXTS)
def test_every_secret_form_is_masked_in_free_text(text):
    from workers.secrets import redact_text

    shown = redact_text(f"error: could not read {text}: refused")
    assert PW not in shown and AWS_SECRET not in shown and "AKIAABCDEFGHIJKLMNOP" not in shown, shown
    assert shown.startswith("error: could not read ")


@pytest.mark.parametrize("key", ["hf_token", "api_key", "client_secret", "clientsecret", "DbPassword",
                                 "aws_secret_access_key", "mysecretthing", "password"])
def test_secret_keys_are_masked_at_any_depth(key):
    tree = {"model": {"engine_kwargs": {key: PW, "n": 3}}, "items": [{key: PW}], "tokens": {"prompt": 12}}
    out = redact(tree)
    assert PW not in str(out)
    assert out["model"]["engine_kwargs"]["n"] == 3 and out["tokens"] == {"prompt": 12}


@pytest.mark.parametrize("text", ["Basic invoices and totals", "the digest of the report", "the authorization step",
                                  "a basic model"])
def test_words_alone_are_kept(text):
    from workers.secrets import redact_text

    assert redact_text(text) == text


@pytest.mark.parametrize("text", [f'storage.secret_access_key=["{PW}"]', f"api_key={{'a': '{PW} x'}}",
                                  f'"password": ["{PW}", "b"]'])
def test_a_secret_name_with_a_list_or_mapping_value_is_masked(text):
    from workers.secrets import redact_text

    assert PW not in redact_text(text)


def test_where_or_what_a_secret_is_is_not_a_secret():
    from workers.secrets import secret_key

    assert not any(secret_key(k) for k in ("session_dir", "secret_name", "token_count", "tokens_per_s"))
    assert secret_key("session") and secret_key("secret") and secret_key("hf_token")
