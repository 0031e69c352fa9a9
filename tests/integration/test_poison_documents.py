"""Poison documents on real components (a Ray cluster, the actors, Parquet; the engine is the simulated one, as
the documents' handling around the engine is the subject, and each crash costs an actor restart): a document
that kills its actor's process for real (`os._exit` in a validator of the job's own schema module) is isolated and
becomes one `actor_crash` dead letter, a 51 MB document one `input_too_long` refused untokenized, and a value
Pydantic keeps but int64 cannot hold one `type_overflow`; every other document commits, each exactly once.
Before, the killing document failed its batch on every restart until `workers.max_restarts` ran out and the run
failed; the 51 MB text was tokenized whole (12.9 GB); and the driver's typing of the rows raised OverflowError."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.conftest import run_cli, run_main, write_config

pytestmark = pytest.mark.engine

SCHEMA_MODULE = '''
import os

from pydantic import BaseModel, Field, ValidationInfo, model_validator


class Note(BaseModel):
    title: str = Field(max_length=24)
    stars: int = Field(default=1, ge=0, json_schema_extra={"x-grounded": False})

    @model_validator(mode="after")
    def die_on_poison(self, info: ValidationInfo) -> "Note":
        document = (info.context or {}).get("document") or ""
        if "KILL-ME" in document:
            os._exit(9)  # the process dies here, as a segfault or the OOM killer would end it
        if "HUGE-NUMBER" in document:
            self.stars = 2**70  # Pydantic keeps it; Arrow's int64 cannot hold it
        return self
'''

BIG_CHARS = 51 * 1000 * 1000


def _query(config, sql: str) -> list[dict]:
    result = run_main(["query", str(config), sql, "--format", "json"])  # reading an output: in this process
    assert result.returncode == 0, result.stderr[-2000:]
    return [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]


def test_a_killing_a_51_mb_and_an_int64_overflowing_document_are_one_dead_letter_each(tmp_path, cli_env):
    (tmp_path / "poison_schema.py").write_text(SCHEMA_MODULE)
    texts = ["Note: buy milk", "KILL-ME note: call Bob", "Note: fix the door", "x" * BIG_CHARS,
             "Note: water plants", "HUGE-NUMBER note: count the stars", "Note: book flights"]
    ids = [f"d{i}" for i in range(len(texts))]
    pq.write_table(pa.table({"doc_id": ids, "text": pa.array(texts, pa.string())}), tmp_path / "docs.parquet")
    config = write_config(tmp_path, simulated=True, schema="poison_schema:Note", **{
        "input.uri": "docs.parquet", "prompt": "Give the note a short title.\n{document}",
        "model.max_tokens": 48, "model.max_model_len": 1024, "workers.batch_size": 3,
        "workers.batches_in_flight": 2, "workers.max_restarts": 3, "workers.cpus_per_actor": 1})
    result = run_cli(["run", str(config)], cli_env, timeout=1200)
    assert result.returncode == 0, result.stderr[-4000:]

    dead = {r["doc_id"]: r for r in _query(config, "SELECT doc_id, reason, error FROM dead_letters")}
    rows = [r["doc_id"] for r in _query(config, "SELECT doc_id FROM rows")]
    assert sorted(rows + list(dead)) == sorted(ids)  # every document once: nothing lost, nothing doubled
    reasons = {doc: r["reason"] for doc, r in dead.items()}
    assert reasons.get("d1") == "actor_crash", reasons
    assert reasons.get("d3") == "input_too_long", reasons
    assert reasons.get("d5") == "type_overflow", reasons  # typed on the actor: one dead letter, not a failed run
    assert json.loads(dead["d5"]["error"])["field"] == "stars"
    assert sorted(d for d, r in reasons.items() if r in ("actor_crash", "input_too_long", "engine_error",
                                                         "type_overflow")) == ["d1", "d3", "d5"]
    crash = json.loads(dead["d1"]["error"])
    assert "died twice with this document in flight" in crash["message"] and crash["document_id"] == "d1"
    assert crash["stage"].startswith("checking the output")  # where it died: the job's validator ran it
    too_long = json.loads(dead["d3"]["error"])
    assert too_long["characters"] == BIG_CHARS and "not tokenized" in too_long["message"]
