"""Every subcommand of `extract` through its main error cases, as a user meets them: the exit code is the one the
table gives (`pipeline.exit_codes`, the README's "Exit codes"), and stderr is one line.

Each case fails before Ray or an engine starts, so the walk is cheap: the commands run in this process
(`tests.conftest.run_main`: `extract`'s main with the case's arguments, its output captured), one after the other;
`test_the_entry_point_exits_with_the_code_in_a_child_process` runs two of them as `python -m pipeline` child
processes, the entry point a user meets. `test_every_subcommand_has_a_case` reads the subcommands from `extract`'s
own parser, so a new command without a case here fails the suite."""

from __future__ import annotations

import argparse
import json
import os
import re
from pathlib import Path

import pytest

from pipeline import exit_codes
from pipeline.cli.main import parser
from tests.conftest import ROOT, run_cli, run_main, write_config
from tests.unit.test_report import write_output

pytestmark = pytest.mark.slow  # a few seconds, and two child processes

USAGE, CORRUPT = exit_codes.USAGE, exit_codes.OUTPUT_CORRUPT
LOG_LINE = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z \[(debug|info|warning) *\] ")

# (command path, arguments after `extract` with {dir} for the world's folder, expected exit code, what it checks)
CASES: list[tuple[str, list[str], int, str]] = [
    ("run", ["run", "{dir}/nosuch.yaml"], USAGE, "missing config"),
    ("run", ["run", "{dir}/bad.yaml"], USAGE, "config that is not YAML"),
    ("run", ["run", "{dir}/extract.yaml", "--limit", "abc"], USAGE, "bad flag value"),
    ("run", ["run", "{dir}/extract.yaml", "--limit", "0"], USAGE, "flag value its key refuses"),
    ("run", ["run", "{dir}/extract.yaml", "--set", "model.max_tokens=many"], USAGE, "--set of the wrong type"),
    ("run", ["run", "{dir}/extract.yaml", "--set", "nokey=1"], USAGE, "--set of an unknown key"),
    ("run", ["run", "{dir}/extract.yaml", "--output", "s3://"], USAGE, "an s3:// output without a bucket"),
    ("run", ["run", "{dir}/dated/extract.yaml"], USAGE, "dated input without --date"),
    ("run", ["run", "{dir}/extract.yaml", "--date", "2026-01-01"], USAGE, "--date on an undated input"),
    ("run", ["run", "{dir}/missing-input/extract.yaml"], USAGE, "missing input"),
    ("backfill", ["backfill", "{dir}/extract.yaml"], USAGE, "missing --start/--end"),
    ("backfill", ["backfill", "{dir}/dated/extract.yaml", "--start", "2026-13-01", "--end", "2026-12-02"], USAGE,
     "bad date"),
    ("backfill", ["backfill", "{dir}/extract.yaml", "--start", "2026-01-01", "--end", "2026-01-02"], USAGE,
     "undated input"),
    ("validate", ["validate", "{dir}/extract.yaml", "--max-dead-letter-rate", "2"], USAGE, "rate above 1"),
    ("validate", ["validate", "{dir}/dated/extract.yaml", "--date", "2026-01-01"], USAGE, "missing input"),
    ("query", ["query", "{dir}/nosuch", "SELECT 1"], USAGE, "missing output"),
    ("query", ["query", "{dir}/empty", "SELECT 1"], USAGE, "empty output folder"),
    ("query", ["query", "{dir}/output", "SELEC 1"], USAGE, "bad SQL"),
    ("query", ["query", "{dir}/extract.yaml", "SELECT 1"], USAGE, "config whose output has nothing committed"),
    ("query", ["query", "{dir}/output", "SELECT 1", "--format", "xml"], USAGE, "bad --format"),
    ("query", ["query", "{dir}/output", "SELECT 1", "--set", "a=b"], USAGE, "--set on an output folder"),
    ("query", ["query", "{dir}/tampered", "SELECT 1"], CORRUPT, "manifest that does not parse"),
    ("submit", ["submit", "{dir}/extract.yaml"], USAGE, "missing --address"),
    ("submit", ["submit", "{dir}/nosuch.yaml", "--address", "http://127.0.0.1:9"], USAGE, "missing config"),
    ("bench", ["bench", "{dir}/nosuch.yaml"], USAGE, "missing config"),
    ("bench", ["bench", "{dir}/extract.yaml", "--docs", "abc"], USAGE, "bad flag value"),
    ("bench", ["bench", "{dir}/extract.yaml", "--config", "{dir}/extract.yaml"], USAGE, "the config twice"),
    ("model", ["model"], USAGE, "no subcommand"),
    ("model prepare", ["model", "prepare", "--bogus"], USAGE, "unknown flag"),
    ("schemas", ["schemas"], USAGE, "no subcommand"),
    ("schemas check", ["schemas", "check", "{dir}/nosuch.json"], USAGE, "missing schema file"),
    ("schemas check", ["schemas", "check", "{dir}/bad.json", "--format", "json"], USAGE, "schema not JSON"),
    ("schemas lint", ["schemas", "lint", "nosuch_module:Model"], USAGE, "model that does not import"),
    ("schemas lint", ["schemas", "lint", "{dir}/bad.json", "--json"], USAGE, "schema not JSON (old --json)"),
    ("eval", ["eval", "{dir}/extract.yaml"], USAGE, "missing --gold"),
    ("eval", ["eval", "{dir}/extract.yaml", "--gold", "{dir}/nosuch.jsonl", "--run", "x"], USAGE, "missing gold"),
    ("eval", ["eval", "{dir}/extract.yaml", "--gold", "{dir}/gold.jsonl", "--run", "x"], USAGE, "missing output"),
    ("eval", ["eval", "{dir}/extract.yaml", "--gold", "{dir}/gold.jsonl", "--run", "../../x"], USAGE,
     "run id that is a path"),
    ("tune", ["tune", "{dir}/extract.yaml", "--gold", "{dir}/nosuch.jsonl"], USAGE, "missing gold"),
    ("tune", ["tune", "{dir}/extract.yaml", "--gold", "{dir}/gold.jsonl", "--limit", "0"], USAGE, "bad --limit"),
    ("tune", ["tune", "{dir}/extract.yaml", "--gold", "{dir}/gold.jsonl", "--lever", "x"], USAGE, "bad --lever"),
    ("report", ["report", "{dir}/nosuch"], USAGE, "missing output"),
    ("report", ["report", "{dir}/empty"], USAGE, "output with no runs"),
    ("report", ["report", "{dir}/output", "--run", "no-such-run"], USAGE, "unknown run"),
    ("report", ["report", "{dir}/output", "--format", "csv"], USAGE, "bad --format"),
    ("report", ["report", "{dir}/escape", "--out", "{dir}/pages"], CORRUPT, "run id that is a path"),
    ("retry", ["retry", "{dir}/extract.yaml"], USAGE, "missing --reason"),
    ("retry", ["retry", "{dir}/extract.yaml", "--reason", "bogus"], USAGE, "unknown reason"),
    ("retry", ["retry", "{dir}/extract.yaml", "--reason", "truncated", "--max-tokens", "0"], USAGE, "bad --max-tokens"),
    ("retry", ["retry", "{dir}/extract.yaml", "--reason", "truncated"], USAGE, "output with nothing committed"),
    ("retry", ["retry", "{dir}/dated/extract.yaml", "--reason", "truncated", "--date", "2026-01-01", "--start",
               "2026-01-01", "--end", "2026-01-02"], USAGE, "--date with --start"),
    ("conformance", ["conformance", "all"], USAGE, "missing --out"),
    ("conformance", ["conformance", "nosuch", "--out", "{dir}/conf"], USAGE, "unknown corpus"),
    ("conformance", ["conformance", "{dir}/empty", "--out", "{dir}/conf"], USAGE, "folder with no schemas"),
]


