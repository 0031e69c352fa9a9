"""Issue 58 on a job of its own (tests/fixtures/listings.py, the simulated engine): docs/first-job.md's sequence
(run, then eval, then report) files the eval under the run that holds the rows; eval lists the wrong values with
their snippets; the report writes a page per document, checked in headless Chromium (values at their spans, hostile
text escaped)."""

from __future__ import annotations

import csv
import html
import io
import json
import os
import re
from pathlib import Path

import pytest

from tests.conftest import joining, run_cli, run_main
from tests.fixtures.listings import HOSTILE, write_listing_job
from tests.unit.test_report import chromium

CHROMIUM = Path("/usr/bin/chromium")
PRICE = {"per_million_input_tokens": 1000.0, "per_million_output_tokens": 4000.0}
needs_chromium = pytest.mark.skipif(not CHROMIUM.exists(), reason=f"no {CHROMIUM}: `make browser` installs Debian's "
                                    "chromium (root or sudo) for the report's rendering check")


@pytest.fixture(scope="module")
def listings(tmp_path_factory, ray_head):
    # The run joins the session's Ray cluster (no local cluster started and stopped for one run).
    folder = tmp_path_factory.mktemp("listings")
    config, gold = write_listing_job(folder, **{"output.cost": PRICE})
    env = {**joining(ray_head), "PYTHONPATH": f"{Path(__file__).parents[2]}:{folder}"}
    steps = {"run": run_cli(["run", str(config)], env, cwd=folder)}
    # eval and report read the committed output and start nothing: in this process (run_main)
    for name, args in (("eval", ["eval", config, "--gold", gold]),
                       ("csv", ["eval", config, "--gold", gold, "--format", "csv"]),
                       ("report", ["report", folder / "out", "--out", folder / "report"])):
        steps[name] = run_main(args, cwd=folder)
    for name, step in steps.items():
        assert step.returncode == 0, (name, step.stderr[-3000:])
    records = [json.loads(p.read_text()) for p in (folder / "out" / "_runs").glob("*.json")]
    (record,) = [r for r in records if r["status"] == "committed"]  # eval started no run of its own, twice
    assert all(r["input_rows"] == 0 and r["status"] == "failed" for r in records if r is not record)  # a retry's
    return {"folder": folder, "steps": steps, "run_id": record["run_id"], "record": record,
            "pages": folder / "report" / record["run_id"]}


@pytest.mark.engine
@pytest.mark.slow
def test_eval_after_run_files_its_scores_under_the_run_that_holds_the_rows(listings):
    run_id, folder = listings["run_id"], listings["folder"]
    assert listings["record"]["rows"] == 5
    assert [p.name for p in (folder / "out" / "_eval").iterdir()] == [run_id]
    report = json.loads((folder / "out" / "_eval" / run_id / "eval.json").read_text())
    assert report["run_ids"] == [run_id]
    assert f"scoring run {run_id}" in listings["steps"]["eval"].stderr
    index = (folder / "report" / "index.html").read_text()
    line = next(row for row in index.split("<tr>") if f">{run_id}</a>" in row)  # the run's line links its page
    assert f">{report['overall']['f1']:.3f}<" in line
    page = (listings["pages"] / "report.html").read_text()
    assert 'id="eval"' in page and "F1 (extract eval)" in page


@pytest.mark.engine
@pytest.mark.slow
def test_eval_lists_wrong_missed_and_invented_values_most_frequent_field_first(listings):
    report = json.loads((listings["folder"] / "out" / "_eval" / listings["run_id"] / "eval.json").read_text())
    mistakes = report["mistakes"]
    assert list(mistakes) == ["deposit", "rent", "city"]  # 3 mistakes, 2, 1
    assert [(m["doc_id"], m["kind_word"]) for m in mistakes["deposit"]] == [("l-1", "missed"), ("l-2", "missed"),
                                                                             ("l-6", "invented")]
    rent = {m["doc_id"]: m for m in mistakes["rent"]}
    assert rent["l-1"]["gold"] == 2300 and rent["l-1"]["predicted"] == 2.3 and "⟦2.300⟧" in rent["l-1"]["snippet"]
    assert rent["l-2"]["predicted"] == 8010 and "Studio in Graz, ⟦8010⟧ Graz" in rent["l-2"]["snippet"]
    assert rent["l-2"]["gold_snippet"].startswith("Studio in Graz, 8010 Graz. Rent EUR ⟦750⟧")
    md = (listings["folder"] / "out" / "_eval" / listings["run_id"] / "eval.md").read_text()
    assert md.index("### deposit") < md.index("### rent") < md.index("### city")
    assert "| l-1 | wrong | 2300 | 2.3 |" in md
    rows = list(csv.DictReader(io.StringIO(listings["steps"]["csv"].stdout)))
    assert [(r["field"], r["doc_id"], r["kind"]) for r in rows] == [
        (f, m["doc_id"], m["kind_word"]) for f, items in mistakes.items() for m in items]
    assert rows[3]["gold"] == "2300" and rows[3]["predicted"] == "2.3"


