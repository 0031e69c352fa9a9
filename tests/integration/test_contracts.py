"""Long documents on the real engine: the synthetic NDA job (jobs/contracts) read in windows and merged.

Two agreements, cut short and read in small windows (max_model_len 1,024, windows of 256 document tokens) so the
run stays a few minutes on CPU: one becomes one row, merged from its windows, whose spans are offsets into the
whole agreement and whose leaves say their window; the other holds a clause that the schema's validator refuses in
any text that writes it, so its window fails, the others merge, and the merged record, checked against the whole
agreement, fails too: one dead letter whose raw output holds every window's output."""

from __future__ import annotations

import json
import shutil

import duckdb
import pyarrow.parquet as pq
import pytest

from tests.conftest import ROOT, joining, run_cli, write_config, write_docs

MARK = "VOID-CLAUSE"
SCHEMA = '''
from pydantic import ValidationInfo, model_validator

from nda import NDA


class MarkedNDA(NDA):
    @model_validator(mode="after")
    def not_void(self, info: ValidationInfo) -> "MarkedNDA":
        if "VOID-CLAUSE" in ((info.context or {}).get("document") or ""):
            raise ValueError("the text holds a VOID-CLAUSE: no extraction of it is acceptable")
        return self
'''


def agreements() -> list[tuple[str, str]]:
    table = pq.read_table(ROOT / "jobs" / "contracts" / "contracts.parquet").to_pylist()
    clean = table[1]["text"]  # the shortest two (11,780 and 12,277 characters), cut to some 6,000
    marked = table[2]["text"]
    paragraphs = marked.split("\n\n")
    paragraphs[len(paragraphs) // 3] += f" {MARK}."
    return [("nda-clean", clean[:3000] + clean[-3000:]), ("nda-marked", "\n\n".join(paragraphs)[:6000])]


@pytest.fixture(scope="module")
def cli_env_module(ray_head):
    """`cli_env` for the module's fixture: runs join the session's Ray cluster."""
    return joining(ray_head)


@pytest.fixture(scope="module")
def contracts_run(tmp_path_factory, cli_env_module):
    folder = tmp_path_factory.mktemp("contracts")
    docs = agreements()
    write_docs(folder / "docs.parquet", [d for d, _ in docs], [t for _, t in docs])
    shutil.copy(ROOT / "jobs" / "contracts" / "nda.py", folder / "nda.py")
    (folder / "marked_nda.py").write_text(SCHEMA)
    config = write_config(folder, name="contracts", schema="marked_nda:MarkedNDA", examples=False, **{
        "prompt": "Extract the agreement's effective date, governing law, parties and term from this text.\n{document}",
        "input.uri": str(folder / "docs.parquet"), "input.window_tokens": 256, "model.max_tokens": 128,
        "model.max_model_len": 1024, "workers.batch_size": 2, "model.sampling": {},
        "model.engine_kwargs": {"enforce_eager": True, "kv_cache_memory_bytes": 256 << 20}})
    done = run_cli(["run", str(config)], cli_env_module)
    assert done.returncode == 0, done.stderr[-3000:]
    return dict(docs), folder / "out"


def test_a_long_agreement_is_one_row_merged_from_its_windows(contracts_run):
    texts, output = contracts_run
    rows = duckdb.connect().sql(f"SELECT doc_id, effective_date::VARCHAR, jurisdiction, parties, term_years, "
                                f"_windows, _window_of, _spans FROM read_parquet('{output}/rows/**/*.parquet')"
                                ).fetchall()
    assert [r[0] for r in rows] == ["nda-clean"]
    doc_id, date, jurisdiction, parties, years, windows, window_of, spans = rows[0]
    assert windows > 3, windows  # 6,000 characters in windows of 256 tokens
    assert set(window_of.values()) <= set(range(windows))
    record = {"effective_date": date, "jurisdiction": jurisdiction, "term_years": years,
              **{f"parties[{i}]": p for i, p in enumerate(parties)}}
    for path, places in spans.items():  # offsets into the whole agreement, each writing its value
        assert path in window_of, (path, window_of)
        for place in places:
            written = texts[doc_id][place["start"]:place["end"]]
            if isinstance(record.get(path), str) and path != "effective_date":
                assert written == record[path], (path, written, record[path])
            assert written


def test_a_failing_window_and_a_failing_merge_make_one_dead_letter_with_every_windows_output(contracts_run):
    _, output = contracts_run
    dead = duckdb.connect().sql(f"SELECT doc_id, reason, error, raw_output FROM "
                                f"read_parquet('{output}/dead_letters/**/*.parquet')").fetchall()
    assert [(d[0], d[1]) for d in dead] == [("nda-marked", "semantic_invalid")]
    error, windows = json.loads(dead[0][2]), json.loads(dead[0][3])
    assert error["windows"] == len(windows) > 3
    assert "VOID-CLAUSE" in error["message"]
    reasons = [w["reason"] for w in windows]
    assert reasons.count("semantic_invalid") >= 1 and None in reasons  # the marked window failed, others passed
    assert all(w["output"] for w in windows) and [w["window"] for w in windows] == list(range(len(windows)))
