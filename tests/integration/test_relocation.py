"""Relocatable output: manifests name files relative to the output root, so a copied or moved output
queries correctly from its new place, through `extract query` and through the plain-DuckDB recipe."""

from __future__ import annotations

import shutil
import uuid

import duckdb
import pytest

from pipeline.config import load_config
from pipeline.output.manifest import duckdb_recipe
from pipeline.output.query import connect
from tests.conftest import run_main, s3_client, write_config
from tests.fixtures.commits import commit_outcome, committed_output, invoice
from tests.unit.test_relocation import (  # noqa: F401 (collected by pytest from this module, on S3)
    test_manifests_name_files_relative_to_the_output_root,
)

EXPECTED_ROWS = [("a", "first")]


@pytest.fixture(params=["s3"])  # for the test of tests/unit/test_relocation.py imported here
def output(request, tmp_path):
    return committed_output(request, tmp_path)


def counts(cfg) -> tuple[list, int]:
    con = connect(load_config(cfg))
    return sorted(con.sql("SELECT doc_id, _run_id FROM rows").fetchall()), \
        con.sql("SELECT count(*) FROM dead_letters").fetchall()[0][0]


def test_a_moved_output_queries_from_its_new_place(tmp_path):
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
    done = run_main(["query", str(moved), "SELECT count(*) AS n FROM rows"])  # in this process
    assert done.returncode == 0 and "1" in done.stdout, done.stderr[-2000:]
    # The plain-DuckDB recipe, run from anywhere, reads the moved output too.
    sql = duckdb_recipe(str(tmp_path / "copy"), "rows")
    assert [r[0] for r in duckdb.connect().sql(sql).fetchall()] == ["a"]


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


