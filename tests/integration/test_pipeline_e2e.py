"""The whole path on real components: Ray, vLLM on the bundled model, Parquet, DuckDB: one real run of a tickets
job (every pre- and post-generation reason, typed rows with lineage, confidence and spans from vLLM's
log-probabilities), its rerun, and a forced rerun on the simulated engine. The sample job's own run through the CLI
(dates as dates, its confidence and spans, the docs' query) is test_eval.py's, on the simulated engine."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import duckdb
import pytest

from pipeline.config import load_config
from pipeline.run import run_job
from tests.conftest import ROOT, write_config, write_docs

pytestmark = pytest.mark.engine

TICKETS = {
    "t-1": "From: Dana Whitfield <dana@example.com>\nSubject: Router keeps rebooting\n\nMy HomeLink X2 router "
           "reboots every hour since the last update. This is urgent, we run a shop on it.",
    "t-2": "Hi, this is Omar. The PixelPad tablet I bought arrived with a cracked screen. Please send a "
           "replacement. Not urgent. omar.k@example.org",
    "t-3": "Customer: Lena Schulz\nProduct: CloudSync subscription\nI was charged twice this month. Please refund "
           "one charge.",
    "t-reject": "REJECT-ME\nFrom: Sam Park <sam@example.com>\nThe SmartKettle does not turn on.",
    "t-empty": "",
    "t-null": None,
    "t-long": "Ticket transcript follows. " + "The customer repeated the same complaint about the printer. " * 400,
}
EXPECTED_REASONS = {"t-reject": "semantic_invalid", "t-empty": "empty_input", "t-null": "empty_input",
                    "t-long": "input_too_long"}


@pytest.fixture(scope="module")
def job_dir(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("tickets")
    write_docs(folder / "tickets.parquet", list(TICKETS), list(TICKETS.values()))
    # The schema module sits beside the config, as it would in a `ray job submit --working-dir`.
    shutil.copy(ROOT / "tests" / "fixtures" / "models.py", folder / "ticket_models.py")
    return folder


def ticket_config(job_dir: Path, output: Path, simulated: dict | bool = False, **overrides) -> Path:
    cfg = write_config(
        job_dir,
        simulated=simulated,
        name="tickets",
        schema="ticket_models:Ticket",
        prompt="Extract the support ticket from this message.\n{document}",
        **{"input.uri": "tickets.parquet", "output.uri": str(output), "model.max_tokens": 256,
           "model.max_model_len": 1024, "model.engine_kwargs": {"enforce_eager": True},
           "input.long_documents": "dead_letter",  # t-long is this job's input_too_long (windows: test_contracts)
           "workers.batch_size": 4, **overrides},
    )
    return cfg


@pytest.fixture(scope="module")
def first_run(ray_cluster, job_dir):
    output = job_dir / "out"
    manifest = run_job(load_config(ticket_config(job_dir, output)))
    return manifest, output


def query(sql: str):
    return duckdb.sql(sql).fetchall()


def test_accounting_holds_and_every_document_is_accounted_once(first_run):
    manifest, output = first_run
    assert manifest.status == "committed"
    assert manifest.input_rows == len(TICKETS) == manifest.rows + manifest.dead_letters
    ids = [r[0] for r in query(
        f"SELECT doc_id FROM read_parquet('{output}/rows/*.parquet') "
        f"UNION ALL SELECT doc_id FROM read_parquet('{output}/dead_letters/*.parquet')"
    )]
    assert sorted(ids) == sorted(TICKETS)
    saved = json.loads((output / "_runs" / f"{manifest.run_id}.json").read_text())
    assert saved["input_rows"] == saved["rows"] + saved["dead_letters"]
    assert sum(saved["dead_letters_by_reason"].values()) == saved["dead_letters"]
    assert saved["timings"]["engine_init_s"] > 0 and saved["timings"]["schema_compile_s"] > 0
    assert not [p for p in (output / "_staging").rglob("*") if p.is_file()]
    assert (output / "_partitions" / "all" / "manifest.json").exists()  # the commit point (docs/outputs.md)


def test_each_pre_and_post_generation_reason_is_produced(first_run):
    _, output = first_run
    got = dict(query(f"SELECT doc_id, reason FROM read_parquet('{output}/dead_letters/*.parquet')"))
    for doc_id, reason in EXPECTED_REASONS.items():
        assert got.get(doc_id) == reason, (doc_id, got)


def test_semantic_invalid_carries_every_error_with_location_message_and_type(first_run):
    _, output = first_run
    (error, raw, finish), = query(
        f"SELECT error, raw_output, finish_reason FROM read_parquet('{output}/dead_letters/*.parquet') "
        "WHERE doc_id = 't-reject'"
    )
    details = json.loads(error)
    assert details["errors"] and all({"loc", "msg", "type"} <= set(e) for e in details["errors"])
    assert any("REJECT-ME" in e["msg"] for e in details["errors"])
    assert finish == "stop"
    json.loads(raw)  # the grammar made it parseable; only the validator refused it


def test_rows_are_typed_and_carry_lineage(first_run):
    manifest, output = first_run
    types = dict(query(f"SELECT column_name, column_type FROM (DESCRIBE SELECT * FROM "
                       f"read_parquet('{output}/rows/*.parquet'))"))
    assert types["customer"].startswith("STRUCT(")
    assert types["priority"] == "VARCHAR"
    assert types["_extracted_at"] == "TIMESTAMP WITH TIME ZONE"
    rows = query(f"SELECT doc_id, customer.name, priority, _run_id, _schema_name, _schema_version, _schema_hash, "
                 f"_model FROM read_parquet('{output}/rows/*.parquet')")
    assert rows, "the model produced no valid ticket at all"
    for doc_id, name, priority, run_id, schema_name, version, schema_hash, model in rows:
        assert doc_id in {"t-1", "t-2", "t-3"}
        assert priority in {"low", "normal", "high"} and name
        assert (run_id, schema_name, version, model) == (manifest.run_id, "ticket", "2", "bundled")
        assert schema_hash == manifest.schema["hash"]


def test_rerun_of_a_committed_partition_is_a_no_op(first_run, job_dir):
    first, output = first_run
    (rows_file,) = (output / "rows").glob("part-*.parquet")
    before = rows_file.stat().st_mtime_ns
    again = run_job(load_config(ticket_config(job_dir, output)))
    assert again.partitions == [dict(again.partitions[0], status="skipped")]
    assert again.rows == 0 and rows_file.stat().st_mtime_ns == before


def test_tiny_token_budget_truncates_and_a_forced_rerun_replaces_the_output(first_run, job_dir):
    _, first_output = first_run
    output = job_dir / "rerun"
    shutil.copytree(first_output, output)
    # The simulated engine (the forced rerun is the subject): it cuts an output at max_tokens as vLLM does.
    config = ticket_config(job_dir, output, simulated=True, **{"model.max_tokens": 3, "input.limit": 3})
    manifest = run_job(load_config(config), force=True)
    dead = query(f"SELECT doc_id, reason, finish_reason, output_tokens, run_id "
                 f"FROM read_parquet('{output}/dead_letters/*.parquet') ORDER BY doc_id")
    assert [d[0] for d in dead] == ["t-1", "t-2", "t-3"]
    assert all(d[1:4] == ("truncated", "length", 3) and d[4] == manifest.run_id for d in dead)
    assert query(f"SELECT count(*) FROM read_parquet('{output}/rows/*.parquet')") == [(0,)]
    assert len(list((output / "_runs").glob("*.json"))) == 3


def test_a_real_runs_rows_say_how_sure_and_where_the_document_writes_each_value(first_run, job_dir):
    """vLLM's log-probabilities become `_confidence` (each leaf in (0, 1], the least of them `_min_confidence`) and
    every place `_spans` names writes its leaf's value in the document; the docs' confidence query runs on it.
    (The sample job's rows, typed and with spans, on the simulated engine: test_eval.py.)"""
    from pipeline.output.query import run_query

    _, output = first_run
    rows = query(f"SELECT doc_id, customer.name, product, _confidence, _min_confidence, _spans "
                 f"FROM read_parquet('{output}/rows/*.parquet')")
    assert rows, "the model produced no valid ticket at all"
    for doc_id, name, product, confidence, lowest, spans in rows:
        assert confidence and all(0 < v <= 1 for v in confidence.values()), confidence
        assert lowest == min(confidence.values())
        values = {"customer.name": name, "product": product}
        for path, places in spans.items():
            assert path in confidence, (path, confidence)
            for place in places:
                written = TICKETS[doc_id][place["start"]:place["end"]]
                assert written, (doc_id, path, place)
                if isinstance(values.get(path), str):
                    assert written == values[path], (doc_id, path, written, values[path])
    found = run_query(str(output), confidence_query()).fetchall()
    assert found and all(0 < conf <= 1 for _, _, conf, _ in found)
    assert [c for _, _, c, _ in found] == sorted(c for _, _, c, _ in found)


def confidence_query() -> str:
    """docs/outputs.md's query of the least sure values."""
    import re

    docs = (ROOT / "docs" / "outputs.md").read_text()
    return re.search(r"<!-- confidence-query -->\n```sql\n(.*?)```", docs, re.S).group(1)
