"""`extract retry`'s merge step alone, on partitions committed by the real committer (no engine): the accounting
guard, attempts, a forced rerun after a retry, the committed days. The engine tests, the crash points and these
same tests on S3 are in tests/integration/test_retry.py.
"""

from __future__ import annotations

import json
import uuid
from datetime import date
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipeline.config import load_config
from pipeline.output.commit import PartitionCommitter
from pipeline.output.committed import CommittedOutput
from pipeline.output.layout import OutputLayout
from pipeline.output.manifest import AccountingError
from pipeline.output.query import connect
from pipeline.output.tables import RecordTables
from pipeline.partition import is_templated, partition_for
from pipeline.storage import storage_for
from pipeline.tools.retry import committed_days, load_state, merge_partition
from pipeline.units import plan_partition
from tests.conftest import s3_client, write_config, write_docs
from tests.fixtures.commits import outcomes


def state_of(cfg: Path) -> dict:
    """What a reader of the committed output sees: every id with its kind, reason and attempts."""
    con = connect(load_config(cfg))
    rows = con.sql("SELECT doc_id, _run_id FROM rows").fetchall()
    dead_columns = {c[0] for c in con.sql("DESCRIBE dead_letters").fetchall()}
    attempts = "attempts" if "attempts" in dead_columns else "1"
    dead = con.sql(f"SELECT doc_id, reason, {attempts}, run_id FROM dead_letters").fetchall()
    return {"rows": sorted(rows), "dead": sorted(dead)}


def _outcomes(contract_hash: str, rows: dict[str, dict], dead: dict[str, str], run_id: str) -> pa.Table:
    """Outcome rows as the actors emit them (`tests.fixtures.commits.outcomes`), with the run they belong to."""
    table = outcomes(contract_hash, rows, dead)
    return table.append_column("_run_id", pa.array([run_id] * table.num_rows, pa.string()))


INVOICE = {"invoice_number": "A-1", "vendor": {"name": "Acme", "address": None}, "customer": None,
           "issue_date": "2026-01-02", "due_date": None, "currency": "USD", "items": [], "total": 1.0}


def committed_partition(request, tmp_path):
    """A partition of four documents committed by the real committer (to a folder, as one day of a
    date-templated input, or to S3 on a moto server): one row, three dead letters."""
    day = date(2026, 11, 1) if request.param == "dated" else None
    (tmp_path / "dt=2026-11-01").mkdir()
    docs = write_docs(tmp_path / "dt=2026-11-01" / "docs.parquet", ["a", "b", "c", "d"], ["A-1 1.0", "b", "c", "d"])
    keys = {"input.uri": str(tmp_path / "dt={date}" / "docs.parquet") if day else str(docs)}
    if request.param == "s3":
        endpoint = request.getfixturevalue("s3_endpoint")
        bucket = f"retry-{uuid.uuid4().hex[:8]}"
        s3_client(endpoint).create_bucket(Bucket=bucket)
        keys.update({"output.uri": f"s3://{bucket}/out", "storage.endpoint_url": endpoint})
    cfg = write_config(tmp_path, **keys)
    loaded = load_config(cfg)
    storage, layout = storage_for(loaded.output_uri, loaded.s3_settings), OutputLayout(loaded.output_uri)
    p = partition_for(loaded.input_uri, day)
    pinput = plan_partition(storage_for(p.input_uri), p, "doc_id", "text", None, 256)
    committer = PartitionCommitter(storage, layout, loaded.contract, "bundled", loaded.output_hash, "first")
    committer.prepare(p, fresh=True)
    outcomes = _outcomes(loaded.contract.hash, {"a": INVOICE}, {"b": "truncated", "c": "truncated",
                                                                  "d": "empty_input"}, "first")
    committer.stage(p, pinput.units[0].id, outcomes.drop_columns(["_run_id"]))
    committer.commit(pinput, 0.0, 0)
    return cfg, loaded, storage, layout, p


@pytest.fixture(params=["local", "dated"])  # and on S3 (a moto server): tests/integration/test_retry.py
def committed(request, tmp_path):
    return committed_partition(request, tmp_path)


