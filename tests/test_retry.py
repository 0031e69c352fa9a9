"""`extract retry`: dead letters reprocessed with new settings, merged back in one atomic commit.

The engine tests run the sample job on a real Ray cluster and vLLM engine with a budget so small
that most invoices are `truncated`, then retry them with a larger one. The first retry is made to
crash between writing its files and its manifest; the rerun (through the CLI) resumes it. Everything
is checked with DuckDB over the committed files. The local tests drive the merge step alone on
partitions committed by the real committer, to check crash points and the accounting guard cheaply.
"""

from __future__ import annotations

import json
import os
import uuid
from datetime import date, datetime, timezone
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipeline.commit import PartitionCommitter, sweep
from pipeline.config import load_config
from pipeline.manifest import AccountingError, read_manifest
from pipeline.partition import OutputLayout, Partition, is_templated, partition_for
from pipeline.query import connect
from pipeline.retry import committed_days, load_state, merge_partition, retry_job
from pipeline.sink import RecordTables
from pipeline.storage import storage_for
from pipeline.units import plan_partition
from tests.conftest import SAMPLE, run_cli, s3_client, write_config, write_docs

ENGINE = {"enforce_eager": True, "kv_cache_memory_bytes": 256 << 20}
# Sample invoices, some of which the bundled model gets right with a full budget (3 of these 11 in the
# runs of this test so far), so a retry has something to recover and something that stays dead; plus
# a blank one, dead-lettered as empty_input and never retried.
PICKED = {"inv-0000", "inv-0001", "inv-0002", "inv-0003", "inv-0004", "inv-0005", "inv-0006", "inv-0007",
          "inv-0014", "inv-0015", "inv-0017"}
DOCS = len(PICKED) + 1


class Crash(RuntimeError):
    """Raised from the retry's hook to stand for the process dying at that step."""


def crash_at(step: str):
    def hook(name: str, _p: Partition) -> None:
        if name == step:
            raise Crash(step)
    return hook


def state_of(cfg: Path) -> dict:
    """What a reader of the committed output sees: every id with its kind, reason and attempts."""
    con = connect(load_config(cfg))
    rows = con.sql("SELECT doc_id, _run_id FROM rows").fetchall()
    dead_columns = {c[0] for c in con.sql("DESCRIBE dead_letters").fetchall()}
    attempts = "attempts" if "attempts" in dead_columns else "1"
    dead = con.sql(f"SELECT doc_id, reason, {attempts}, run_id FROM dead_letters").fetchall()
    return {"rows": sorted(rows), "dead": sorted(dead)}


def manifest_of(output: Path) -> dict:
    return json.loads((output / "_partitions" / "all" / "manifest.json").read_text())


def part_files(output: Path) -> list[str]:
    return sorted(str(p.relative_to(output)) for kind in ("rows", "dead_letters") for p in (output / kind).glob("*"))


# ------------------------------------------------------------------------------------------- engine tests


@pytest.fixture(scope="module")
def first_pass(ray_cluster, tmp_path_factory):
    from pipeline.run import run_job

    folder = tmp_path_factory.mktemp("retry")
    sample = pq.read_table(SAMPLE).to_pylist()
    picked = [r for r in sample if r["doc_id"] in PICKED] + [{"doc_id": "blank", "text": " "}]
    docs = write_docs(folder / "docs.parquet", [r["doc_id"] for r in picked], [r["text"] for r in picked])
    cfg = write_config(folder, **{"input.uri": str(docs), "model.max_tokens": 40, "model.max_model_len": 2048,
                                  "model.engine_kwargs": ENGINE, "workers.batch_size": DOCS})
    manifest = run_job(load_config(cfg))
    assert manifest.status == "committed" and manifest.input_rows == DOCS
    return cfg, folder / "out", state_of(cfg), manifest_of(folder / "out")


def cli_environment() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("RAY_ADDRESS", None)
    return env


