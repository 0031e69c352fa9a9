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
    r"|hf_[A-Za-z0-9]{20,}|(?i:bearer)\s+\S{8,}|-----BEGIN [A-Z ]*PRIVATE KEY-----")


def secret_key(key: str) -> bool:
    """Whether a (dotted) config key names a secret: any of its words is a secret word."""
    words = re.split(r"[._\-\s]+", re.sub(r"([a-z])([A-Z])", r"\1_\2", str(key)).lower())
    return any(w in SECRET_WORDS and not (w in COUNTED and i and words[i - 1] in COUNTS) for i, w in enumerate(words))


# `max_tokens`, `num_keys`: a count of tokens or keys, not tokens or keys.
COUNTED = frozenset({"tokens", "keys", "token", "key"})
COUNTS = frozenset({"max", "min", "num", "n", "total", "prompt", "output", "input", "sort", "primary"})


# A URL's userinfo: `scheme://user:password@`. The password runs to the first `@` and may hold quotes and spaces
# (a shell or YAML quoting mistake still leaves it a secret); a `/` or a line end ends the authority instead.
_URL_PASSWORD = re.compile(r"(?P<head>\b[A-Za-z][A-Za-z0-9+.\-]*://[^\s:/@<>]*):(?P<password>[^@/\r\n]+)@")
# `name=value` inside a value (an env line, a query string, a DSN's options), and a JSON `"name": "value"`: the
# value is masked when the name is secret-looking (`aws_secret_access_key=...`, `?token=...`).
_ASSIGNED = re.compile(r"(?P<head>(?P<name>\b[A-Za-z_][A-Za-z0-9_.\-]*)\s*=\s*)"
                       r"(?P<value>\"[^\"]*\"|'[^']*'|[^\s&;,\"']+)")
# `name: value` too: a JSON pair, a Python dict's repr (`{'aws_secret_access_key': '...'}`) and a YAML line, the
# name bare or in either quote, the value quoted or up to a space, a comma, a brace or a quote.
_JSON_PAIR = re.compile(r"(?P<head>(?P<quote>[\"']?)(?P<name>\b[A-Za-z_][A-Za-z0-9_.\- ]*)(?P=quote)\s*:[ \t]*)"
                        r"(?P<value>\"(?:[^\"\\]|\\.)*\"|'(?:[^'\\]|\\.)*'|[^\s,;}&\"']+)")


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
        return f"{match.group('head')}{quote}{MASK}{quote}"

    return _JSON_PAIR.sub(one, _ASSIGNED.sub(one, text))


def redact_value(value: Any) -> Any:
    """`value` with URL passwords and credential-shaped strings masked (dicts and lists item by item)."""
    if isinstance(value, dict):
        return redact(value)
    if isinstance(value, list):
        return [redact_value(v) for v in value]
    if isinstance(value, str):
        return _mask_assigned(_CREDENTIAL.sub(MASK, _mask_url(value)))
    return value


def redact(settings: dict[str, Any]) -> dict[str, Any]:
    """`settings` (e.g. `--set` overrides) with every secret-looking value masked; keys are kept."""
    return {k: (MASK if secret_key(k) and v is not None else redact_value(v)) for k, v in settings.items()}


def looks_secret(key: str, value: Any) -> bool:
    return redact({key: value}) != {key: value}