@pytest.mark.engine
@pytest.mark.slow
def test_the_run_page_links_each_document_to_its_page(listings):
    page = (listings["pages"] / "report.html").read_text()
    links = dict(re.findall(r'<a class="doclink" href="(docs/[^"]+)">([^<]+)</a>', page))
    assert set(links.values()) >= {"l-1", "l-2", "l-4", "l-5", "l-6"}  # rows, the dead letter, the wrong values
    for href in links:
        assert (listings["pages"] / href).is_file()
    assert "More: <code>extract query" in page  # l-5 is a dead letter


@pytest.mark.engine
@pytest.mark.slow
def test_tokens_and_cost_in_the_summary_the_manifest_and_the_report(listings):
    import pyarrow.parquet as pq

    out = listings["folder"] / "out"
    tables = [pq.read_table(f) for kind in ("rows", "dead_letters") for f in (out / kind).rglob("*.parquet")]
    prompt = sorted(v for t in tables for c in ("_prompt_tokens", "prompt_tokens") if c in t.column_names
                    for v in t.column(c).to_pylist() if v is not None)  # l-5 never reached the model
    output = [v for t in tables for c in ("_output_tokens", "output_tokens") if c in t.column_names
              for v in t.column(c).to_pylist() if v is not None]
    usage = listings["record"]["usage"]
    assert usage["documents"] == 6 and usage["prompt_tokens"] == sum(prompt) and usage["output_tokens"] == sum(output)
    assert len(prompt) == 5 and usage["prompt_per_document"]["p50"] == prompt[2]  # nearest rank of 5
    expected = (sum(prompt) * 1000.0 + sum(output) * 4000.0) / 1e6
    assert usage["cost"]["total"] == pytest.approx(expected, abs=1e-6)
    assert usage["cost"]["per_1000_documents"] == pytest.approx(expected / 6 * 1000, abs=1e-3)
    summary = listings["steps"]["run"].stdout
    assert f"tokens     prompt {sum(prompt)} (per document p50 {prompt[2]}" in summary
    assert f"cost       {usage['cost']['total']:.4f}, " in summary
    assert "docs/s over wall time with start-up" in summary
    index = (listings["folder"] / "report" / "index.html").read_text()
    assert f"{sum(prompt):,} + {sum(output):,}" in index and f"{usage['cost']['total']:.4f}" in index
    page = (listings["pages"] / "report.html").read_text()
    assert 'id="usage"' in page and "cost per 1,000 documents" in page


def _page(listings, doc_id: str) -> Path:
    return next(p for p in (listings["pages"] / "docs").glob("*.html") if f'<h1 id="doc-id">{doc_id}</h1>'
                in p.read_text())


@needs_chromium
@pytest.mark.engine
@pytest.mark.slow
def test_document_pages_in_chromium_values_at_their_spans_and_hostile_text_escaped(listings, tmp_path):
    dom = chromium(["--dump-dom", _page(listings, "l-4").as_uri()], tmp_path / "profile").stdout
    assert dom.count("<script") == 1  # the page's own; the document's <script> is text
    marks = re.findall(r'<mark class="([^"]+)" data-field="([^"]+)"[^>]*>(.*?)</mark>', dom)
    by_field = {field: (css, html.unescape(text)) for css, field, text in marks}
    # the value at its span, as text, coloured by its confidence (the simulated engine's seeded log-probabilities)
    assert by_field["city"][1] == "<b>Salzburg</b>"
    assert by_field["city"][0] in ("c-high", "c-mid", "c-low")
    assert HOSTILE[5:20] == "<b>Salzburg</b>" and by_field["rent"][1] == "1200"
    document = re.search(r'<div class="doctext" id="document">(.*?)</div>', dom, re.S).group(1)
    assert html.unescape(re.sub(r"<[^>]+>", "", document)) == HOSTILE  # the whole document, nothing lost
    assert re.search(r'data-field="city" data-verdict="wrong">.*?<code>Salzburg</code>', dom, re.S)

    dom = chromium(["--dump-dom", _page(listings, "l-2").as_uri()], tmp_path / "profile").stdout
    marks = re.findall(r'<mark class="([^"]+)" data-field="([^"]+)"[^>]*>(.*?)</mark>', dom)
    assert ("gold", "rent (gold)", "750") in marks  # the gold value's own place, beside the wrong one
    assert re.search(r'data-field="deposit" data-verdict="missed">', dom)

    dom = chromium(["--dump-dom", _page(listings, "l-5").as_uri()], tmp_path / "profile").stdout
    assert '<b id="status">empty_input</b>' in dom and 'id="raw-output"' in dom


@pytest.mark.slow
def test_validate_flags_few_shot_examples_that_all_leave_a_field_null(tmp_path):
    examples = tmp_path / "examples.jsonl"
    examples.write_text(
        '{"document": "Flat in Wien 1010, rent EUR 900.", "output": {"city": "Wien", "postcode": "1010", '
        '"rent": 900, "deposit": null}}\n'
        '{"document": "Room in Graz 8020, rent EUR 400.", "output": {"city": "Graz", "postcode": "8020", '
        '"rent": 400, "deposit": null}}\n')
    config, _ = write_listing_job(tmp_path, examples=str(examples))
    env = {**os.environ, "PYTHONPATH": f"{Path(__file__).parents[2]}:{tmp_path}"}
    done = run_cli(["validate", str(config)], env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "warning  examples: every example leaves deposit null" in done.stdout
    assert "every example leaves rent null" not in done.stdout and "same city" not in done.stdout
