"""What must never be written to a run record, a manifest or a log: secret-looking `--set` values.

A key is secret-looking when one of its words (split at `.`, `_` and `-`) is a secret word (`password`,
`token`, `secret`, `key`, `passphrase`, …); in a value, the password of a URL (`https://user:pw@host`, quotes
and spaces included), the value of a secret-looking `name=value` or JSON `"name": "value"` inside it
(`aws_secret_access_key=…`), and anything shaped like a well-known credential (an AWS access key id, a bearer
token, …). `redact` keeps every key and
masks only what looks secret, so a record still says which settings a run or retry changed.
"""

from __future__ import annotations

import re
from typing import Any

MASK = "***"
SECRET_WORDS = {"password", "passwd", "pwd", "pass", "passphrase", "passcode", "secret", "secrets", "token",
                "tokens", "key", "keys", "apikey", "credential", "credentials", "auth", "authorization", "cookie",
                "session", "private", "signature"}
_CREDENTIAL = re.compile(
    r"(?:AKIA|ASIA)[0-9A-Z]{16}|gh[pousr]_[A-Za-z0-9]{20,}|sk-[A-Za-z0-9_-]{16,}|xox[abpr]-[A-Za-z0-9-]{10,}"
    r"|hf_[A-Za-z0-9]{20,}|(?i:bearer)\s+\S{8,}|-----BEGIN [A-Z ]*PRIVATE KEY-----"
    # `Basic` and `Digest` alone are English words: their credential is masked only where it looks like one (a
    # base64 blob with a digit or padding, a Digest's `username="…", response="…"` list).
    r"|(?i:basic)\s+(?=[A-Za-z0-9+/]*[0-9+/=])[A-Za-z0-9+/]{8,}=*|(?i:digest)\s+[A-Za-z]+=\"[^\r\n]*")
# An `Authorization:` (or `Proxy-Authorization`) header, whatever its scheme: everything after the name to the end
# of the line or the closing quote is the credential (`Basic dXNlcjpwYXNz`, `Bearer …`, `Digest username="…", …`).
_AUTH_HEADER = re.compile(r"(?P<head>(?i:\b(?:proxy-)?authorization)[\"']?\s*[:=]\s*)(?P<quote>[\"']?)"
                          r"(?P<value>(?:(?!(?P=quote))[^\r\n])+|(?<![\"'])[^\r\n]+)")
# An AWS secret access key (40 characters of base64) after any `aws_secret…` name, whatever separates the two.
_AWS_SECRET = re.compile(r"(?P<head>(?i:aws_?secret[A-Za-z0-9_]*)[\"']?[\s:=]{1,4}[\"']?)"
                         r"[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+])")


def secret_key(key: str) -> bool:
    """Whether a (dotted) config key names a secret: any of its words is a secret word, or holds `secret` or
    `password` (`clientsecret`, `dbpassword`)."""
    words = re.split(r"[._\-\s]+", re.sub(r"([a-z])([A-Z])", r"\1_\2", str(key)).lower())
    if words[-1] in _NOT_SECRET_TAILS:
        return False  # `session_dir`, `secret_name`, `token_count`: where or what a secret is, not the secret
    return any((w in SECRET_WORDS and not (w in COUNTED and i and words[i - 1] in COUNTS))
               or any(part in w for part in _SECRET_PARTS) for i, w in enumerate(words))


_SECRET_PARTS = ("secret", "password", "passwd")
_NOT_SECRET_TAILS = frozenset({"dir", "path", "file", "name", "count", "ms", "mb", "unix", "ratio", "s"})


# `max_tokens`, `num_keys`, `input.window_tokens`, `max_num_batched_tokens`: a count of tokens or keys (or a key
# that orders), not tokens or keys.
COUNTED = frozenset({"tokens", "keys", "token", "key"})
COUNTS = frozenset({"max", "min", "num", "n", "total", "prompt", "output", "input", "sort", "primary", "window",
                    "batched", "context", "chunk"})


