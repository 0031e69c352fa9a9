"""How the report writes a value: seconds, scores, and long text cut with a marker."""

from __future__ import annotations

from typing import Any

RAW_LIMIT = 600  # characters of a dead letter's raw output shown before the truncation marker


def truncate(text: str | None, limit: int = RAW_LIMIT) -> str:
    """`text` cut at `limit` characters, with a marker saying how much was cut (escaping is the template's)."""
    if text is None:
        return ""
    if len(text) <= limit:
        return text
    return text[:limit] + f" … [truncated: {len(text) - limit} more characters]"


def fmt_s(value: Any) -> str:
    return "—" if value is None else f"{float(value):.1f} s"


try:
    from jinja2 import UndefinedError
except ImportError:  # pragma: no cover - jinja2 is a dependency
    UndefinedError = TypeError  # type: ignore[misc,assignment]


def fmt_score(value: Any) -> str:
    try:
        return f"{float(value):.3f}"
    except (TypeError, ValueError, AttributeError, UndefinedError):
        return "—"  # not scored, or missing from an older eval.json
