"""Issue 57 item 1, the flat driver as counts: what passes through the driver per unit does not depend on the
unit's documents. Each unit is read in the actor that extracts it: the driver hands the actor the unit's description
(one actor task per unit, `pipeline.unit_pool`; no Ray Data read task), and the only table per unit the driver
receives back is the unit's receipt.
(Before, a read task per unit returned the unit's documents, ~45 KB at the defaults, under Ray's 100 KB inline
limit, into the driver's memory store, from where they were copied into the actor task: about half of the driver's
memory growth per document at 10^6 documents.) On the real path: the session's Ray cluster, the actors on the
simulated engine (the model is not the subject), Parquet on a local folder. Counted, not timed."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

import pipeline.run
from pipeline.config import load_config
from pipeline.run import run_job
from pipeline.unit_pool import UnitPool
from tests.conftest import ROOT, write_config, write_docs
from workers.outcome import is_receipt

pytestmark = pytest.mark.engine

UNITS, UNIT, BATCH = 5, 8, 4
DOCS = {f"d-{i:02d}": f"Ticket {i}: my printer number {i} stopped working." for i in range(UNITS * UNIT)}


@pytest.fixture
def job(tmp_path: Path) -> Path:
    write_docs(tmp_path / "docs.parquet", list(DOCS), list(DOCS.values()))
    (tmp_path / "ticket_models.py").write_text((ROOT / "tests" / "fixtures" / "models.py").read_text())
    # Units of 8 documents, each run as two batches of 4; `max_tokens` 3: every document is a quick `truncated`
    # dead letter, which is all the accounting needs.
    return write_config(tmp_path, simulated=True, name="flat", schema="ticket_models:Ticket",
                        prompt="Extract the support ticket.\n{document}",
                        **{"input.uri": "docs.parquet", "output.uri": str(tmp_path / "out"),
                           "output.checkpoint_rows": UNIT, "workers.batch_size": BATCH, "model.max_tokens": 3,
                           "model.max_model_len": 1024})


def _watched_run(job, monkeypatch) -> tuple[object, list[pa.Table], object]:
    """Run the job, keeping what the driver streamed: (the unit pool, the tables it received, the manifest)."""
    seen: dict[str, object] = {}
    received: list[pa.Table] = []
    original = pipeline.run.outcome_batches

    def watched(dataset):
        seen["dataset"] = dataset
        for batch in original(dataset):
            received.append(batch)
            yield batch

    monkeypatch.setattr(pipeline.run, "outcome_batches", watched)
    manifest = run_job(load_config(job))
    return seen["dataset"], received, manifest


def test_per_unit_the_driver_passes_a_description_and_receives_a_receipt_never_the_documents(
        ray_cluster, job, monkeypatch):
    pool, received, manifest = _watched_run(job, monkeypatch)
    assert manifest.status == "committed" and manifest.rows + manifest.dead_letters == len(DOCS)

    # What the driver sent: one actor task per unit, each the unit's description (no documents in it).
    assert isinstance(pool, UnitPool), type(pool)
    assert pool.submitted == UNITS and len(pool.tasks) == UNITS
    assert all(task["stop"] - task["start"] == UNIT and "text" not in task for task in pool.tasks), pool.tasks

    # What reached the driver from the actors: one table per unit, each a receipt (unit, kind, reason, slice).
    assert len(received) == UNITS
    assert all(is_receipt(batch.drop_columns(["_unit"])) for batch in received), [b.column_names for b in received]
    assert sum(batch.num_rows for batch in received) == len(DOCS)
    assert all(len(batch.column("_unit").unique()) == 1 for batch in received)


def test_units_grouped_into_fewer_actor_tasks_still_come_back_one_receipt_per_unit(ray_cluster, job, monkeypatch):
    """With many units per actor the pool gives each actor task several units (`pipeline.unit_pool.units_per_task`;
    forced here to 2 for 5 units): 3 tasks, and still one receipt per unit, each unit's batches in one slice."""
    monkeypatch.setenv("EXTRACT_UNITS_PER_TASK", "2")
    pool, received, manifest = _watched_run(job, monkeypatch)
    assert manifest.status == "committed" and manifest.rows + manifest.dead_letters == len(DOCS)
    assert manifest.partitions[0]["units"] == UNITS
    assert isinstance(pool, UnitPool) and pool.submitted == 3 and len(pool.tasks) == UNITS
    assert len(received) == UNITS and all(len(batch.column("_unit").unique()) == 1 for batch in received)
    assert sorted(len(batch.column("_slice").unique()) for batch in received) == [1] * UNITS  # merged: one a unit