# A URL's userinfo: `scheme://user:password@`. The password runs to the first `@` and may hold quotes and spaces
# (a shell or YAML quoting mistake still leaves it a secret); a `/` or a line end ends the authority instead.
_URL_PASSWORD = re.compile(r"(?P<head>\b[A-Za-z][A-Za-z0-9+.\-]*://[^\s:/@<>]*):(?P<password>[^@/\r\n]+)@")
# `name=value` inside a value (an env line, a query string, a DSN's options), and a JSON `"name": "value"`: the
# value is masked when the name is secret-looking (`aws_secret_access_key=...`, `?token=...`).
_ASSIGNED = re.compile(r"(?P<head>(?P<name>\b[A-Za-z_][A-Za-z0-9_.\-]*)\s*=\s*)"
                       r"(?P<value>\[[^\]\r\n]*\]?|\{[^}\r\n]*\}?|\"[^\"]*\"|'[^']*'|[^\s&;,\"']+)")
# `name: value` too: a JSON pair, a Python dict's repr (`{'aws_secret_access_key': '...'}`) and a YAML line, the
# name bare or in either quote, the value quoted or up to a space, a comma, a brace or a quote.
_JSON_PAIR = re.compile(r"(?P<head>(?P<quote>[\"']?)(?P<name>\b[A-Za-z_][A-Za-z0-9_.\- ]*)(?P=quote)\s*:[ \t]*)"
                        r"(?P<value>\[[^\]\r\n]*\]?|\"(?:[^\"\\]|\\.)*\"|'(?:[^'\\]|\\.)*'|[^\s,;}&\"']+)")


def _mask_url(text: str) -> str:
    """`text` with the password of any URL in it masked: scheme://user:***@host/…"""
    return _URL_PASSWORD.sub(lambda m: f"{m.group('head')}:{MASK}@", text)


def _mask_assigned(text: str) -> str:
    """`text` with the value of each `secret_name=value` (or JSON `"secret_name": "value"`) in it masked."""
    def one(match: re.Match[str]) -> str:
        if not secret_key(match.group("name")):
            return match.group(0)
        value = match.group("value")
        quote = value[0] if value[:1] in ("'", '"') else ""
        if value[:1] in ("[", "{"):
            return f"{match.group('head')}{MASK}"
        return f"{match.group('head')}{quote}{MASK}{quote}"

    return _JSON_PAIR.sub(one, _ASSIGNED.sub(one, text))


def redact_text(text: str) -> str:
    """`text` (an error line, a log line, a page) with every secret form in it masked: URL userinfo passwords,
    `Authorization` headers, secret `name=value` and `name: value` pairs, AWS and other credential shapes."""
    text = _mask_url(str(text))
    text = _AUTH_HEADER.sub(lambda m: f"{m.group('head')}{m.group('quote')}{MASK}", text)
    text = _AWS_SECRET.sub(lambda m: f"{m.group('head')}{MASK}", text)
    return _mask_assigned(_CREDENTIAL.sub(MASK, text))


def redact_value(value: Any) -> Any:
    """`value` with URL passwords and credential-shaped strings masked (dicts, lists and tuples item by item)."""
    if isinstance(value, dict):
        return redact(value)
    if isinstance(value, (list, tuple)):
        return [redact_value(v) for v in value]
    if isinstance(value, str):
        return redact_text(value)
    return value


# Numbers are kept under a secret-looking key (`tokens: {prompt: 12}`, `key_count`), except under these words.
_NUMERIC_SECRETS = ("password", "passwd", "secret", "passphrase", "passcode", "pin")


def _masked(key: str, value: Any) -> Any:
    if value is None or isinstance(value, bool) or not secret_key(key):
        return redact_value(value)
    if isinstance(value, (dict, list, tuple)):
        return redact_value(value)
    if isinstance(value, (int, float)) and not any(w in str(key).lower() for w in _NUMERIC_SECRETS):
        return value
    return MASK


def redact(settings: dict[str, Any]) -> dict[str, Any]:
    """`settings` (`--set` overrides, a config, a run record: any mapping, at any depth) with every
    secret-looking value masked; keys are kept."""
    return {k: _masked(str(k), v) for k, v in settings.items()}


def looks_secret(key: str, value: Any) -> bool:
    return redact({key: value}) != {key: value}
