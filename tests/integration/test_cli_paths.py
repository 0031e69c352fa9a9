"""Paths as a shell user expects them: a path on the command line is relative to the working directory (a path in
extract.yaml to that file), `./out/x` is `out/x`, the report's pages never land inside the output they report on,
and the hint a page prints runs when pasted somewhere else. Real Parquet and DuckDB; the CLI's `main` in this process
(`run_main`, in the working folder each case names): the subject is how paths resolve, not a child's start."""

from __future__ import annotations

import html
import json
import re
import shlex
from pathlib import Path

import pytest

from tests.conftest import run_main, write_config
from tests.unit.test_report import write_output


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    """work/jobs/extract.yaml (its own output.uri elsewhere) and a committed output at work/out/invoices."""
    work = tmp_path_factory.mktemp("paths") / "work"
    (work / "jobs").mkdir(parents=True)
    config = write_config(work / "jobs", **{"output.uri": "../elsewhere"})
    output = write_output(work / "out" / "invoices")
    return {"dir": work, "config": config, "output": output}


def _count(done) -> int:
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[0])["n"]


def test_query_paths_on_the_command_line_follow_the_working_directory(work):
    sql = "SELECT count(*) AS n FROM rows"
    via_config = run_main(["query", "jobs/extract.yaml", "--set", "output.uri=out/invoices", sql, "--format", "json"],
                          cwd=work["dir"])
    assert _count(via_config) == 3  # not work/jobs/out/invoices
    for spelled in ("out/invoices", "./out/invoices", str(work["output"])):
        assert _count(run_main(["query", spelled, sql, "--format", "json"], cwd=work["dir"])) == 3


def test_report_pages_never_land_inside_the_output_and_its_hint_runs_anywhere(work):
    site = work["dir"].parent / "site"
    runs = write_output(site / "out") / "_runs"  # an output named ./out
    record = json.loads((runs / "r2.json").read_text())
    (runs / "r2.json").write_text(json.dumps({**record, "config_path": str(work["config"])}))
    done = run_main(["report", "out", "--format", "json"], cwd=site)
    assert done.returncode == 0, done.stderr[-2000:]
    summary = json.loads(done.stdout)
    index = Path(summary["index"])
    assert index == site / "out-report" / "index.html" and index.is_file()
    assert not (site / "out" / "report").exists()
    assert [run["run_id"] for run in summary["runs"]] == ["r2", "r1"] and summary["newest"]["run_id"] == "r2"
    assert summary["newest"]["counts"] and summary["newest"]["page"].endswith("r2/report.html")

    one = run_main(["report", "./out", "--run", "r1", "--format", "json"], cwd=site)
    assert one.returncode == 0, one.stderr[-2000:]
    assert json.loads(one.stdout)["run_id"] == "r1"
    assert json.loads(one.stdout)["page"] == str(site / "out-report" / "r1" / "report.html")

    page = (index.parent / "r2" / "report.html").read_text()
    hint = html.unescape(re.search(r"More: <code>(.*?)</code>", page).group(1))
    words = shlex.split(hint)
    # through the output folder, never a config the run record names (issue 55: reading an output runs no code)
    assert words[:3] == ["extract", "query", str(site / "out")]
    pasted = run_main(words[1:], cwd=work["dir"])  # pasted in another folder (`extract` is run_main's)
    assert pasted.returncode == 0, f"{hint}\n{pasted.stderr[-2000:]}"
    assert "semantic_invalid" in pasted.stdout or "truncated" in pasted.stdout


def test_eval_prints_its_scores_as_json_for_a_script(work):
    site = work["dir"].parent / "scored"
    write_output(site / "out")  # run r1 committed day 1 (rows a, b; dead letter c)
    (site / "ticket.schema.json").write_text(json.dumps({"type": "object",
                                                         "properties": {"ticket": {"type": "string"}}}))
    write_config(site, **{"output.uri": "out", "input.id_column": "ticket", "schema_file": "ticket.schema.json",
                          "schema": None, "examples": False})
    (site / "gold.jsonl").write_text("".join(json.dumps({"ticket": t, "record": {}}) + "\n" for t in "abc"))
    done = run_main(["eval", "extract.yaml", "--gold", "gold.jsonl", "--run", "r1", "--format", "json"], cwd=site)
    assert done.returncode == 0, done.stderr[-2000:]
    scores = json.loads(done.stdout)  # stdout is the JSON alone
    assert scores["run_ids"] == ["r1"] and "overall" in scores
    assert (site / "out" / "_eval" / "r1" / "eval.json").is_file()  # still written
