"""Relocatable output: manifests name files relative to the output root, so a copied or moved output
queries correctly from its new place, through `extract query` and through the plain-DuckDB recipe."""

from __future__ import annotations

import json
import shutil
import uuid

import duckdb
import pytest

from pipeline.config import load_config
from pipeline.manifest import PartitionManifest, duckdb_recipe
from pipeline.query import connect
from tests.conftest import run_cli, s3_client, write_config
from tests.test_commit_kill import commit_outcome, committed_output, invoice

EXPECTED_ROWS = [("a", "first")]


@pytest.fixture(params=["local", "s3"])
def output(request, tmp_path):
    return committed_output(request, tmp_path)


def counts(cfg) -> tuple[list, int]:
    con = connect(load_config(cfg))
    return sorted(con.sql("SELECT doc_id, _run_id FROM rows").fetchall()), \
        con.sql("SELECT count(*) FROM dead_letters").fetchall()[0][0]


def test_manifests_name_files_relative_to_the_output_root(output):
    loaded = load_config(output)
    from pipeline.storage import storage_for

    storage = storage_for(loaded.output_uri, loaded.s3_settings)
    (path,) = [p for p in storage.list_files(f"{loaded.output_uri}/_partitions") if p.endswith("manifest.json")]
    files = json.loads(storage.read_text(path))["files"]
    assert all(f.startswith(("rows/part-", "dead_letters/part-")) for f in files.values()), files


def test_a_moved_output_queries_from_its_new_place(tmp_path, cli_env):
    docs = tmp_path / "docs.parquet"
    from tests.conftest import write_docs

    write_docs(docs, ["a", "b"], ["A-1 1.0", "b"])
    cfg = write_config(tmp_path, **{"input.uri": str(docs)})
    commit_outcome(cfg, "first", {"a": invoice("A-1")}, {"b": "truncated"})
    before = counts(cfg)
    shutil.copytree(tmp_path / "out", tmp_path / "copy")
    (tmp_path / "out").rename(tmp_path / "aside")  # the original is gone from where the run wrote it
    moved = write_config(tmp_path, **{"input.uri": str(docs), "output.uri": str(tmp_path / "copy")})
    assert counts(moved) == before == (EXPECTED_ROWS, 1)
    shutil.rmtree(tmp_path / "aside")  # nothing is read from the old place either
    assert counts(moved) == before
    done = run_cli(["query", str(moved), "SELECT count(*) AS n FROM rows"], cli_env)
    assert done.returncode == 0 and "1" in done.stdout, done.stderr[-2000:]
    # The plain-DuckDB recipe, run from anywhere, reads the moved output too.
    sql = duckdb_recipe(str(tmp_path / "copy"), "rows")
    assert [r[0] for r in duckdb.connect().sql(sql).fetchall()] == ["a"]


def test_the_duckdb_recipe_reads_only_committed_files(tmp_path):
    from tests.conftest import write_docs

    docs = write_docs(tmp_path / "docs.parquet", ["a", "b"], ["A-1 1.0", "b"])
    cfg = write_config(tmp_path, **{"input.uri": str(docs)})
    commit_outcome(cfg, "first", {"a": invoice("A-1")}, {"b": "truncated"})
    commit_outcome(cfg, "second", {"a": invoice("A-1"), "b": invoice("B-2")}, {})
    stray = tmp_path / "out" / "rows" / "part-crashed-commit.parquet"  # what a killed commit leaves
    shutil.copy(next((tmp_path / "out" / "rows").glob("part-second-*.parquet")), stray)
    rows = duckdb.connect().sql(duckdb_recipe(str(tmp_path / "out"), "rows")).project("doc_id, _run_id").fetchall()
    assert sorted(rows) == [("a", "second"), ("b", "second")]
    raw = duckdb.sql(f"SELECT count(*) FROM read_parquet('{tmp_path}/out/rows/**/*.parquet')").fetchall()[0][0]
    assert raw == 4  # a raw glob also sees the stray file: why readers go through the manifest


@pytest.mark.parametrize("text", ['{"partition": "all", "files": {"rows": "/old/place/out/rows/part-0.parquet", '
                                  '"dead_letters": "/old/place/out/dead_letters/part-0.parquet"}}'])
def test_a_format_1_manifest_with_absolute_paths_reads_from_the_new_root(text):
    manifest = PartitionManifest.from_json(text, "s3://bucket/new")
    assert manifest.uri("rows", "s3://bucket/new") == "s3://bucket/new/rows/part-0.parquet"
    assert manifest.format == 1


def test_an_output_copied_to_another_bucket_queries_there(s3_endpoint, tmp_path):
    from tests.conftest import write_docs

    docs = write_docs(tmp_path / "docs.parquet", ["a", "b"], ["A-1 1.0", "b"])
    client = s3_client(s3_endpoint)
    first, second = f"reloc-{uuid.uuid4().hex[:8]}", f"reloc-{uuid.uuid4().hex[:8]}"
    for bucket in (first, second):
        client.create_bucket(Bucket=bucket)
    cfg = write_config(tmp_path, **{"input.uri": str(docs), "output.uri": f"s3://{first}/out",
                                    "storage.endpoint_url": s3_endpoint})
    commit_outcome(cfg, "first", {"a": invoice("A-1")}, {"b": "truncated"})
    for obj in client.list_objects_v2(Bucket=first)["Contents"]:
        client.copy_object(Bucket=second, Key=obj["Key"].replace("out/", "moved/", 1),
                           CopySource={"Bucket": first, "Key": obj["Key"]})
        client.delete_object(Bucket=first, Key=obj["Key"])
    moved = write_config(tmp_path, **{"input.uri": str(docs), "output.uri": f"s3://{second}/moved",
                                      "storage.endpoint_url": s3_endpoint})
    assert counts(moved) == (EXPECTED_ROWS, 1)


def test_the_duckdb_recipe_takes_dt_from_the_partition_folder_only(tmp_path):
    """A `k=v` folder above the output is not a column: hive partitioning would read `currency=FAKE` over the
    rows' real currency."""
    from tests.conftest import write_docs

    base = tmp_path / "currency=FAKE"
    base.mkdir()
    docs = write_docs(base / "docs.parquet", ["a"], ["A-1 1.0"])
    cfg = write_config(base, **{"input.uri": str(docs)})
    commit_outcome(cfg, "first", {"a": invoice("A-1")}, {})
    relation = duckdb.connect().sql(duckdb_recipe(str(base / "out"), "rows"))
    currency, dt = relation.project("currency, dt").fetchall()[0]
    assert currency != "FAKE" and dt is None
