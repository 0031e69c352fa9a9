"""Config errors fail before Ray starts, with one line naming the key or column."""

import pickle
from pathlib import Path

import pytest

from pipeline.config import ConfigError, WorkersConfig, load_config
from pipeline.run import preflight
from tests.conftest import DELETE, ROOT, write_config, write_docs


def error_of(path: Path, **kwargs) -> str:
    with pytest.raises(ConfigError) as info:
        preflight(load_config(path, **kwargs))
    message = str(info.value)
    assert "\n" not in message
    return message


def test_sample_config_loads_and_resolves_paths_against_its_folder():
    loaded = load_config(ROOT / "jobs" / "extract.yaml")
    assert loaded.input_uri == str(ROOT / "jobs" / "sample" / "invoices.parquet")
    assert loaded.output_uri == str(ROOT / "out" / "invoices")
    assert loaded.contract.name == "invoice"
    assert preflight(loaded).rows_to_read == 52


def test_unknown_key_is_named(tmp_path):
    message = error_of(write_config(tmp_path, **{"input.id_colum": "doc_id"}))
    assert "input.id_colum: unknown key" in message


def test_ill_typed_key_is_named(tmp_path):
    message = error_of(write_config(tmp_path, **{"workers.actors": "two"}))
    assert "workers.actors" in message and "'two'" in message


def test_missing_required_key_is_named(tmp_path):
    assert "output: required key is missing" in error_of(write_config(tmp_path, output=DELETE))


def test_missing_input_column_is_named(tmp_path):
    message = error_of(write_config(tmp_path, **{"input.text_column": "body"}))
    assert message.startswith("input.text_column: column 'body' is not in")


def test_non_string_text_column_is_refused(tmp_path):
    docs = write_docs(tmp_path / "docs.parquet", ["a"], ["x"])
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"doc_id": ["a"], "text": [1]}), docs)
    message = error_of(write_config(tmp_path, **{"input.uri": str(docs)}))
    assert "is int64, not a string" in message


def test_schema_and_schema_file_are_exclusive(tmp_path):
    assert "exactly one of 'schema'" in error_of(write_config(tmp_path, schema_file="x.json"))


def test_unimportable_schema_is_named(tmp_path):
    message = error_of(write_config(tmp_path, schema="no_such_module:Model"))
    assert "schema: schema 'no_such_module:Model': cannot import module" in message


def test_schema_module_resolves_from_the_config_folder(tmp_path):
    (tmp_path / "myschemas.py").write_text(
        "from pydantic import BaseModel\n\nclass Receipt(BaseModel):\n    shop: str\n    total: float\n"
    )
    loaded = load_config(write_config(tmp_path, schema="myschemas:Receipt"))
    assert loaded.contract.layout.schema.names == ["shop", "total"]
    assert loaded.contract.search_path == str(tmp_path)


def test_a_job_folder_may_name_its_package_schemas(tmp_path):
    """Our own `schemas` package is loaded already; the job's `schemas/` is its own all the same."""
    (tmp_path / "schemas").mkdir()
    (tmp_path / "schemas" / "base.py").write_text("from pydantic import BaseModel\n\nclass Base(BaseModel):\n"
                                                  "    shop: str\n")
    (tmp_path / "schemas" / "receipt.py").write_text("from .base import Base\n\nclass Receipt(Base):\n"
                                                     "    total: float\n")
    loaded = load_config(write_config(tmp_path, schema="schemas.receipt:Receipt"))
    assert loaded.contract.layout.schema.names == ["shop", "total"]
    import schemas.invoice  # ours is untouched

    assert schemas.invoice.__file__.startswith(str(ROOT))
    # An actor gets the contract pickled, without the class, and rebuilds the model from the reference
    shipped = pickle.loads(pickle.dumps(loaded.contract))
    assert shipped._model is None and shipped.model.__name__ == "Receipt"
    assert shipped.model.model_validate({"shop": "A", "total": 1.5}).total == 1.5


def test_prompt_needs_the_document_placeholder(tmp_path):
    assert "{document}" in error_of(write_config(tmp_path, prompt="Extract it."))


def test_missing_input_path_is_named(tmp_path):
    assert "does not exist" in error_of(write_config(tmp_path, **{"input.uri": "nowhere.parquet"}))
    assert "matches no Parquet files" in error_of(write_config(tmp_path, **{"input.uri": "nowhere/*.parquet"}))


def test_id_column_may_not_clash_with_schema_fields(tmp_path):
    docs = write_docs(tmp_path / "docs.parquet", ["a"], ["x"])
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"total": ["a"], "text": ["x"]}), docs)
    message = error_of(write_config(tmp_path, **{"input.uri": str(docs), "input.id_column": "total"}))
    assert "also a field of schema invoice" in message


def test_gpu_resources_follow_gpus_per_actor():
    cpu = WorkersConfig(gpus_per_actor=0, cpus_per_actor=2)
    assert cpu.ray_resources() == {"num_gpus": 0.0, "num_cpus": 2.0}
    assert cpu.tensor_parallel_size == 1
    four = WorkersConfig(gpus_per_actor=4)
    assert four.ray_resources()["num_gpus"] == 4.0 and four.tensor_parallel_size == 4
    half = WorkersConfig(gpus_per_actor=0.5)
    assert half.ray_resources()["num_gpus"] == 0.5 and half.tensor_parallel_size == 1
    with pytest.raises(ValueError, match="whole number"):
        WorkersConfig(gpus_per_actor=1.5)


