"""The quality gate: a committed run that misses the bar records `alert` in its manifest and exits 4."""

from __future__ import annotations

from types import SimpleNamespace

from pipeline.config import OutputConfig
from pipeline.quality import quality_alert


def run(rows: int, dead: int, truncated: int = 0) -> SimpleNamespace:
    return SimpleNamespace(rows=rows, dead_letters=dead, dead_letters_by_reason={"truncated": truncated} if truncated
                           else {}, status="committed")


def bar(**keys) -> OutputConfig:
    return OutputConfig(uri="out", **keys)


def test_no_bar_no_alert() -> None:
    assert quality_alert(run(0, 52, 52), bar()) is None


def test_each_bar_names_itself_and_all_misses_are_listed() -> None:
    assert quality_alert(run(30, 20), bar(max_dead_letter_rate=0.5)) is None
    assert quality_alert(run(30, 22), bar(max_dead_letter_rate=0.4)) == \
        "dead-letter rate 0.423 (22 of 52) is above max_dead_letter_rate 0.4"
    alert = quality_alert(run(5, 47, truncated=40), bar(max_dead_letter_rate=0.5, max_truncated_rate=0.5, min_rows=10))
    assert alert.split("; ") == ["dead-letter rate 0.904 (47 of 52) is above max_dead_letter_rate 0.5",
                                 "truncated rate 0.769 (40 of 52) is above max_truncated_rate 0.5",
                                 "5 row(s), fewer than min_rows 10"]


def test_a_run_that_processed_nothing_is_judged_on_rows_only() -> None:
    assert quality_alert(run(0, 0), bar(max_dead_letter_rate=0.0)) is None
    assert quality_alert(run(0, 0), bar(min_rows=1)) == "0 row(s), fewer than min_rows 1"


