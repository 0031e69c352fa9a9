"""Typed staging (issue 53 item 5): the actor stages each row's record typed as its columns (`_typed`), the commit
takes those columns as they are; staging written before (records as JSON text, `_record`) still commits, to the
same rows."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from pipeline.output.tables import RecordTables
from tests.conftest import write_config, write_docs
from tests.fixtures.commits import committer_for, invoice, outcomes
from workers.classify import Outcome, dead_letter
from workers.extractor import outcome_table
from workers.outcome import DeadLetterReason

LINEAGE_OF_A_RUN = ["_run_id", "_extracted_at"]  # differ between two commits of the same outcomes


def _typed_outcomes(contract, rows: dict[str, dict], dead: dict[str, str]) -> pa.Table:
    """The outcomes of `rows` and `dead` as an actor stages them (`workers.extractor.outcome_table`)."""
    made = [Outcome(record=r, finish_reason="stop", prompt_tokens=10, output_tokens=5, raw_output="{}")
            for r in rows.values()]
    made += [dead_letter(DeadLetterReason(reason), "x") for reason in dead.values()]
    for o in made:
        o.extra["schema_hash"] = contract.hash
    return outcome_table(pa.table({"doc_id": [*rows, *dead]}), made, contract.layout)


def _commit(tmp_path, name: str, table_of) -> tuple[pa.Table, pa.Table]:
    """Four documents committed from the staged table `table_of(contract)`: the committed rows and dead letters."""
    folder = tmp_path / name
    folder.mkdir()
    docs = write_docs(folder / "docs.parquet", ["a", "b", "c", "d"], ["A-1", "B-2", "c", "d"])
    cfg = write_config(folder, **{"input.uri": str(docs)})
    loaded, storage, layout, p, pinput, committer = committer_for(cfg, "run")
    committer.prepare(p, fresh=True)
    committer.stage(p, pinput.units[0].id, table_of(loaded.contract))
    committer.commit(pinput, 0.0, 0)
    manifest = committer.committed(p)
    return tuple(pq.read_table(manifest.uri(kind, layout.root)) for kind in ("rows", "dead_letters"))


ROWS = {"a": invoice("A-1"), "b": {**invoice("B-2"), "total": 12.5, "due_date": "2026-03-01",
                                   "items": ["Kettle", "Tea"], "customer": "Ann"}}
DEAD = {"c": "truncated", "d": "empty_input"}


def test_typed_staging_commits_the_rows_json_staging_commits(tmp_path, monkeypatch):
    from schemas.arrow import RecordLayout

    def parsed(*_):
        raise AssertionError("a typed record was parsed or typed again at commit")

    with monkeypatch.context() as patched:  # no typed record is read back from JSON at commit
        patched.setattr(RecordLayout, "from_json", parsed)
        typed_rows, typed_dead = _commit(tmp_path, "typed", lambda c: _typed_outcomes(c, ROWS, DEAD))
    json_rows, json_dead = _commit(tmp_path, "json", lambda c: outcomes(c.hash, ROWS, DEAD))
    assert typed_rows.schema == json_rows.schema
    assert typed_rows.num_rows == 2 and typed_dead.num_rows == 2
    assert typed_rows.drop_columns(LINEAGE_OF_A_RUN).equals(json_rows.drop_columns(LINEAGE_OF_A_RUN))
    assert typed_dead.column("reason").to_pylist() == json_dead.column("reason").to_pylist()
    assert typed_rows.column("due_date").to_pylist()[1].isoformat() == "2026-03-01"


def test_a_commit_reads_json_staging_and_typed_staging_side_by_side(tmp_path):
    """A run resumed from staging an older run wrote (records as JSON text) beside slices staged typed."""
    def mixed(contract):
        old = outcomes(contract.hash, {"a": ROWS["a"]}, {"c": "truncated"})
        new = _typed_outcomes(contract, {"b": ROWS["b"]}, {"d": "empty_input"})
        tables = RecordTables(contract, pa.field("doc_id", pa.string()), "run", "m")
        return pa.concat_tables([tables.typed(old), new], promote_options="default")  # as `_Tally.add_outcomes`

    rows, dead = _commit(tmp_path, "mixed", mixed)
    assert sorted(rows.column("doc_id").to_pylist()) == ["a", "b"]
    assert sorted(dead.column("doc_id").to_pylist()) == ["c", "d"]
    by_id = dict(zip(rows.column("doc_id").to_pylist(), rows.column("items").to_pylist(), strict=True))
    assert by_id["b"] == ["Kettle", "Tea"] and by_id["a"] == []


def test_the_staged_typed_column_is_the_records_columns_and_no_json_text():
    from schemas.contract import SchemaContract

    contract = SchemaContract.from_dict({"type": "object", "properties": {
        "n": {"type": "integer"}, "when": {"type": "string", "format": "date"}}})
    table = _typed_outcomes(contract, {"a": {"n": 3, "when": "2020-01-02"}}, {"b": "truncated"})
    assert "_record" not in table.column_names
    assert table.schema.field("_typed").type == pa.struct([("n", pa.int64()), ("when", pa.date32())])
    assert [json.loads(json.dumps(v, default=str)) for v in table.column("_typed").to_pylist()] == [
        {"n": 3, "when": "2020-01-02"}, None]


def test_a_unit_staged_in_an_arrow_slice_and_an_earlier_versions_parquet_slice_commits_each_row_once(tmp_path):
    """A rerun after an upgrade: rows 0-2 of the unit were staged by an earlier version (Parquet, records as JSON
    text), rows 2-4 by this one (an Arrow IPC file, records typed)."""
    from pipeline.output.slices import SliceWriter, parse_slice, read_staged

    folder = tmp_path / "slices"
    folder.mkdir()
    docs = write_docs(folder / "docs.parquet", ["a", "b", "c", "d"], ["A-1", "B-2", "c", "d"])
    loaded, storage, layout, p, pinput, committer = committer_for(write_config(folder, **{"input.uri": str(docs)}),
                                                                  "run")
    committer.prepare(p, fresh=True)
    unit = pinput.units[0]
    old = committer.slice_path(p, unit.id, 0, 2).removesuffix(".arrow") + ".parquet"
    Path(old).parent.mkdir(parents=True)
    pq.write_table(outcomes(loaded.contract.hash, ROWS, {}).append_column("_run_id", pa.array(["old"] * 2)), old)
    new = committer.slice_path(p, unit.id, 2, 4)
    SliceWriter(storage, "run").write(new, _typed_outcomes(loaded.contract, {}, DEAD))
    assert new.endswith(".arrow") and read_staged(open(new, "rb").read()).num_rows == 2
    committer.commit(pinput, 0.0, 0, {unit.id: [parse_slice(old), parse_slice(new)]})
    manifest = committer.committed(p)
    rows, dead = (pq.read_table(manifest.uri(kind, layout.root)) for kind in ("rows", "dead_letters"))
    assert rows.column("doc_id").to_pylist() == ["a", "b"] and dead.column("doc_id").to_pylist() == ["c", "d"]
    assert rows.column("_run_id").to_pylist() == ["old", "old"] and rows.column("items").to_pylist()[1] == ["Kettle",
                                                                                                              "Tea"]
