"""Relocatable output: manifests name files relative to the output root, so a copied or moved output
queries correctly from its new place, through `extract query` and through the plain-DuckDB recipe."""

from __future__ import annotations

import json
import shutil

import duckdb
import pytest

from pipeline.config import load_config
from pipeline.output.manifest import PartitionManifest, duckdb_recipe
from tests.conftest import write_config
from tests.fixtures.commits import commit_outcome, committed_output, invoice


@pytest.fixture(params=["local"])  # and on S3 (a moto server): tests/integration/test_relocation.py
def output(request, tmp_path):
    return committed_output(request, tmp_path)


def test_manifests_name_files_relative_to_the_output_root(output):
    loaded = load_config(output)
    from pipeline.storage import storage_for

    storage = storage_for(loaded.output_uri, loaded.s3_settings)
    (path,) = [p for p in storage.list_files(f"{loaded.output_uri}/_partitions") if p.endswith("manifest.json")]
    files = json.loads(storage.read_text(path))["files"]
    assert all(f.startswith(("rows/part-", "dead_letters/part-")) for f in files.values()), files


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
