"""Smaller faults of issue 19 around committed output, on real Parquet, the real committer and real DuckDB."""

from __future__ import annotations

import json
from datetime import date, datetime, timezone

import pyarrow as pa

from pipeline.config import load_config
from pipeline.output.commit import PartitionCommitter
from pipeline.output.layout import OutputLayout
from pipeline.output.query import connect
from pipeline.partition import partition_for
from pipeline.run import plan_one
from pipeline.storage import storage_for
from tests.conftest import write_config, write_docs

INVOICE = {"invoice_number": "A-1", "vendor": {"name": "Acme", "address": None}, "customer": None,
           "issue_date": "2026-01-02", "due_date": None, "currency": "USD", "items": [], "total": 1.0}


def commit_one(cfg, day: date, doc_id: str) -> None:
    """Commit one partition holding one row, through the real committer (no engine: the outcome is made here,
    in the shape the actors emit)."""
    loaded = load_config(cfg)
    p = partition_for(loaded.input_uri, day)
    pinput = plan_one(loaded, p)
    storage = storage_for(loaded.output_uri)
    committer = PartitionCommitter(storage, OutputLayout(loaded.output_uri), loaded.contract, "m",
                                   loaded.output_hash, "run-1")
    committer.prepare(p, fresh=True)
    outcome = pa.table({
        "doc_id": [doc_id], "_kind": ["row"], "_record": [json.dumps(INVOICE)], "_reason": pa.nulls(1, pa.string()),
        "_error": pa.nulls(1, pa.string()), "_raw_output": ["{}"], "_finish_reason": ["stop"],
        "_prompt_tokens": pa.array([1], pa.int64()), "_output_tokens": pa.array([1], pa.int64()),
        "_schema_hash": [loaded.contract.hash],
        "_extracted_at": pa.array([datetime.now(timezone.utc)], pa.timestamp("us", tz="UTC")),
    })
    committer.stage(p, pinput.units[0].id, outcome)
    committer.commit(pinput, 0.0, 0)


def test_query_reads_partition_keys_only_below_the_output_root(tmp_path):
    """An output under a `k=v` folder (…/currency=FAKE/inv) made every row's `currency` read FAKE."""
    (tmp_path / "in").mkdir()
    write_docs(tmp_path / "in" / "2026-11-01.parquet", ["a"], ["A-1 1.0"])
    output = tmp_path / "currency=FAKE" / "inv"
    cfg = write_config(tmp_path, **{"input.uri": str(tmp_path / "in" / "{date}.parquet"), "output.uri": str(output)})
    commit_one(cfg, date(2026, 11, 1), "a")
    con = connect(load_config(cfg))
    assert con.sql("SELECT doc_id, currency, dt FROM rows").fetchall() == [("a", "USD", date(2026, 11, 1))]
    assert con.sql("SELECT count(*) FROM dead_letters").fetchall() == [(0,)]


def test_query_takes_the_output_folder_as_well_as_the_config(tmp_path, capsys):
    from pipeline.cli.main import parser
    from pipeline.cli.query import cmd_query

    (tmp_path / "in").mkdir()
    write_docs(tmp_path / "in" / "2026-11-01.parquet", ["a"], ["A-1 1.0"])
    output = tmp_path / "out"
    cfg = write_config(tmp_path, **{"input.uri": str(tmp_path / "in" / "{date}.parquet"), "output.uri": str(output)})
    commit_one(cfg, date(2026, 11, 1), "a")
    assert connect(str(output)).sql("SELECT doc_id, dt FROM rows").fetchall() == [("a", date(2026, 11, 1))]
    for target in (str(cfg), str(output)):
        assert cmd_query(parser().parse_args(["query", target, "SELECT doc_id FROM rows", "--format", "json"])) == 0
        assert capsys.readouterr().out.strip().splitlines()[-1] == '{"doc_id": "a"}'
