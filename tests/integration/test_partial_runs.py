"""A partial run is never a complete one (issue 23 item 2), on the real path: a local Ray cluster, the actors (on
the simulated engine: the model is not the subject), Parquet, DuckDB.

`extract run --limit 3` commits the partition marked incomplete; the next `extract run` without the limit reads
only the other documents and commits every document exactly once, the first three carried over from the limited
run (their run id kept), not extracted again. `model.max_tokens` 3 keeps generation short: every document is a
`truncated` dead letter, which is all the accounting needs.
"""

from __future__ import annotations

import pytest

from pipeline.config import load_config
from pipeline.output.manifest import committed
from pipeline.output.query import connect
from pipeline.run import run_job
from pipeline.storage import storage_for
from tests.integration.test_pipeline_e2e import TICKETS, job_dir, ticket_config  # noqa: F401 (job_dir: a fixture)

pytestmark = pytest.mark.engine


def test_a_smoke_run_then_a_full_run_commits_every_document_exactly_once(ray_cluster, job_dir):  # noqa: F811
    output = job_dir / "smoke-then-full"
    cfg = ticket_config(job_dir, output, simulated=True, **{"model.max_tokens": 3})
    smoke = run_job(load_config(cfg, {"input.limit": 3}))
    assert [p["status"] for p in smoke.partitions] == ["committed"] and smoke.input_rows == 3
    (partial,) = committed(storage_for(str(output)), str(output))
    assert not partial.complete and partial.input_rows == 3 and partial.input_total_rows == len(TICKETS)

    again = run_job(load_config(cfg, {"input.limit": 2}))  # a smaller smoke run: nothing more to read
    # "partial", not "skipped": the run says documents remain unread, and how to read them
    assert again.partitions[0]["status"] == "partial" and "run without --limit" in again.partitions[0]["error"]

    full = run_job(load_config(cfg))
    assert [p["status"] for p in full.partitions] == ["committed"]  # not "skipped (already committed)"
    (whole,) = committed(storage_for(str(output)), str(output))
    assert whole.complete and whole.input_rows == len(TICKETS) == whole.rows + whole.dead_letters
    seen = connect(str(output)).sql(
        "SELECT doc_id, _run_id AS run FROM rows UNION ALL SELECT doc_id, run_id FROM dead_letters").fetchall()
    assert sorted(d for d, _ in seen) == sorted(TICKETS)  # each document once
    runs = {d: r for d, r in seen}
    first_three = list(TICKETS)[:3]
    assert {runs[d] for d in first_three} == {smoke.run_id}  # carried over, not extracted again
    assert {runs[d] for d in TICKETS if d not in first_three} == {full.run_id}
    assert full.partitions[0]["units"] == 1 and not list((output / "_staging").rglob("*.parquet"))
