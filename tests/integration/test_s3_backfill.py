"""S3 in and out (moto's real HTTP API on loopback), date partitions, a backfill with a missing day,
reruns that skip committed days, and `extract query` over the committed output."""

from __future__ import annotations

import io
import json
import shutil
from datetime import date
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipeline.config import load_config
from pipeline.output.query import connect
from pipeline.run import run_job
from pipeline.storage import StorageError
from pipeline.summary import render_backfill_table
from tests.conftest import ROOT, s3_client, write_config

pytestmark = pytest.mark.engine

DAYS = {
    "2026-11-01": {"a-1": "From Ann <ann@example.com>: my Kettle leaks. Please help soon.",
                   "a-2": "Bo here. The Lamp flickers. Low priority."},
    "2026-11-02": {"b-1": "Cy writes: Router is down, urgent!", "b-empty": ""},
    # 2026-11-03 has no input at all.
    "2026-11-04": {"d-1": "Di: the Scanner jams on every page. Normal priority."},
}
ALL_DAYS = [date(2026, 11, d) for d in range(1, 5)]


def put_parquet(client, bucket: str, key: str, docs: dict[str, str]) -> None:
    buffer = io.BytesIO()
    pq.write_table(pa.table({"doc_id": list(docs), "text": pa.array(list(docs.values()), pa.string())}), buffer)
    client.put_object(Bucket=bucket, Key=key, Body=buffer.getvalue())


@pytest.fixture(scope="module")
def s3_job(s3_endpoint, tmp_path_factory):
    client = s3_client(s3_endpoint)
    for bucket in ("corpus", "extracts"):
        client.create_bucket(Bucket=bucket)
    for day, docs in DAYS.items():
        put_parquet(client, "corpus", f"docs/dt={day}/part-0.parquet", docs)
    folder = tmp_path_factory.mktemp("s3job")
    shutil.copy(ROOT / "tests" / "fixtures" / "models.py", folder / "ticket_models.py")
    # The simulated engine: S3, the date partitions and the warm actor pool are the subject, not the model.
    config = write_config(
        folder, simulated=True, name="tickets", schema="ticket_models:Ticket",
        prompt="Extract the support ticket from this message.\n{document}",
        **{"input.uri": "s3://corpus/docs/dt={date}/", "output.uri": "s3://extracts/tickets",
           "storage.endpoint_url": s3_endpoint, "model.max_tokens": 160, "model.max_model_len": 1024,
           "model.engine_kwargs": {"enforce_eager": True}, "workers.batch_size": 4},
    )
    return config, client


@pytest.fixture(scope="module")
def backfill(ray_cluster, s3_job):
    config, client = s3_job
    return run_job(load_config(config), list(ALL_DAYS), fail_fast=False), client


def keys(client, bucket: str, prefix: str = "") -> list[str]:
    return sorted(o["Key"] for o in client.list_objects_v2(Bucket=bucket, Prefix=prefix).get("Contents", []))


def test_backfill_commits_each_day_and_reports_the_missing_one(backfill):
    manifest, client = backfill
    status = {p["partition"]: p["status"] for p in manifest.partitions}
    assert status == {"2026-11-01": "committed", "2026-11-02": "committed", "2026-11-03": "failed",
                      "2026-11-04": "committed"}
    missing = next(p for p in manifest.partitions if p["partition"] == "2026-11-03")
    assert "does not exist" in missing["error"]
    assert manifest.input_rows == 5 == manifest.rows + manifest.dead_letters
    table = render_backfill_table(manifest)
    assert "2026-11-03   failed" in table and table.count("committed") == 3
    stored = keys(client, "extracts")
    for day in ("2026-11-01", "2026-11-02", "2026-11-04"):
        for kind in ("rows", "dead_letters"):  # one file per table, under the commit's own name
            assert len([k for k in stored if k.startswith(f"tickets/{kind}/dt={day}/part-")]) == 1
        assert f"tickets/_partitions/dt={day}/manifest.json" in stored
    assert not [k for k in stored if "/_staging/" in k]


def test_one_warm_actor_pool_served_every_day(backfill):
    manifest, _ = backfill
    assert len(manifest.actors) == 1  # engines were not restarted between partitions


def test_query_reads_committed_partitions_from_s3(backfill, s3_job):
    config, _ = s3_job
    con = connect(load_config(config))
    counts = dict(con.sql("SELECT dt, count(*) FROM (SELECT dt, doc_id FROM rows UNION ALL "
                          "SELECT dt, doc_id FROM dead_letters) GROUP BY dt").fetchall())
    assert {str(k): v for k, v in counts.items()} == {"2026-11-01": 2, "2026-11-02": 2, "2026-11-04": 1}
    ids = [r[0] for r in con.sql("SELECT doc_id FROM rows UNION ALL SELECT doc_id FROM dead_letters").fetchall()]
    assert sorted(ids) == sorted(d for docs in DAYS.values() for d in docs)
    (reason,), = con.sql("SELECT reason FROM dead_letters WHERE doc_id = 'b-empty'").fetchall()
    assert reason == "empty_input"


def test_rerun_skips_committed_days_and_writes_nothing_new(backfill, s3_job):
    config, client = s3_job
    before = {k: client.head_object(Bucket="extracts", Key=k)["ETag"] for k in keys(client, "extracts", "tickets/rows")}
    again = run_job(load_config(config), list(ALL_DAYS), fail_fast=False)
    status = {p["partition"]: p["status"] for p in again.partitions}
    assert status == {"2026-11-01": "skipped", "2026-11-02": "skipped", "2026-11-03": "failed",
                      "2026-11-04": "skipped"}
    after = {k: client.head_object(Bucket="extracts", Key=k)["ETag"] for k in keys(client, "extracts", "tickets/rows")}
    assert before == after
    assert again.actors == []  # nothing to do: no actor (and no engine) was started


def test_partition_manifest_names_its_files_and_counts(backfill):
    _, client = backfill
    body = client.get_object(Bucket="extracts", Key="tickets/_partitions/dt=2026-11-02/manifest.json")["Body"]
    manifest = json.loads(body.read())
    assert manifest["input_rows"] == 2 == manifest["rows"] + manifest["dead_letters"]
    assert manifest["files"]["rows"].startswith("rows/dt=2026-11-02/part-")  # relative to the output root
    assert "testing" not in json.dumps(manifest)  # no credentials in manifests


def test_missing_bucket_fails_fast_naming_it(s3_job, tmp_path: Path):
    config, _ = s3_job
    loaded = load_config(config, {"output.uri": "s3://no-such-bucket/x"})
    with pytest.raises(StorageError, match="NoSuchBucket.*no-such-bucket"):
        run_job(loaded, [ALL_DAYS[0]])