def _world(root: Path) -> None:
    write_config(root)
    (root / "dated").mkdir()
    write_config(root / "dated", **{"input.uri": str(root / "in" / "{date}" / "x.parquet")})
    (root / "missing-input").mkdir()
    write_config(root / "missing-input", **{"input.uri": str(root / "no-such-input.parquet")})
    (root / "empty").mkdir()
    (root / "bad.json").write_text("{nope")
    (root / "bad.yaml").write_text("name: [unclosed")
    (root / "gold.jsonl").write_text(json.dumps({"doc_id": "a", "record": {}}) + "\n")
    write_output(root / "output")  # two committed partitions and their run records, real Parquet
    escape = write_output(root / "escape")
    record = json.loads((escape / "_runs" / "r2.json").read_text())
    (escape / "_runs" / "r2.json").write_text(json.dumps({**record, "run_id": "../../escaped"}))
    tampered = write_output(root / "tampered")
    (tampered / "_partitions" / "dt=2026-11-01" / "manifest.json").write_text("{not json")


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    root = tmp_path_factory.mktemp("cli-exit-codes")
    _world(root)
    return root


def _args(case, root: Path) -> list[str]:
    return [a.replace("{dir}", str(root)) for a in case[1]]


@pytest.fixture(scope="module")
def results(world):
    """Every case, run as `extract ...` in this process from the world's folder, outside any Ray cluster."""
    done = [run_main(_args(case, world), cwd=world, env={"RAY_ADDRESS": None}) for case in CASES]
    assert not (world / "escaped").exists() and not (world.parent / "escaped").exists()
    return dict(enumerate(done))


