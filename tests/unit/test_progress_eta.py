"""The `progress` log lines a pipe or `ray job logs` shows (issue 57): an ETA at the steady rate, and the docs/s of
the last minute beside the whole run's. The clock is the test's: no timed assertion."""

from __future__ import annotations

import io

import pytest
import structlog

from pipeline import progress as progress_module
from pipeline.progress import Progress, Rates, clock


def test_the_steady_rate_leaves_the_start_up_out_and_the_eta_follows_it() -> None:
    rates = Rates()
    rates.add(0.0, 0)
    rates.add(30.0, 0)  # start-up: nothing done
    assert rates.steady(30.0, 0) is None and rates.eta_s(30.0, 0, 1000) is None
    rates.add(40.0, 100)  # the first documents
    assert rates.steady(40.0, 100) is None  # one point is no rate
    rates.add(50.0, 200)
    assert rates.steady(50.0, 200) == pytest.approx(10.0)  # (200 - 100) / (50 - 40), not 200 / 50
    assert rates.eta_s(50.0, 200, 1000) == pytest.approx(80.0)
    assert rates.eta_s(60.0, 1000, 1000) == 0.0


def test_the_last_minute_rate_forgets_older_samples_and_stays_bounded() -> None:
    rates = Rates(window_s=60.0)
    done = 0
    for second in range(1, 600):
        done += 1 if second < 300 else 5  # 1 doc/s, then 5 docs/s
        rates.add(float(second), done)
    now = 599.0
    assert rates.recent(now, done) == pytest.approx(5.0, rel=0.02)
    assert rates.steady(now, done) == pytest.approx((done - 1) / 598)  # the whole run's, slower
    assert len(rates.samples) <= 62  # one per second in the window, whatever the run's length


def test_samples_closer_than_a_second_are_not_kept() -> None:
    rates = Rates()
    for tick in range(100):
        rates.add(tick * 0.01, tick)
    assert len(rates.samples) == 1


def test_clock_is_hours_minutes_seconds() -> None:
    assert clock(None) is None
    assert clock(0) == "0:00:00"
    assert clock(3725.4) == "1:02:05"


def test_the_progress_log_line_carries_the_eta_and_both_rates(monkeypatch: pytest.MonkeyPatch) -> None:
    now = [100.0]
    monkeypatch.setattr(progress_module.time, "perf_counter", lambda: now[0])
    run = Progress(1000, "job", stream=io.StringIO(), live=False, every_seconds=10.0)
    run.stage("generating")
    with structlog.testing.capture_logs() as lines:
        for second, done in ((110, 100), (120, 200), (130, 300)):
            now[0] = float(second)
            run.update(done, 0)
    shown = [line for line in lines if line["event"] == "progress"]
    assert len(shown) == 3
    last = shown[-1]
    assert last["docs_per_s_last_min"] == pytest.approx(10.0)
    assert last["eta_s"] == 70  # 700 left at (300 - 100) / 20 s
    assert last["eta"] == "0:01:10"
    assert shown[0]["eta_s"] is None  # no rate yet at the first documents
