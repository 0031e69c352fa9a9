"""`make test`'s test processes: the real-engine group (tests/conftest.py REAL_ENGINE_TESTS) names only modules
and tests that exist, so a renamed or moved test cannot silently leave the group and start its engine beside
another."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.conftest import REAL_ENGINE_TESTS, ROOT, UNIT_LANE, group_of, pick_group

INTEGRATION = ROOT / "tests" / "integration"


def _tests_of(module: Path) -> set[str]:
    tree = ast.parse(module.read_text())
    return {node.name for node in tree.body if isinstance(node, ast.FunctionDef) and node.name.startswith("test_")}


def test_every_entry_names_an_existing_module_and_test():
    missing = []
    for entry in sorted(REAL_ENGINE_TESTS):
        module, _, test = entry.partition("::")
        path = INTEGRATION / module
        if not path.is_file() or (test and test not in _tests_of(path)):
            missing.append(entry)
    assert not missing, f"REAL_ENGINE_TESTS names what tests/integration does not have: {missing}"


def test_a_named_test_joins_the_group_and_its_neighbours_keep_their_module():
    bench = "tests/integration/test_bench.py"
    assert group_of(f"{bench}::test_engine_arms_figures_on_a_real_engine") == "real-engines"
    assert group_of(f"{bench}::test_quick_bench_writes_json_markdown_and_chart") == bench
    assert group_of("tests/integration/test_engine_thread.py::test_x[a/b::c]") == "real-engines"
    assert group_of("tests/unit/test_config.py::TestX::test_y[1]") == "tests/unit/test_config.py"


def test_with_the_unit_lane_each_process_takes_its_own_groups():
    """`--unit-beside`: the unit lane takes only tests/unit's groups, in order; the other process takes the rest in
    order, then tests/unit's from the end of the queue; either is told None when nothing is left for it."""
    queue = ["real-engines", "tests/integration/test_cli_paths.py", "tests/unit/test_a.py", "tests/unit/test_b.py"]
    assert pick_group(queue, UNIT_LANE, beside=True) == "tests/unit/test_a.py"
    assert pick_group(queue, "gw0", beside=True) == "real-engines"
    assert pick_group(queue[2:], "gw0", beside=True) == "tests/unit/test_b.py"
    assert pick_group(queue[:2], UNIT_LANE, beside=True) is None
    assert pick_group([], "gw0", beside=True) is None
    assert pick_group(queue, UNIT_LANE, beside=False) == "real-engines"  # without the lane: the first, any process
