"""Stale state and bad documents on the real path (issue 19, items 1 and 2): Ray, the actors (on the simulated
engine: the model is not the subject), Parquet staging and commits.

One job, three runs on one input path:
1. the file holds nothing: an empty partition is committed, with the input's fingerprint;
2. the file is re-delivered with 6 documents (inv-0000…0005); the run stages them and dies before its commit;
3. the file is re-delivered again with 6 other documents (inv-0030…0034, and one that is not valid UTF-8).
Before the fixes, run 2 was skipped (the empty partition counted as committed whatever the file held), and with
that fixed alone, run 3 "resumed 1 of 1 units from staging" and committed inv-0000…0005: a unit id was its file's
path and row span, and the spans match. Now run 3 commits exactly the file's ids, the undecodable document as one
`invalid_input` dead letter.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipeline.config import load_config
from pipeline.output.commit import PartitionCommitter
from pipeline.output.manifest import committed
from pipeline.run import run_job
from pipeline.storage import LocalStorage
from tests.conftest import SAMPLE, write_config

pytestmark = pytest.mark.engine


def deliver(path, ids: list[str], texts: list) -> None:
    """Write the input file anew (another version: other size and mtime)."""
    pq.write_table(pa.table({"doc_id": pa.array(ids, pa.string()), "text": texts}), path)


def committed_ids(output) -> tuple[list[str], dict[str, str]]:
    """Every id of the committed partition (rows and dead letters), and each dead letter's reason."""
    storage = LocalStorage()
    (manifest,) = committed(storage, str(output))
    ids, reasons = [], {}
    for kind in ("rows", "dead_letters"):
        table = pq.read_table(manifest.uri(kind, str(output)))
        ids += table.column("doc_id").to_pylist()
        if kind == "dead_letters":
            reasons.update(zip(table.column("doc_id").to_pylist(), table.column("reason").to_pylist(), strict=True))
    return sorted(ids), reasons


SECRET = "PLANTED-S3cretPW-7f3a"
SECRET_SETS = {"storage.endpoint_url": f"https://admin:{SECRET}@127.0.0.1:1", "model.max_tokens": 96}


@pytest.fixture(scope="module")
def changed_input_job(ray_cluster, tmp_path_factory):
    """The three runs; the last one with secret-looking --set values, as a user would give them."""
    tmp_path = tmp_path_factory.mktemp("changed")
    sample = pq.read_table(SAMPLE)
    ids, texts = sample.column("doc_id").to_pylist(), sample.column("text").to_pylist()
    docs = tmp_path / "docs.parquet"
    # The simulated engine: staging, fingerprints and commits are the subject, not the model.
    cfg = write_config(tmp_path, simulated=True, **{"input.uri": str(docs), "model.max_tokens": 96,
                                                    "workers.batch_size": 4, "output.checkpoint_rows": 100})
    (tmp_path / ".aws").mkdir()
    (tmp_path / ".aws" / "credentials").write_text(f"[default]\naws_secret_access_key = {SECRET}\n")
    (tmp_path / ".env").write_text(f"S3_PASSWORD={SECRET}\n")
    output = tmp_path / "out"

    deliver(docs, [], pa.array([], pa.string()))
    first = run_job(load_config(cfg))
    assert first.status == "committed" and committed_ids(output)[0] == []

    deliver(docs, ids[:6], texts[:6])
    patch = pytest.MonkeyPatch()

    def crash(self, *args, **kwargs):
        raise RuntimeError("killed before the commit")

    patch.setattr(PartitionCommitter, "commit", crash)
    try:
        with pytest.raises(RuntimeError, match="killed before the commit"):
            run_job(load_config(cfg))
    finally:
        patch.undo()
    assert list((output / "_staging").rglob("slice-*.arrow"))  # the dead run's outcomes are staged

    bad = pa.array([b"caf\xe9 \xff\xfe not UTF-8"], pa.binary()).view(pa.string())
    new_ids = ids[30:35] + ["inv-bad"]  # as many rows as before: the same units, by position
    deliver(docs, new_ids, pa.concat_arrays([pa.array(texts[30:35], pa.string()), bad]))
    third = run_job(load_config(cfg, SECRET_SETS))
    return tmp_path, cfg, output, new_ids, third


def test_a_changed_input_is_redone_not_resumed_and_one_bad_document_is_one_dead_letter(changed_input_job):
    _, _, output, new_ids, third = changed_input_job
    assert third.status == "committed"
    got, reasons = committed_ids(output)
    assert got == sorted(new_ids)
    assert reasons["inv-bad"] == "invalid_input"
    assert list(reasons.values()).count("invalid_input") == 1
    assert third.input_rows == 6 == third.rows + third.dead_letters
    assert third.dead_letters_by_reason.get("invalid_input") == 1
    assert third.partitions[0]["units_resumed"] == 0


def test_no_planted_secret_is_written_by_a_run_a_retry_or_a_submit(changed_input_job):
    """`--set` values that look secret, and credentials beside the config: nothing the run, a retry or a submit's
    working dir holds may contain them (the retry record keeps the keys, masked)."""
    import json
    import shutil

    from pipeline import submit
    from pipeline.tools.retry import render_retry, retry_job

    folder, cfg, output, _, _ = changed_input_job
    report = retry_job(str(cfg), ["invalid_input"], dict(SECRET_SETS))
    assert report.candidates == 1
    assert SECRET not in render_retry(report)
    loaded = load_config(cfg, SECRET_SETS)
    shipped = submit.stage_working_dir(loaded, submit.job_files(loaded), [])
    try:
        written = [p for p in [*output.rglob("*"), *shipped.rglob("*")] if p.is_file()]
        assert len(written) > 5
        leaks = [str(p) for p in written if SECRET.encode() in p.read_bytes()]
        assert leaks == []
        assert [p.name for p in shipped.rglob("*")] == ["extract.yaml"]  # the input and schema are absolute/installed
    finally:
        shutil.rmtree(shipped)
    record = json.loads((output / "_runs" / f"{report.run_id}.json").read_text())
    assert record["retry"]["overrides"]["storage.endpoint_url"] == "https://admin:***@127.0.0.1:1"
