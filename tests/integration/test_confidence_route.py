"""`output.min_confidence` through the whole run: a row whose least confident leaf is under the bar becomes a
`low_confidence` dead letter that keeps its record, its confidences and its spans; every other document is a row;
no document is lost or counted twice. On the simulated engine (its seeded log-probabilities, `answers: valid`):
the subject is the route, the commit and the accounting, not the model; the confidences of a real engine's
tokens are `tests/integration/test_logprob_ranks.py`'s and the unit tests' of workers.confidence."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest

from tests.conftest import run_cli, write_config

pytestmark = pytest.mark.engine

# Between the simulated engine's leaf confidences (seeded per document): some rows fall under it, some stay rows.
BAR = 0.9
DOCS = 8


def test_rows_under_min_confidence_are_low_confidence_dead_letters_with_the_record(tmp_path: Path, cli_env) -> None:
    config = write_config(tmp_path, {"answers": "valid"}, **{"input.limit": DOCS, "output.min_confidence": BAR})
    result = run_cli(["run", str(config)], cli_env)
    assert result.returncode == 0, result.stderr[-3000:]
    out = tmp_path / "out"
    db = duckdb.connect()
    rows = db.sql(f"SELECT doc_id, _min_confidence FROM read_parquet('{out}/rows/**/*.parquet')").fetchall() \
        if list(out.glob("rows/**/*.parquet")) else []
    letters = duckdb.connect().sql(
        f"SELECT doc_id, reason, error FROM read_parquet('{out}/dead_letters/**/*.parquet')").fetchall()
    ids = [r[0] for r in rows] + [d[0] for d in letters]
    assert sorted(ids) == sorted(set(ids)) and len(ids) == DOCS, ids  # each document once, as a row or a letter
    assert rows and all(low >= BAR for _, low in rows), rows
    low = [d for d in letters if d[1] == "low_confidence"]
    assert low, f"no row fell under {BAR}: {letters}"
    for doc_id, _, error in low:
        detail = json.loads(error)
        confidences, record = detail["confidences"], detail["record"]
        assert isinstance(record, dict) and record, (doc_id, detail)  # the record kept, for a person or a retry
        assert confidences and all(0.0 <= c <= 1.0 for c in confidences.values()), confidences
        assert detail["confidence"] == min(confidences.values()) < BAR
        assert detail["field"] in confidences and "output.min_confidence" in detail["message"]
        assert isinstance(detail["spans"], dict)
        assert any(path.split(".")[0].split("[")[0] in record for path in confidences), (confidences, record)
