"""Partitions: one day of a date-templated input (`s3://corpus/docs/dt={date}/`), or the whole input.

Where a partition's output goes is `pipeline.output.layout`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, timedelta, timezone

DATE_TOKEN = "{date}"
WHOLE = "all"


class DateError(ValueError):
    """A date argument that is not YYYY-MM-DD, today or yesterday."""


def parse_day(text: str, today: date | None = None) -> date:
    today = today or datetime.now(timezone.utc).date()
    lowered = text.strip().lower()
    if lowered == "today":
        return today
    if lowered == "yesterday":
        return today - timedelta(days=1)
    try:
        return date.fromisoformat(text.strip())
    except ValueError:
        raise DateError(f"{text!r} is not a date (YYYY-MM-DD, today or yesterday)") from None


def day_range(start: date, end: date) -> list[date]:
    if end < start:
        raise DateError(f"--end {end} is before --start {start}")
    return [start + timedelta(days=i) for i in range((end - start).days + 1)]


def is_templated(uri: str) -> bool:
    return DATE_TOKEN in uri


@dataclass(frozen=True)
class Partition:
    day: date | None
    input_uri: str

    @property
    def key(self) -> str:
        return f"dt={self.day.isoformat()}" if self.day else ""

    @property
    def label(self) -> str:
        return self.day.isoformat() if self.day else WHOLE


def partition_for(input_template: str, day: date | None) -> Partition:
    if day is None:
        return Partition(None, input_template)
    return Partition(day, input_template.replace(DATE_TOKEN, day.isoformat()))
