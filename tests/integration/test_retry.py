"""`extract retry`: dead letters reprocessed with new settings, merged back in one atomic commit.

The cluster tests run the sample job on the session's real Ray cluster with a budget so small that the
invoices come out `truncated`, then retry them with a larger one. The first retry is made to crash between
writing its files and its manifest; the rerun (through the CLI) resumes it. Everything is checked with DuckDB
over the committed files. The engine is the simulated one (workers/simulated.py) answering each invoice with its
gold record: the retry's subject is what happens around the engine (which dead letters are retried, the merge,
the crash, the resume), and an output longer than `max_tokens` is cut off as vLLM cuts it. (Until 2026-12-03
these ran vLLM: three engine starts, about 100 s of the suite.) The local tests drive the merge step alone on
partitions committed by the real committer, to check crash points and the accounting guard cheaply.
"""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pyarrow.parquet as pq
import pytest

from pipeline.config import load_config
from pipeline.output.commit import sweep
from pipeline.output.manifest import read_manifest
from pipeline.partition import Partition
from pipeline.tools.retry import merge_partition, retry_job
from tests.conftest import SAMPLE, joining, run_cli, write_config, write_docs

# The merge tests of tests/unit/test_retry.py, collected here again on S3 (`committed` below).
from tests.unit.test_retry import (  # noqa: F401 (collected by pytest from this module)
    INVOICE,
    _retry_outcome,
    _state,
    committed_partition,
    state_of,
    test_a_forced_rerun_after_a_retry_replaces_its_files,
    test_a_partition_whose_files_disagree_with_its_manifest_is_refused,
    test_dead_letters_without_attempts_count_as_one_attempt,
    test_every_committed_day_is_found,
    test_merge_refuses_an_outcome_that_would_duplicate_an_id,
)

GOLD = SAMPLE.parent / "invoices_gold.jsonl"
# Sample invoices, whose gold records (the simulated engine's answers) are rows with a full budget, so a retry
# has something to recover; one of them padded with notes so that its prompt fits beside the first pass's 40
# output tokens but not beside the retry's 512 in 2,048 (the simulated tokenizer counts 4 characters a token;
# the first pass truncating it and the retry finding it too long check the arithmetic): it stays dead
# (`input_too_long`); plus a blank one, dead-lettered as empty_input and never retried.
PICKED = {"inv-0000", "inv-0001", "inv-0002", "inv-0003", "inv-0004", "inv-0005", "inv-0006", "inv-0007",
          "inv-0014", "inv-0015", "inv-0017"}
PADDED = "inv-0008"
NOTES = "Notes: goods remain the property of the seller until paid in full. " * 68  # its prompt: about 1,800 tokens
DOCS = len(PICKED) + 2


class Crash(RuntimeError):
    """Raised from the retry's hook to stand for the process dying at that step."""


def crash_at(step: str):
    def hook(name: str, _p: Partition) -> None:
        if name == step:
            raise Crash(step)
    return hook


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
    picked += [{"doc_id": f"{r['doc_id']}-padded", "text": f"{r['text']}\n{NOTES}"} for r in sample
               if r["doc_id"] == PADDED]
    docs = write_docs(folder / "docs.parquet", [r["doc_id"] for r in picked], [r["text"] for r in picked])
    gold = {g.pop("doc_id"): g for g in map(json.loads, GOLD.read_text().splitlines())}
    answers = folder / "answers.jsonl"
    answers.write_text("".join(json.dumps({"document": r["text"], "output": gold[r["doc_id"].removesuffix("-padded")]})
                               + "\n" for r in picked if r["doc_id"] != "blank"))
    cfg = write_config(folder, simulated={"outputs": str(answers)},
                       **{"input.uri": str(docs), "model.max_tokens": 40, "model.max_model_len": 2048,
                          "input.long_documents": "dead_letter",  # the padded invoice stays input_too_long
                          "workers.batch_size": DOCS})
    manifest = run_job(load_config(cfg))
    assert manifest.status == "committed" and manifest.input_rows == DOCS
    return cfg, folder / "out", state_of(cfg), manifest_of(folder / "out")


@pytest.fixture(scope="module")
def retried(first_pass, ray_head):
    """A retry that dies after writing its files, then the same command through the CLI, resuming it."""
    cfg, output, before, _ = first_pass
    with pytest.raises(Crash):
        retry_job(str(cfg), ["truncated"], {"model.max_tokens": 512}, hook=crash_at("files_written"))
    crashed_run = next(p for p in (output / "_runs").glob("*-retry-*.json"))
    after_crash = {"state": state_of(cfg), "manifest": manifest_of(output), "files": part_files(output),
                   "record": json.loads(crashed_run.read_text())}
    done = run_cli(["retry", str(cfg), "--reason", "truncated", "--max-tokens", "512"], joining(ray_head))
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
    assert still_dead[f"{PADDED}-padded"][1] == "input_too_long"  # 512 output tokens no longer fit beside it
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

@pytest.fixture(params=["local", "dated", "s3"])
def any_committed(request, tmp_path):
    return committed_partition(request, tmp_path)


@pytest.fixture(params=["s3"])
def committed(request, tmp_path):
    return committed_partition(request, tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize("step", ["files_written", "manifest_written"])
def test_merge_crash_leaves_old_or_new_state_whole(any_committed, step):
    cfg, loaded, storage, layout, p = any_committed
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


