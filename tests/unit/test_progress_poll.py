"""The progress board is polled every `poll_s` while a live display shows it or until the first documents are
done; after that, without a live display, at most every 2 s (a log line every 10 s needs no more)."""

from __future__ import annotations

import io

from pipeline.progress import Progress


def test_poll_interval_before_and_after_the_first_documents() -> None:
    quiet = Progress(10, "job", stream=io.StringIO(), live=False)
    assert quiet._quiet_poll_s(0.5) == 0.5
    quiet.mark("first_document_s")
    assert quiet._quiet_poll_s(0.5) == 2.0
    assert quiet._quiet_poll_s(3.0) == 3.0  # never faster than asked
    quick_lines = Progress(10, "job", stream=io.StringIO(), live=False, every_seconds=1.0)
    quick_lines.mark("first_document_s")
    assert quick_lines._quiet_poll_s(0.1) == 0.25


def test_a_live_display_is_polled_as_asked() -> None:
    live = Progress(10, "job", stream=io.StringIO(), live=True)
    live.marks["first_document_s"] = 1.0
    assert live._quiet_poll_s(0.5) == 0.5
