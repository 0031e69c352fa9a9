"""Per-row schemas on real components: one job whose rows carry different JSON Schemas.

One run covers routing (a schema XGrammar cannot compile goes to an llguidance actor pool), the
full-schema post-check, bad and hostile schemas as dead letters, `schema_unsupported` under the
dead-letter policy (a schema no backend compiles), and the JSON `record` output column, read back with DuckDB.
A schema no allowed backend compiles fails the job before it starts (the second test: no engine).
"""

from __future__ import annotations

import json

import duckdb
import pytest

from pipeline.config import ConfigError, load_config
from pipeline.run import run_job
from schemas.contract import schema_hash
from tests.conftest import DELETE, write_config, write_docs

pytestmark = pytest.mark.engine

PERSON = {"title": "person", "type": "object", "additionalProperties": False, "required": ["name", "age"],
          "properties": {"name": {"type": "string", "maxLength": 40}, "age": {"type": "integer", "minimum": 0,
                                                                              "maximum": 130}}}
# XGrammar (as vLLM drives it) refuses multipleOf on numbers; llguidance compiles it.
ORDER = {"title": "order", "type": "object", "additionalProperties": False, "required": ["item", "quantity"],
         "properties": {"item": {"type": "string", "maxLength": 40},
                        "quantity": {"type": "integer", "multipleOf": 6, "minimum": 6, "maximum": 120}}}
# Neither backend compiles a backreference: under `on_unsupported: dead_letter` its rows are `schema_unsupported`.
ECHO = {"title": "echo", "type": "object", "additionalProperties": False, "required": ["word"],
        "properties": {"word": {"type": "string", "pattern": "^(a+)\\1$"}}}
DEEP: dict = {"type": "string"}
for _ in range(80):
    DEEP = {"type": "object", "properties": {"x": DEEP}}

DOCS = [
    ("p1", "Ada Lovelace is 36 years old.", json.dumps(PERSON)),
    ("o1", "Order: 12 boxes of pencils.", json.dumps(ORDER)),
    ("p2", "Alan Turing, aged 41, worked at Bletchley Park.", "person"),
    ("o2", "Please send 24 notebooks.", json.dumps(ORDER)),
    ("bad", "Anything.", "{not json"),
    ("deep", "Anything.", json.dumps(DEEP)),
    ("nokey", "Anything.", "no-such-key"),
    ("echo", "aaaa", json.dumps(ECHO)),
]


@pytest.fixture(scope="module")
def per_row_job(tmp_path_factory):
    folder = tmp_path_factory.mktemp("per_row")
    write_docs(folder / "docs.parquet", [d[0] for d in DOCS], [d[1] for d in DOCS])
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pq.read_table(folder / "docs.parquet").append_column("schema", pa.array([d[2] for d in DOCS]))
    pq.write_table(table, folder / "docs.parquet")
    (folder / "schemas.json").write_text(json.dumps({"person": PERSON}))
    config = write_config(
        folder,
        name="per-row",
        schema=DELETE,
        prompt="Extract a JSON record following this JSON Schema: {schema}\nText: {document}",
        **{"input.uri": "docs.parquet", "input.schema_column": "schema", "input.schema_table": "schemas.json",
           "model.max_tokens": 64, "model.max_model_len": 1024,
           "model.engine_kwargs": {"enforce_eager": True, "kv_cache_memory_bytes": 256 << 20},
           "schema_policy.on_unsupported": "dead_letter",
           "workers.batch_size": 4, "workers.cpus_per_actor": 1},  # two pools, one CPU each
    )
    return config


def test_mixed_schemas_route_to_two_backends_and_every_row_passes_its_own_schema(ray_cluster, per_row_job):
    manifest = run_job(load_config(per_row_job))
    assert manifest.status == "committed"
    assert manifest.input_rows == len(DOCS) == manifest.rows + manifest.dead_letters
    backends = {v["schema_hash"]: v["backend"] for v in manifest.schema_checks}
    assert backends == {schema_hash(PERSON): "xgrammar", schema_hash(ORDER): "guidance", schema_hash(ECHO): None}
    assert sorted(a["backend"] for a in manifest.actors) == ["guidance", "xgrammar"]

    out = load_config(per_row_job).output_uri
    con = duckdb.connect()
    rows = con.execute(f"SELECT doc_id, record, _schema_hash FROM read_parquet('{out}/rows/*.parquet')").fetchall()
    dead = dict(con.execute(f"SELECT doc_id, reason FROM read_parquet('{out}/dead_letters/*.parquet')").fetchall())
    assert dead["bad"] == dead["deep"] == dead["nokey"] == "schema_invalid"
    assert dead["echo"] == "schema_unsupported"  # by the policy: no backend compiles its schema
    assert {r[0] for r in rows} | set(dead) == {d[0] for d in DOCS} and not {r[0] for r in rows} & set(dead)
    from schemas.validation import full_validator

    schemas = {schema_hash(PERSON): PERSON, schema_hash(ORDER): ORDER}
    for doc_id, record, hash_ in rows:
        assert hash_ in schemas, doc_id
        assert not list(full_validator(schemas[hash_]).iter_errors(json.loads(record))), (doc_id, record)
    # the two person rows (inline and by table key) share one compiled schema on the xgrammar actor
    compiled = {a["backend"]: set(a["schema_compile_s"]) for a in manifest.actors}
    assert compiled["xgrammar"] == {schema_hash(PERSON)}
    assert compiled["guidance"] == {schema_hash(ORDER)}


def test_a_schema_no_allowed_backend_compiles_fails_before_start(ray_cluster, tmp_path):
    """The default policy (`on_unsupported: fail`); the rows of such a schema dead-lettered under `dead_letter` are
    the first test's (its `echo` row), whose run starts the engines this one would."""
    write_docs(tmp_path / "docs.parquet", ["a", "b"], ["x", "y"])
    (tmp_path / "order.json").write_text(json.dumps(ORDER))
    # With XGrammar as the only backend allowed, the order schema (multipleOf) compiles nowhere.
    common = {"input.uri": "docs.parquet", "model.max_tokens": 16, "model.max_model_len": 512,
              "schema_policy.backends": ["xgrammar"],
              "model.engine_kwargs": {"enforce_eager": True, "kv_cache_memory_bytes": 256 << 20}}
    config = write_config(tmp_path, name="order", schema=DELETE, schema_file="order.json", **common)
    with pytest.raises(ConfigError, match="compiles on no backend"):
        run_job(load_config(config))
