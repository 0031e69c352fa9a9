"""The house's rules, checked on the source: no import cycles, and vLLM imported only under `workers/`."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("pipeline", "schemas", "workers")


def _modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            name = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
            found[name] = path
    return found


def _imports(path: Path) -> Iterator[tuple[str, int]]:
    """Every module an import statement names, anywhere in the file (function-local imports included: a cycle
    kept alive by a local import is still a cycle), with its line."""
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.module, node.lineno
            for alias in node.names:
                yield f"{node.module}.{alias.name}", node.lineno


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    cycles: set[tuple[str, ...]] = set()

    def walk(node: str, path: list[str], seen: set[str]) -> None:
        for nxt in sorted(graph[node]):
            if nxt in path:
                cycle = path[path.index(nxt):]
                first = cycle.index(min(cycle))
                cycles.add(tuple(cycle[first:] + cycle[:first]))
            elif nxt not in seen:
                seen.add(nxt)
                walk(nxt, [*path, nxt], seen)

    for start in graph:
        walk(start, [start], {start})
    return [list(c) for c in sorted(cycles)]


def test_the_packages_import_one_another_without_a_cycle():
    modules = _modules()
    graph = {name: {m for m, _ in _imports(path) if m in modules and m != name} for name, path in modules.items()}
    assert _cycles(graph) == []


def test_the_cycle_finder_finds_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_vllm_is_imported_only_under_workers():
    outside = [f"{path.relative_to(ROOT)}:{line}" for name, path in _modules().items()
               if not name.startswith("workers") for module, line in _imports(path)
               if module == "vllm" or module.startswith("vllm.")]
    assert outside == []
