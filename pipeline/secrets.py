"""What must never be written to a run record, a manifest or a log: secret-looking `--set` values.

A key is secret-looking when one of its words (split at `.`, `_` and `-`) is a secret word (`password`,
`token`, `secret`, `key`, …); a value when it is a URL with a password in it (`https://user:pw@host`) or has
the shape of a well-known credential (an AWS access key id, a bearer token, …). `redact` keeps every key and
masks only what looks secret, so a record still says which settings a run or retry changed.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlsplit, urlunsplit

MASK = "***"
SECRET_WORDS = {"password", "passwd", "pwd", "pass", "secret", "secrets", "token", "key", "apikey", "credential",
                "credentials", "auth", "authorization", "cookie", "session", "private", "signature"}
_CREDENTIAL = re.compile(
    r"(?:AKIA|ASIA)[0-9A-Z]{16}|gh[pousr]_[A-Za-z0-9]{20,}|sk-[A-Za-z0-9_-]{16,}|xox[abpr]-[A-Za-z0-9-]{10,}"
    r"|hf_[A-Za-z0-9]{20,}|(?i:bearer)\s+\S{8,}|-----BEGIN [A-Z ]*PRIVATE KEY-----")


def secret_key(key: str) -> bool:
    """Whether a (dotted) config key names a secret: any of its words is a secret word."""
    words = re.split(r"[._\-\s]+", re.sub(r"([a-z])([A-Z])", r"\1_\2", str(key)).lower())
    return any(w in SECRET_WORDS for w in words)


def _mask_url(text: str) -> str:
    """`text` with the password of any URL in it masked: scheme://user:***@host/…"""
    def one(match: re.Match[str]) -> str:
        url = match.group(0)
        try:
            parts = urlsplit(url)
        except ValueError:
            return MASK
        if parts.password is None:
            return url
        netloc = f"{parts.username or ''}:{MASK}@{parts.hostname or ''}"
        netloc += f":{parts.port}" if parts.port else ""
        return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))

    return re.sub(r"[A-Za-z][A-Za-z0-9+.\-]*://[^\s\"'<>]+", one, text)


def redact_value(value: Any) -> Any:
    """`value` with URL passwords and credential-shaped strings masked (dicts and lists item by item)."""
    if isinstance(value, dict):
        return redact(value)
    if isinstance(value, list):
        return [redact_value(v) for v in value]
    if isinstance(value, str):
        return _CREDENTIAL.sub(MASK, _mask_url(value))
    return value


def redact(settings: dict[str, Any]) -> dict[str, Any]:
    """`settings` (e.g. `--set` overrides) with every secret-looking value masked; keys are kept."""
    return {k: (MASK if secret_key(k) and v is not None else redact_value(v)) for k, v in settings.items()}


def looks_secret(key: str, value: Any) -> bool:
    return redact({key: value}) != {key: value}
