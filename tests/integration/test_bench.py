"""`extract bench --quick`: a smoke run of every arm; asserts only that the report exists and is well formed."""

from __future__ import annotations

import json

import duckdb
import pytest

from pipeline.tools.bench_report import COLUMNS
from tests.conftest import run_cli

pytestmark = pytest.mark.engine

ARMS = ("engine", "engine_same_requests", "unconstrained", "retry", "pipeline", "pipeline_no_confidence")


def _check_arms(report):
    # A job that speculates (the CPU default) also gets the engine arm without speculation.
    assert report["docs"] == 2 and set(ARMS) <= set(report["arms"]) <= {*ARMS, "engine_no_speculation"}
    for name in report["arms"]:
        arm = report["arms"][name]
        assert arm["docs"] == 2 and arm["docs_per_s"] > 0 and 0 <= arm["valid_rate"] <= 1
        assert 0 <= arm["field_accuracy"] <= 1 and arm["correct_leaves"] >= 0
    assert report["arms"]["retry"]["retries"] >= 0
    assert report["arms"]["pipeline"]["driver_peak_rss_mb"] > 0


def _check_same_requests_arm(report):
    # The pipeline's own requests in one engine call: the same prompts as the pipeline's actor sent (the job's
    # examples or schema in them, so longer than the engine arm's bare prompts), one grounded grammar per document,
    # and the job's sampling (the sample's presence penalty, and log-probabilities for _confidence).
    same, pipeline = report["arms"]["engine_same_requests"], report["arms"]["pipeline"]
    assert same["prompt_tokens"] == pipeline["prompt_tokens"] > report["arms"]["engine"]["prompt_tokens"]
    assert same["engine_calls"] == 1 and same["requests"] == same["distinct_grammars"] == 2
    assert same["sampling"] == {"presence_penalty": 1.0, "logprobs": 0}
    assert same["output_tokens"] > 0 and same["generate_s"] > 0 and same["build_s"] >= 0
    assert same["cpu_s"] > 0 and same["cores_used"] > 0  # the engine's process, over its timed call
    assert pipeline["cores_used"] is None or pipeline["cores_used"] > 0  # its actor, from ready to the commit
    assert same["sequences_in_flight"] == 4  # the pipeline arm's batches: 1 document each, 4 in flight


def _check_ratios(report, out):
    """Every ratio the report gives, and the rows of the arm without _confidence (OUT's pipeline-plain-output)."""
    assert set(report["ratios"]) == {"pipeline_over_engine", "pipeline_over_engine_same_requests",
                                     "pipeline_over_engine_same_requests_tokens",
                                     "constrained_over_unconstrained_per_token",
                                     "pipeline_over_retry", "pipeline_over_engine_tokens",
                                     "engine_speculation_speedup", "confidence_over_plain",
                                     "confidence_over_plain_tokens",
                                     "pipeline_over_naive", "pipeline_over_naive_correct_leaves"}
    # The sample job has _confidence on (the default): the same run without it is an arm, whose rows carry none.
    assert report["ratios"]["confidence_over_plain"] is not None
    # The naive arm is `extract bench --naive` (an engine of its own), not part of the quick bench.
    assert "naive" not in report["arms"] and report["ratios"]["pipeline_over_naive"] is None
    plain_rows = sorted((out / "pipeline-plain-output" / "rows").rglob("*.parquet"))
    if plain_rows:  # at 24 tokens most invoices are truncated: there may be no row to look at
        files = ", ".join(f"'{f}'" for f in plain_rows)
        n_confident, = duckdb.connect().execute(
            f"SELECT count(_confidence) FROM read_parquet([{files}], union_by_name=true)").fetchone()
        assert n_confident == 0
    assert (report["ratios"]["engine_speculation_speedup"] is None) == ("engine_no_speculation" not in report["arms"])
    assert all(v is None or v > 0 for v in report["ratios"].values())


def _check_price_markdown_and_chart(report, out):
    price = report["constraint_price"]  # both sides timed twice, alternating
    assert price["rounds"] == 2
    assert len(price["constrained_s"]) == len(price["equal_length_unconstrained_s"]) == 2
    markdown = (out / "bench.md").read_text()
    assert report["machine"]["logical_cpus"] >= 1 and report["machine"]["torch"]  # what the figures ran on
    assert "\nMachine: " in markdown
    assert all(f"| {name} |" in markdown for name in report["arms"])
    assert all(title in markdown for title, _ in COLUMNS)
    assert (out / "bench.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_quick_bench_writes_json_markdown_and_chart(tmp_path, cli_env):
    out = tmp_path / "bench"
    # 24 output tokens: every arm, the retry loop and both price rounds still run; what they time is not checked
    # here, and the sample's outputs at --quick's 96 tokens made this the suite's slowest test (8 min on 2 busy
    # cores).
    # The timeout is a guard against a hang, not a figure: five engines start (the engine arms', the price's, the
    # same requests' and one per pipeline run), and on 2 cores shared with other runs (load average 45) 900 s was
    # not enough.
    result = run_cli(["bench", "--quick", "--docs", "2", "--max-tokens", "24", "--price-rounds", "2",
                      "--out", str(out)], cli_env, timeout=2400)
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads((out / "bench.json").read_text())
    _check_arms(report)
    _check_same_requests_arm(report)
    _check_ratios(report, out)
    _check_price_markdown_and_chart(report, out)


def test_simulated_bench_runs_its_cells_and_ceilings(tmp_path, cli_env):
    """`extract bench --simulate` with two small cells (one and two partitions): real runs on the simulated engine,
    every document an outcome, and the two ceilings measured in the same bench run."""
    out = tmp_path / "sim"
    result = run_cli(["bench", "--simulate", "--sim-cells", "2000:1:1,2000:2:2", "--out", str(out)], cli_env,
                     timeout=900)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    report = json.loads((out / "bench-sim.json").read_text())
    cells = {(c["docs"], c["actors"], c["partitions"]): c for c in report["cells"]}
    assert set(cells) == {(2000, 1, 1), (2000, 2, 2)}
    for cell in cells.values():
        assert cell["exit"] == 0 and cell["outcomes"] == 2000 and cell["status"] == "committed"
        assert cell["driver_cpu_s"] > 0 and cell["driver_peak_rss_mb"] > 0 and cell["staging_files_peak"] >= 0
    assert report["commit_ceiling"]["outcomes_per_s"] > 0 and report["commit_ceiling_partitions"]["partitions"] == 2
    assert report["ray_ceiling"]["rows"] == 2000
    assert "| 2000 | 2 | 2 | 0 |" in (out / "bench-sim.md").read_text()
    assert report["machine"]["usable_cpus"] >= 1 and "\nMachine: " in (out / "bench-sim.md").read_text()
    assert (out / "bench-sim.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
