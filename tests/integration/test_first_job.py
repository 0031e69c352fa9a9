"""docs/first-job.md, followed as written: each `# file: NAME` block is written out, each shell command runs in
order with the project's `extract` on PATH, and each must exit 0. The query must count the six documents and
eval must print an F1 line. The engine is the tests' small one (a fixed KV cache, added to the page's job).

The page's first `extract run` runs on vLLM, as a user's does; from `extract tune` on (the grid's runs and the tuned
job's `extract eval --force`, whose subject here is that the page's commands work in order, not the engine's
outputs) the job is on the simulated engine (`answers: valid`), one engine start (tune's) fewer. Tune's search,
scores and files are `test_tune.py`'s subject, on the same simulated engine."""

from __future__ import annotations

import csv
import io
import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from tests.conftest import ROOT, TEST_KV_CACHE_BYTES, on_simulated_engine

PAGE = ROOT / "docs" / "first-job.md"
FENCE = re.compile(r"^```(\w+)\n(.*?)^```", re.MULTILINE | re.DOTALL)
FILE_HEADER = re.compile(r"#\s*file:\s*(\S+)")
HEREDOC = re.compile(r"<<-?\s*['\"]?(\w+)['\"]?")
CD = re.compile(r"(?:^|&&)\s*cd\s+(\S+)\s*$")


@dataclass
class Step:
    kind: str  # "file" or "command"
    text: str
    name: str = ""


def _complete(command: str) -> bool:
    if command.endswith("\\"):
        return False
    try:
        shlex.split(command, comments=True)
    except ValueError:  # an open quote: the command goes on on the next line
        return False
    return True


def commands(block: str) -> list[str]:
    """A shell block's commands: comment lines skipped, continued lines, open quotes and heredocs joined."""
    out: list[str] = []
    lines = block.splitlines()
    current: list[str] = []
    while lines:
        line = lines.pop(0)
        if not current and (not line.strip() or line.lstrip().startswith("#")):
            continue
        current.append(line)
        heredoc = HEREDOC.search(line)
        if heredoc:
            while lines:
                body = lines.pop(0)
                current.append(body)
                if body.strip() == heredoc.group(1):
                    break
        if _complete("\n".join(current)):
            out.append("\n".join(current))
            current = []
    assert not current, f"unfinished command in the page: {current}"
    return out


def steps(page: str) -> list[Step]:
    found = []
    for lang, body in FENCE.findall(page):
        first = body.splitlines()[0] if body.strip() else ""
        header = FILE_HEADER.fullmatch(first.strip())
        if header:
            found.append(Step("file", body, header.group(1)))
        elif lang == "bash":
            found.extend(Step("command", c) for c in commands(body))
    return found


def small_engine(path: Path) -> None:
    """The tests' fixed KV cache, never a share of the machine (tests/conftest.py write_config does the same)."""
    job = yaml.safe_load(path.read_text())
    job.setdefault("model", {}).setdefault("engine_kwargs", {})["kv_cache_memory_bytes"] = TEST_KV_CACHE_BYTES
    path.write_text(yaml.safe_dump(job, sort_keys=False))


def simulated_engine(path: Path) -> None:
    """The job at `path` on the simulated engine, for the page's runs after its real ones."""
    path.write_text(yaml.safe_dump(on_simulated_engine(yaml.safe_load(path.read_text()), {"answers": "valid"}),
                                   sort_keys=False))


def check_output(command: str, stdout: str) -> None:
    if command.startswith("extract query") and "--format csv" in command:
        (row,) = list(csv.DictReader(io.StringIO(stdout)))
        assert int(row["n_rows"]) + int(row["n_dead_letters"]) == 6, stdout
    if command.startswith("extract eval"):
        assert re.search(r"\bF1\b", stdout), stdout[-3000:]


def test_parse_the_page():
    found = steps(PAGE.read_text())
    files = [s.name for s in found if s.kind == "file"]
    assert files == ["purchase_order.py", "make_docs.py", "extract.yaml", "apply_tune.py"]
    runs = [s.text.split()[:2] for s in found if s.kind == "command"]
    for command in (["extract", "validate"], ["extract", "run"], ["extract", "query"], ["extract", "eval"],
                    ["extract", "tune"]):
        assert command in runs, command
    assert any(s.text.startswith("cat > gold.jsonl <<'EOF'\n") for s in found)


@dataclass
class Page:
    """The page's commands as they ran (`run_page`): each command with its finished process, up to the first that
    failed, and the folder the last one ran in."""

    runs: list[tuple[str, subprocess.CompletedProcess]]
    cwd: Path


def run_page(folder: Path, env: dict[str, str]) -> Page:
    """The page in `folder`, its commands run with `env` (the project's `extract` put first on PATH). Stops at the
    first command that fails."""
    env = dict(env, PATH=f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}")
    cwd, simulated, runs = folder, False, []
    for step in steps(PAGE.read_text()):
        if step.kind == "file":
            (cwd / step.name).write_text(step.text)
            if step.name == "extract.yaml":
                small_engine(cwd / step.name)
            continue
        simulated = simulated or step.text.startswith("extract tune")
        if simulated and step.text.startswith("extract "):  # again after apply_tune.py pasted vLLM's keys back
            simulated_engine(cwd / "extract.yaml")
        result = subprocess.run(["bash", "-c", step.text], cwd=cwd, env=env, capture_output=True, text=True,
                                timeout=900)
        runs.append((step.text, result))
        if result.returncode != 0:
            break
        moved = CD.search(step.text)
        if moved:
            cwd = cwd / moved.group(1)
    return Page(runs, cwd)


@pytest.mark.engine
@pytest.mark.slow
def test_first_job_page_runs_as_written(first_job_page):
    """The page as a user follows it (`first_job_page`, tests/integration/conftest.py: its runs join the session's
    Ray cluster, each saving a local cluster's start and stop). Its first `extract run`'s console is also
    test_noise.py's subject."""
    for command, result in first_job_page.runs:
        assert result.returncode == 0, (f"`{command}` exited {result.returncode}\n"
                                        f"{result.stdout[-2000:]}\n{result.stderr[-3000:]}")
        check_output(command, result.stdout)
    commands_run = [command for command, _ in first_job_page.runs]
    assert commands_run == [s.text for s in steps(PAGE.read_text()) if s.kind == "command"]  # every one, in order
    assert (first_job_page.cwd / "tune" / "tune.yaml").is_file()
    assert (first_job_page.cwd / "out" / "_eval").is_dir()
