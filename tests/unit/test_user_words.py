"""What a user reads says what it means: info lines carry no engine internals, the docs describe what `examples:`
unset and an unregistered model really do."""

from __future__ import annotations

import ast
from pathlib import Path

from pydantic import BaseModel

from schemas.registry import schema_name_version

ROOT = Path(__file__).resolve().parents[2]
# How the engine or the actor's process runs inside: not a setting of the job, so debug level.
INTERNALS = {"mask_kernel", "speculation", "drafter_cache", "kernel_scan_guard", "nice", "torch_threads",
             "omp_num_threads"}


def _info_calls(path: Path):
    for node in ast.walk(ast.parse(path.read_text())):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "info"
                and isinstance(node.func.value, ast.Name) and node.func.value.id == "log"):
            yield node


def test_info_lines_carry_no_engine_internals():
    found = []
    for path in [*ROOT.glob("workers/**/*.py"), *ROOT.glob("pipeline/**/*.py")]:
        for call in _info_calls(path):
            names = {k.arg for k in call.keywords if k.arg}
            spread = [ast.unparse(k.value) for k in call.keywords if k.arg is None]
            if names & INTERNALS or any("cpu_settings" in s for s in spread):
                found.append(f"{path.relative_to(ROOT)}:{call.lineno} {sorted(names & INTERNALS) or spread}")
    assert found == []


def test_the_docs_say_what_examples_unset_does():
    for doc in ("docs/config.md", "docs/quality.md", "pipeline/config.py"):
        text = (ROOT / doc).read_text()
        assert "unset: the model's own" not in text, doc  # read as the LLM's own examples
        assert "schema's own" in text, doc


def test_an_unregistered_model_works_stamped_version_0_as_the_readme_says():
    class Receipt(BaseModel):
        total: float

    assert schema_name_version(Receipt) == ("Receipt", "0")
    readme = (ROOT / "README.md").read_text()
    assert "registered Pydantic model" not in readme
    assert "an unregistered model works too" in readme and "version `0`" in readme