@pytest.mark.parametrize("index", [0, next(i for i, c in enumerate(CASES) if c[2] == CORRUPT)])
def test_the_entry_point_exits_with_the_code_in_a_child_process(world, index):
    """`python -m pipeline` (what `extract` runs): the exit code and the one line the in-process cases check."""
    env = dict(os.environ)
    env.pop("RAY_ADDRESS", None)
    done = run_cli(_args(CASES[index], world), env, cwd=world, timeout=120)
    lines = [line for line in done.stderr.strip().splitlines() if not LOG_LINE.match(line)]
    assert done.returncode == CASES[index][2], done.stderr[-3000:]
    assert len(lines) == 1 and lines[0].startswith("error: "), done.stderr[-3000:]


@pytest.mark.parametrize("index", range(len(CASES)), ids=[f"{c[0]}: {c[3]}" for c in CASES])
def test_error_case_exits_with_its_code_and_one_line(results, index):
    command, args, code, what = CASES[index]
    done = results[index]
    # The run path logs what it decided before it fails (`run.decoding`, `lease.acquired`): those are log lines,
    # timestamped; what is left is the error, in one line.
    lines = [line for line in done.stderr.strip().splitlines() if not LOG_LINE.match(line)]
    assert done.returncode == code, f"extract {' '.join(args)}: exit {done.returncode}\n{done.stderr[-3000:]}"
    assert len(lines) == 1 and lines[0].startswith("error: "), f"extract {' '.join(args)}:\n{done.stderr[-3000:]}"
    assert "Traceback" not in done.stdout
    assert "starting Ray" not in done.stderr and "Started a local Ray instance" not in done.stdout + done.stderr


def _commands(top: argparse.ArgumentParser, prefix: str = "") -> list[str]:
    found = []
    for action in top._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                path = f"{prefix} {name}".strip()
                found.append(path)
                found += _commands(sub, path)
    return found


def test_every_subcommand_has_a_case():
    commands = _commands(parser())
    assert {"run", "query", "schemas check", "model prepare"} <= set(commands)  # the walk sees sub-subcommands
    missing = [c for c in commands if not any(case[0] == c for case in CASES)]
    assert missing == []


def test_every_code_the_cases_expect_is_in_the_readme_table():
    table = (ROOT / "README.md").read_text().split("## Exit codes", 1)[1].split("\n## ", 1)[0]
    listed = {int(n) for n in re.findall(r"^\| (\d+) \|", table, re.MULTILINE)}
    assert {code for _, _, code, _ in CASES} <= listed
