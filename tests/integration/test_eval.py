"""`extract eval`: the scorer's rules on hand-computed cases, output reading on hand-made committed
partitions, and one run of the sample job scored against the sample gold. The run is on the simulated engine
(`model.simulated.outputs`): the subject is the scorer on a committed run (rows, dead letters, the reports), not
the model; it answers four of the six documents with their gold records (exact rows) and the other two with
schema-made records, which the sample's validators refuse (dead letters). A real model's F1 is the bench's
(`extract bench`, test_bench.py) and the first-job page's (test_first_job.py)."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest

from tests.conftest import ROOT, SAMPLE, gold_answers, joining, run_cli, run_main, write_config

SAMPLE_GOLD = ROOT / "jobs" / "sample" / "invoices_gold.jsonl"
ANSWERED = 4  # of the six documents scored, those the simulated engine answers with their gold record


# -- leaves --------------------------------------------------------------------------------------


# -- records ---------------------------------------------------------------------------------------


# -- gold files ------------------------------------------------------------------------------------


# -- reading committed output (real Parquet, hand-made partitions) ---------------------------------


# -- one run: the sample job on six documents, scored against the sample gold -----------------------


@pytest.fixture(scope="module")
def sample_eval(tmp_path_factory, cli_env_module):
    folder = tmp_path_factory.mktemp("eval")
    first = pq.read_table(SAMPLE, columns=["doc_id"]).column("doc_id").to_pylist()[:ANSWERED]
    answers = gold_answers(folder / "answers.jsonl", first)
    cfg = write_config(folder, {"outputs": str(answers)}, **{"workers.batch_size": 6})
    gold = SAMPLE_GOLD  # jobs/sample/make_invoices.py writes it in the Invoice contract's shape
    result = run_cli(["eval", str(cfg), "--gold", str(gold), "--limit", "6", "--unordered", "items"], cli_env_module)
    return folder, cfg, gold, result


@pytest.fixture(scope="module")
def cli_env_module(ray_head):
    """`cli_env` for the module's fixture: runs join the session's Ray cluster."""
    return joining(ray_head)


@pytest.mark.engine
def test_sample_eval_writes_consistent_reports(sample_eval):
    folder, _, _, result = sample_eval
    assert result.returncode == 0, result.stderr[-3000:]
    out = folder / "out"
    (run_file,) = (out / "_runs").glob("*.json")
    run_id = run_file.stem
    report_dir = out / "_eval" / run_id
    report = json.loads((report_dir / "eval.json").read_text())
    md = (report_dir / "eval.md").read_text()
    (rows_file,), (dead_file,) = (out / "rows").glob("part-*.parquet"), (out / "dead_letters").glob("part-*.parquet")
    rows, dead = pq.read_table(rows_file), pq.read_table(dead_file)

    docs, o = report["documents"], report["overall"]
    assert report["run_ids"] == [run_id]
    assert docs["gold"] == 50 and docs["scored"] == 6 and docs["gold_not_in_run"] == 44
    assert rows.num_rows == ANSWERED and dead.num_rows == 6 - ANSWERED  # the gold answers rows; the rest refused
    assert docs["with_row"] == rows.num_rows and docs["dead_letters"] == dead.num_rows
    assert o["coverage"] == round(rows.num_rows / 6, 4)
    assert sum(v["count"] for v in report["dead_letters_by_reason"].values()) == dead.num_rows
    assert report["dead_letters_by_reason"] == {
        r: {"count": n, "rate": round(n / 6, 4)} for r, n in sorted(
            {r: dead.column("reason").to_pylist().count(r) for r in set(dead.column("reason").to_pylist())}.items())}
    leaves = o["leaves"]
    for key in ("gold", "predicted", "correct", "wrong", "missed", "spurious"):
        assert leaves[key] == sum(f[key] for f in report["fields"].values())
    assert leaves["gold"] == leaves["correct"] + leaves["wrong"] + leaves["missed"]
    assert o["precision"] == (round(leaves["correct"] / leaves["predicted"], 4) if leaves["predicted"] else None)
    assert o["recall"] == round(leaves["correct"] / leaves["gold"], 4)
    per_doc = report["per_document"]
    assert sum(d["correct"] for d in per_doc) == leaves["correct"]
    assert o["exact_match_rate"] == round(sum(d["exact"] for d in per_doc) / 6, 4)
    assert {d["doc_id"] for d in per_doc if d["status"] == "row"} == set(rows.column("doc_id").to_pylist())
    assert all(d["exact"] for d in per_doc if d["status"] == "row")  # a gold answer scores exact
    assert o["exact_match_rate"] == round(ANSWERED / 6, 4) and o["precision"] == 1.0
    # every Invoice field path is reported, and nothing outside the contract was asked for
    assert set(report["fields"]) == {"invoice_number", "vendor.name", "vendor.address", "customer", "issue_date",
                                     "due_date", "currency", "items[]", "total"}
    assert report["not_in_schema"] == {}
    assert md.startswith(f"# extract eval: invoices run {run_id}")
    assert f"| coverage | {o['coverage']:.3f} |" in md
    assert "| items[] |" in md and "| vendor.name |" in md
    assert f"wrote {report_dir / 'eval.json'}" in result.stdout
    # reach: every scored gold leaf is counted once, per field as eval names it, and shown in eval.md
    reach = report["reach"]
    assert reach["documents"] == 6 and reach["overall"]["gold"] == leaves["gold"]
    assert reach["overall"]["gold"] == sum(f["gold"] for f in reach["fields"].values())
    assert set(reach["fields"]) <= set(report["fields"]) and 0 <= reach["overall"]["reach"] <= 1
    assert f"| reach (gold values the grammar allows) | {reach['overall']['reach']:.3f}" in md


@pytest.mark.engine
def test_scoring_an_existing_run_gives_the_same_numbers(sample_eval):
    folder, cfg, gold, _ = sample_eval
    (run_file,) = (folder / "out" / "_runs").glob("*.json")
    # Scoring a committed run starts no run: in this process (run_main)
    again = run_main(["eval", cfg, "--gold", gold, "--run", run_file.stem, "--out", folder / "again",
                      "--unordered", "items"])
    assert again.returncode == 0, again.stderr[-3000:]
    first = json.loads((folder / "out" / "_eval" / run_file.stem / "eval.json").read_text())
    second = json.loads((folder / "again" / "eval.json").read_text())
    for key in ("documents", "overall", "fields", "dead_letters_by_reason", "per_document"):
        assert first[key] == second[key]
    missing = run_main(["eval", cfg, "--gold", gold, "--run", "no-such-run"])
    assert missing.returncode == 2 and "--run no-such-run: no such run" in missing.stderr


@pytest.mark.engine
def test_the_sample_runs_rows_are_typed_with_confidence_and_spans(sample_eval):
    """The sample job's committed rows, as `extract run` wrote them (the run eval started through the CLI): DuckDB
    reads dates as dates, structs and lists; each row says how sure each value is (the simulated engine's seeded
    log-probabilities: real vLLM's are test_pipeline_e2e.py's) and where the document writes it; the docs' query of
    the least sure values runs. Moved here from test_pipeline_e2e.py, whose own CLI run of the sample job took a vLLM
    engine."""
    import duckdb

    from pipeline.output.query import run_query
    from tests.integration.test_pipeline_e2e import confidence_query

    folder, _, _, result = sample_eval
    assert result.returncode == 0, result.stderr[-3000:]
    out = folder / "out"
    assert "committed" in result.stdout and "input      6 documents" in result.stdout
    con = duckdb.connect()
    types = dict(con.sql(f"SELECT column_name, column_type FROM (DESCRIBE SELECT * FROM "
                         f"read_parquet('{out}/rows/*.parquet'))").fetchall())
    assert types["issue_date"] == "DATE" and types["due_date"] == "DATE"
    assert types["vendor"].startswith("STRUCT(") and types["items"] == "VARCHAR[]"
    assert types["_confidence"] == "MAP(VARCHAR, DOUBLE)" and types["_min_confidence"] == "DOUBLE"
    assert types["_spans"] == 'MAP(VARCHAR, STRUCT("start" INTEGER, "end" INTEGER)[])'
    n_rows, = con.execute(f"SELECT count(*) FROM read_parquet('{out}/rows/*.parquet')").fetchone()
    n_dead, = con.execute(f"SELECT count(*) FROM read_parquet('{out}/dead_letters/*.parquet')").fetchone()
    assert n_rows + n_dead == 6
    texts = dict(zip(*pq.read_table(SAMPLE, columns=["doc_id", "text"]).to_pydict().values(), strict=True))
    rows = duckdb.connect().sql(f"SELECT doc_id, invoice_number, _confidence, _min_confidence, _spans "
                   f"FROM read_parquet('{out}/rows/*.parquet')").fetchall()
    assert rows
    for doc_id, number, confidence, lowest, spans in rows:
        assert confidence and all(0 < v <= 1 for v in confidence.values()), confidence
        assert lowest == min(confidence.values())
        for path, places in spans.items():  # every place a leaf points at writes it (numbers as the text does)
            assert path in confidence or path.startswith("items[")
            assert all(texts[doc_id][p["start"]:p["end"]] for p in places), (doc_id, path, places)
        if number is not None:  # the invoice number is grounded: the document writes it
            (first, *_) = spans["invoice_number"]
            assert texts[doc_id][first["start"]:first["end"]] == number
    found = run_query(str(out), confidence_query()).fetchall()
    assert found and all(0 < conf <= 1 for _, _, conf, _ in found)
    assert [c for _, _, c, _ in found] == sorted(c for _, _, c, _ in found)
