"""Stale state and bad documents on the real path (issue 19, items 1 and 2): Ray, the vLLM engine on the bundled
model, Parquet staging and commits.

One job, three runs on one input path:
1. the file holds nothing: an empty partition is committed, with the input's fingerprint;
2. the file is re-delivered with 6 documents (inv-0000…0005); the run stages them and dies before its commit;
3. the file is re-delivered again with 6 other documents (inv-0030…0035) and one that is not valid UTF-8.
Before the fix, run 2 was skipped (the empty partition was committed) and run 3 "resumed 1 of 1 units from
staging", committing inv-0000…0005. Now run 3 commits exactly the file's ids, the undecodable document as one
`invalid_input` dead letter.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipeline.commit import PartitionCommitter
from pipeline.config import load_config
from pipeline.manifest import committed
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


def test_a_changed_input_is_redone_not_resumed_and_one_bad_document_is_one_dead_letter(
        ray_cluster, tmp_path, monkeypatch):
    sample = pq.read_table(SAMPLE)
    ids, texts = sample.column("doc_id").to_pylist(), sample.column("text").to_pylist()
    docs = tmp_path / "docs.parquet"
    cfg = write_config(tmp_path, **{"input.uri": str(docs), "model.max_tokens": 96, "workers.batch_size": 4,
                                    "output.checkpoint_rows": 100})
    output = tmp_path / "out"

    deliver(docs, [], pa.array([], pa.string()))
    first = run_job(load_config(cfg))
    assert first.status == "committed" and committed_ids(output)[0] == []

    deliver(docs, ids[:6], texts[:6])

    def crash(self, *args, **kwargs):
        raise RuntimeError("killed before the commit")

    with monkeypatch.context() as patch:
        patch.setattr(PartitionCommitter, "commit", crash)
        with pytest.raises(RuntimeError, match="killed before the commit"):
            run_job(load_config(cfg))
    assert list((output / "_staging").rglob("unit-*.parquet"))  # the dead run's outcomes are staged

    bad = pa.array([b"caf\xe9 \xff\xfe not UTF-8"], pa.binary()).view(pa.string())
    new_ids = ids[30:36] + ["inv-bad"]
    deliver(docs, new_ids, pa.concat_arrays([pa.array(texts[30:36], pa.string()), bad]))
    third = run_job(load_config(cfg))
    assert third.status == "committed"
    got, reasons = committed_ids(output)
    assert got == sorted(new_ids)
    assert reasons["inv-bad"] == "invalid_input"
    assert list(reasons.values()).count("invalid_input") == 1
    assert third.input_rows == 7 == third.rows + third.dead_letters
    assert third.dead_letters_by_reason.get("invalid_input") == 1
    assert third.partitions[0]["units_resumed"] == 0
