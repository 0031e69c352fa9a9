"""Leaf comparison: strings normalised, numbers within a tolerance, dates and datetimes as ISO 8601."""

from __future__ import annotations

import json
import math
import unicodedata
from datetime import date, datetime, time, timezone
from decimal import Decimal, InvalidOperation
from typing import Any

from pipeline.tools.evaluate.options import DEFAULT_TOLERANCE, Tolerance

TEMPORAL_FORMATS = {"date", "date-time", "time"}


def normalize_text(value: str) -> str:
    """NFKC, casefold, whitespace runs collapsed to one space, ends stripped."""
    return " ".join(unicodedata.normalize("NFKC", value).casefold().split())


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def iso(value: Any) -> str | None:
    """A date, datetime or time (or an ISO string of one) as a canonical ISO 8601 string; else None."""
    if isinstance(value, datetime):
        aware = value if value.tzinfo is not None else value.replace(tzinfo=timezone.utc)
        return aware.astimezone(timezone.utc).isoformat()
    if isinstance(value, (date, time)):
        return value.isoformat()
    if not isinstance(value, str):
        return None
    text = value.strip()
    for parse in (date.fromisoformat, datetime.fromisoformat, time.fromisoformat):
        try:
            return iso(parse(text))
        except ValueError:
            continue
    return None


def _decimal_as_float(value: Any) -> Any:
    """A Decimal, or the text of one (Pydantic writes a Decimal as "12.50"), as a float; anything else as it is."""
    if isinstance(value, (Decimal, str)):
        try:
            number = float(Decimal(value.strip() if isinstance(value, str) else value))
        except (InvalidOperation, ValueError):
            return value
        return number if math.isfinite(number) else value
    return value


def _is_temporal(value: Any) -> bool:
    return isinstance(value, (date, datetime, time))


def canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def leaf_equal(pred: Any, gold: Any, tolerance: Tolerance = DEFAULT_TOLERANCE, fmt: str | None = None) -> bool:
    """Two non-null scalars under the module's rules (text normalisation, numeric tolerance, ISO dates)."""
    if isinstance(pred, bool) or isinstance(gold, bool):
        return isinstance(pred, bool) and isinstance(gold, bool) and pred == gold
    if isinstance(pred, Decimal) or isinstance(gold, Decimal):  # a decimal column; its gold a number or "12.50"
        pred, gold = _decimal_as_float(pred), _decimal_as_float(gold)
    if _is_number(pred) and _is_number(gold):
        return math.isclose(pred, gold, rel_tol=tolerance.rel, abs_tol=tolerance.abs)
    if _is_temporal(pred) or _is_temporal(gold) or fmt in TEMPORAL_FORMATS:
        p, g = iso(pred), iso(gold)
        if p is not None and g is not None:
            return p == g
    if isinstance(pred, str) and isinstance(gold, str):
        return normalize_text(pred) == normalize_text(gold)
    return canonical(pred) == canonical(gold)
