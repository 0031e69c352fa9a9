"""`extract bench --quick`: a smoke run of every arm; asserts only that the report exists and is well formed."""

from __future__ import annotations

import json

import pytest

from pipeline.tools.bench import COLUMNS
from tests.conftest import run_cli

pytestmark = pytest.mark.engine

ARMS = ("engine", "unconstrained", "retry", "pipeline")


def test_quick_bench_writes_json_markdown_and_chart(tmp_path, cli_env):
    out = tmp_path / "bench"
    result = run_cli(["bench", "--quick", "--docs", "2", "--price-rounds", "2", "--out", str(out)], cli_env,
                     timeout=900)
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads((out / "bench.json").read_text())
    # A job that speculates (the CPU default) also gets the engine arm without speculation.
    assert report["docs"] == 2 and set(ARMS) <= set(report["arms"]) <= {*ARMS, "engine_no_speculation"}
    for name in report["arms"]:
        arm = report["arms"][name]
        assert arm["docs"] == 2 and arm["docs_per_s"] > 0 and 0 <= arm["valid_rate"] <= 1
        assert 0 <= arm["field_accuracy"] <= 1
    assert report["arms"]["retry"]["retries"] >= 0
    assert report["arms"]["pipeline"]["driver_peak_rss_mb"] > 0
    assert set(report["ratios"]) == {"pipeline_over_engine", "constrained_over_unconstrained_per_token",
                                     "pipeline_over_retry", "pipeline_over_engine_tokens",
                                     "engine_speculation_speedup"}
    assert (report["ratios"]["engine_speculation_speedup"] is None) == ("engine_no_speculation" not in report["arms"])
    assert all(v is None or v > 0 for v in report["ratios"].values())
    price = report["constraint_price"]  # both sides timed twice, alternating
    assert price["rounds"] == 2
    assert len(price["constrained_s"]) == len(price["equal_length_unconstrained_s"]) == 2
    markdown = (out / "bench.md").read_text()
    assert all(f"| {name} |" in markdown for name in report["arms"])
    assert all(title in markdown for title, _ in COLUMNS)
    assert (out / "bench.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