def _retry_outcome(loaded, recovered: dict[str, dict], dead: dict[str, str]):
    tables = RecordTables(loaded.contract, pa.field("doc_id", pa.string()), "retry-1", "bigger-model")
    return tables.split(_outcomes(loaded.contract.hash, recovered, dead, "retry-1"))


def _state(loaded, storage, layout, p):
    return load_state(storage, layout, p, "doc_id", {"truncated"}, loaded.output_hash, again=False)


def test_merge_refuses_an_outcome_that_would_duplicate_an_id(committed):
    cfg, loaded, storage, layout, p = committed
    before = state_of(cfg)
    state = _state(loaded, storage, layout, p)
    recovered, still = _retry_outcome(loaded, {"b": INVOICE, "a": INVOICE}, {"c": "truncated"})
    with pytest.raises(AccountingError):
        merge_partition(storage, layout, state, recovered, still, "doc_id", "retry-1", {})
    assert state_of(cfg) == before


def test_a_partition_whose_files_disagree_with_its_manifest_is_refused(committed):
    _, loaded, storage, layout, p = committed
    manifest = json.loads(storage.read_text(layout.manifest(p)))
    manifest["input_rows"] = 5
    storage.write_text(layout.manifest(p), json.dumps(manifest))
    with pytest.raises(AccountingError, match="input_rows 5"):
        _state(loaded, storage, layout, p)


def test_dead_letters_without_attempts_count_as_one_attempt(committed):
    _, loaded, storage, layout, p = committed
    state = _state(loaded, storage, layout, p)
    dead_file = pq.read_table(storage.arrow_path(state.dead_file), filesystem=storage.arrow_fs())
    if "attempts" in dead_file.column_names:  # once the first pass writes the column, check its value
        assert dead_file.column("attempts").to_pylist() == [1, 1, 1]
    assert state.attempts == {"b": 1, "c": 1}


def test_a_forced_rerun_after_a_retry_replaces_its_files(committed):
    """`extract run --force` commits the partition again; the retry's files it supersedes go."""
    cfg, loaded, storage, layout, p = committed
    state = _state(loaded, storage, layout, p)
    recovered, still = _retry_outcome(loaded, {"b": INVOICE}, {"c": "semantic_invalid"})
    merge_partition(storage, layout, state, recovered, still, "doc_id", "retry-1", {"run_id": "retry-1"})
    assert [f.rsplit("/", 1)[-1][:13] for f in storage.list_files(layout.folder("rows", p))] == ["part-retry-1-"]
    pinput = plan_partition(storage_for(p.input_uri), p, "doc_id", "text", None, 256)
    committer = PartitionCommitter(storage, layout, loaded.contract, "bundled", loaded.output_hash, "forced")
    committer.prepare(p, fresh=True)
    committer.stage(p, pinput.units[0].id, _outcomes(loaded.contract.hash, {}, {k: "truncated" for k in "abcd"},
                                                     "forced").drop_columns(["_run_id"]))
    committer.commit(pinput, 0.0, 0)
    for kind in ("rows", "dead_letters"):
        (only,) = storage.list_files(layout.folder(kind, p))
        assert only.rsplit("/", 1)[-1].startswith("part-forced-")
    assert state_of(cfg) == {"rows": [], "dead": [(k, "truncated", 1, "forced") for k in "abcd"]}


def test_every_committed_day_is_found(committed):
    _, loaded, storage, layout, p = committed
    assert committed_days(CommittedOutput(layout.root, storage), is_templated(loaded.input_uri)) == [p.day]


def test_retry_refuses_a_reason_that_is_no_dead_letter_reason(capsys):
    """A typo would retry nothing: argparse refuses it in one line, naming the reasons there are."""
    from pipeline.cli.main import parser

    assert parser().parse_args(["retry", "x.yaml", "--reason", "truncated"]).reason == ["truncated"]
    with pytest.raises(SystemExit) as exit_:
        parser().parse_args(["retry", "x.yaml", "--reason", "truncatd"])
    assert exit_.value.code == 2
    assert "invalid choice: 'truncatd'" in capsys.readouterr().err