@pytest.fixture(scope="module")
def retried(first_pass):
    """A retry that dies after writing its files, then the same command through the CLI, resuming it."""
    cfg, output, before, _ = first_pass
    with pytest.raises(Crash):
        retry_job(str(cfg), ["truncated"], {"model.max_tokens": 512}, hook=crash_at("files_written"))
    crashed_run = next(p for p in (output / "_runs").glob("*-retry-*.json"))
    after_crash = {"state": state_of(cfg), "manifest": manifest_of(output), "files": part_files(output),
                   "record": json.loads(crashed_run.read_text())}
    done = run_cli(["retry", str(cfg), "--reason", "truncated", "--max-tokens", "512"], cli_environment())
    assert done.returncode == 0, done.stderr[-3000:]
    return {"before": before, "after_crash": after_crash, "cli": done, "crashed_run_id": crashed_run.stem}


@pytest.mark.engine
def test_a_crash_before_the_manifest_leaves_the_old_partition(first_pass, retried):
    _, _, before, manifest_before = first_pass
    crash = retried["after_crash"]
    assert crash["state"] == before
    assert crash["manifest"] == manifest_before
    # The new files were written (under fresh names) but nothing names them yet.
    assert set(crash["files"]) - set(manifest_before["files"].values()), crash["files"]
    assert crash["record"]["kind"] == "retry" and crash["record"]["status"] == "failed"
    assert "Crash" in crash["record"]["error"]


@pytest.mark.engine
def test_recovered_documents_move_to_rows_once_and_the_rest_stay_dead_with_attempts_raised(first_pass, retried):
    cfg, output, before, _ = first_pass
    after = state_of(cfg)
    truncated_before = {d[0] for d in before["dead"] if d[1] == "truncated"}
    assert truncated_before, "the 40-token budget truncated nothing: the test would prove nothing"
    row_ids = [r[0] for r in after["rows"]]
    dead_ids = [d[0] for d in after["dead"]]
    assert len(row_ids) + len(dead_ids) == DOCS
    assert len(set(row_ids + dead_ids)) == DOCS  # no id twice, in either view or across them
    recovered = set(row_ids) - {r[0] for r in before["rows"]}
    assert recovered, "no truncated invoice was recovered with 512 tokens"
    assert recovered <= truncated_before
    assert not recovered & set(dead_ids)
    # Recovered rows carry the retry run that extracted them (the crashed one; the rerun resumed its work).
    assert {r[1] for r in after["rows"] if r[0] in recovered} == {retried["crashed_run_id"]}
    still_dead = {d[0]: d for d in after["dead"] if d[0] in truncated_before}
    assert still_dead and set(still_dead) == truncated_before - recovered
    for doc_id, reason, attempts, run_id in still_dead.values():
        assert attempts == 2 and run_id == retried["crashed_run_id"], (doc_id, reason, attempts, run_id)
    untouched = sorted(d for d in after["dead"] if d[0] not in truncated_before)
    assert {(d[0], d[1], d[3]) for d in untouched} == {(d[0], d[1], d[3]) for d in before["dead"]
                                                       if d[0] not in truncated_before}
    assert [(d[0], d[1], d[2]) for d in untouched] == [("blank", "empty_input", 1)]
    types = dict(duckdb.sql(f"SELECT column_name, column_type FROM (DESCRIBE SELECT * FROM "
                            f"read_parquet('{output}/rows/*.parquet'))").fetchall())
    assert types["issue_date"] == "DATE" and types["vendor"].startswith("STRUCT(")


@pytest.mark.engine
def test_the_manifest_records_the_retry_and_names_only_live_files(first_pass, retried):
    _, output, before, _ = first_pass
    manifest = manifest_of(output)
    (entry,) = manifest["retries"]
    truncated_before = {d[0] for d in before["dead"] if d[1] == "truncated"}
    assert entry["reasons"] == ["truncated"] and entry["overrides"] == {"model.max_tokens": 512}
    assert entry["candidates"] == len(truncated_before) == entry["recovered"] + entry["still_dead"]
    assert entry["extracted_by"] == retried["crashed_run_id"] != entry["run_id"]
    assert manifest["rows"] + manifest["dead_letters"] == manifest["input_rows"] == DOCS
    assert sum(manifest["dead_letters_by_reason"].values()) == manifest["dead_letters"]
    # The crashed retry's orphans and the superseded part-0 files are gone; the manifest names what is left.
    assert part_files(output) == sorted(manifest["files"].values())  # relative to the output root
    assert not [p for p in (output / "_staging").rglob("*") if p.is_file()]
    record = json.loads((output / "_runs" / f"{entry['run_id']}.json").read_text())
    assert record["kind"] == "retry" and record["status"] == "committed"
    assert (record["input_rows"], record["rows"], record["dead_letters"]) == (
        entry["candidates"], entry["recovered"], entry["still_dead"])
    out = retried["cli"].stdout
    assert f"{entry['candidates']:>10} {entry['recovered']:>10} {entry['still_dead']:>10}" in out, out


