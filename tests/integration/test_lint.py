"""Schema design help (`schemas.lint`): escape hatches, reasoning order, unbounded lists and strings, required names
the schema does not declare."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from schemas.lint import lint
from tests.conftest import run_main
from tests.fixtures.corpora import ROOTS, TINY


@pytest.mark.slow
@pytest.mark.parametrize("root", ROOTS)
def test_real_corpus_schemas(root: Path) -> None:
    deep = root / "deepjsoneval-dev"
    bench = root / "jsonschemabench-dev" / "schemas"
    seen: dict[str, int] = {}
    for path in sorted(bench.glob("*/*.json")):
        for warning in lint(json.loads(path.read_text())):
            assert warning.code in {"no_escape_hatch", "answer_before_reasoning", "unbounded_array",
                                    "unbounded_string", "undeclared_required"}
            seen[warning.code] = seen.get(warning.code, 0) + 1
    assert set(seen) >= {"no_escape_hatch", "answer_before_reasoning", "unbounded_array", "unbounded_string"}
    items = [json.loads(line) for path in sorted(deep.glob("*.jsonl")) for line in path.read_text().splitlines()]
    for item in items:
        schema = item["schema"] if isinstance(item["schema"], dict) else json.loads(item["schema"])
        assert lint(schema), item["idx"]  # real extraction schemas: unbounded strings at least
    assert len(items) > (0 if root == TINY else 100)


def test_cli_schemas_lint(tmp_path: Path) -> None:
    """`extract schemas lint` in this process (`run_main`): its lines and exit codes are the subject."""
    path = tmp_path / "s.json"
    path.write_text(json.dumps({"type": "object", "properties": {"answer": {"type": "integer"},
                                                                 "reasoning": {"type": "string"}},
                                "required": ["answer"]}))
    done = run_main(["schemas", "lint", path, "schemas.invoice:Invoice"])
    assert done.returncode == 0, done.stderr
    assert "no_escape_hatch at answer" in done.stdout and "answer_before_reasoning at reasoning" in done.stdout
    assert "schemas.invoice:Invoice: 0 warning(s)" in done.stdout
    done = run_main(["schemas", "lint", tmp_path / "missing.json"])
    assert done.returncode == 2 and "missing.json" in done.stderr