@pytest.mark.engine
def test_an_identical_retry_changes_nothing(first_pass, retried, cli_env):
    cfg, output, _, _ = first_pass
    state, manifest = state_of(cfg), manifest_of(output)
    again = run_cli(["retry", str(cfg), "--reason", "truncated", "--max-tokens", "512"], cli_env)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "nothing" in again.stdout
    assert state_of(cfg) == state and manifest_of(output) == manifest


# ------------------------------------------------------------------------------------------- local tests


def _outcomes(contract_hash: str, rows: dict[str, dict], dead: dict[str, str], run_id: str) -> pa.Table:
    """Outcome rows as the actors emit them (the columns of workers.extractor.OUTCOME_FIELDS)."""
    ids = [*rows, *dead]
    now = datetime.now(timezone.utc)
    n = len(ids)
    return pa.table({
        "doc_id": ids,
        "_kind": ["row"] * len(rows) + ["dead_letter"] * len(dead),
        "_record": [json.dumps(r) for r in rows.values()] + [None] * len(dead),
        "_reason": [None] * len(rows) + list(dead.values()),
        "_error": [None] * len(rows) + ['{"message": "x"}'] * len(dead),
        "_raw_output": ["{}"] * n,
        "_finish_reason": ["stop"] * n,
        "_prompt_tokens": pa.array([10] * n, pa.int64()),
        "_output_tokens": pa.array([5] * n, pa.int64()),
        "_schema_hash": [contract_hash] * n,
        "_extracted_at": pa.array([now] * n, pa.timestamp("us", tz="UTC")),
        "_run_id": [run_id] * n,
    })


INVOICE = {"invoice_number": "A-1", "vendor": {"name": "Acme", "address": None}, "customer": None,
           "issue_date": "2026-01-02", "due_date": None, "currency": "USD", "items": [], "total": 1.0}


@pytest.fixture(params=["local", "dated", "s3"])
def committed(request, tmp_path):
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


def _retry_outcome(loaded, recovered: dict[str, dict], dead: dict[str, str]):
    tables = RecordTables(loaded.contract, pa.field("doc_id", pa.string()), "retry-1", "bigger-model")
    return tables.split(_outcomes(loaded.contract.hash, recovered, dead, "retry-1"))


def _state(loaded, storage, layout, p):
    return load_state(storage, layout, p, "doc_id", {"truncated"}, loaded.output_hash, again=False)


@pytest.mark.slow
@pytest.mark.parametrize("step", ["files_written", "manifest_written"])
def test_merge_crash_leaves_old_or_new_state_whole(committed, step):
    cfg, loaded, storage, layout, p = committed
    before = state_of(cfg)
    state = _state(loaded, storage, layout, p)
    assert sorted(state.candidates) == ["b", "c"]
    recovered, still = _retry_outcome(loaded, {"b": {**INVOICE, "invoice_number": "B-2"}}, {"c": "semantic_invalid"})
    with pytest.raises(Crash):
        merge_partition(storage, layout, state, recovered, still, "doc_id", "retry-1", {"run_id": "retry-1"},
                        crash_at(step))
    after = state_of(cfg)
    if step == "files_written":
        assert after == before
    else:
        assert [r[0] for r in after["rows"]] == ["a", "b"]
        assert [(d[0], d[1], d[2]) for d in after["dead"]] == [("c", "semantic_invalid", 2), ("d", "empty_input", 1)]
    # Whatever the crash left, the next load cleans files the manifest does not name, and nothing is lost.
    state = _state(loaded, storage, layout, p)
    sweep(storage, layout, p, state.manifest)
    for kind in ("rows", "dead_letters"):
        assert storage.list_files(layout.folder(kind, p)) == [read_manifest(storage, layout, p).uri(kind, layout.root)]
    assert state_of(cfg) == after


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
    assert committed_days(storage, layout, is_templated(loaded.input_uri)) == [p.day]
