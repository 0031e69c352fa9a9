"""The house's rules, checked on the source: no import cycles, vLLM imported only under `workers/`, `workers/` never
importing `pipeline/`, the run path free of the tools and the CLI, the committed output's files named only in
`pipeline/output/`, the outcome columns named only in the contract (`workers.outcome`), no module over 600 lines
nor function over 50, the product never importing `lab/`, `$ref` named only in the schema graph and the hostile-schema
limits, and the README and each docs/ page short enough to be a
manual (150 and 400 lines)."""

from __future__ import annotations

import ast
import re
import subprocess
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
        elif isinstance(node, ast.ImportFrom) and node.level:
            yield "." * node.level + (node.module or ""), node.lineno  # relative: refused below
        elif isinstance(node, ast.ImportFrom) and node.module:
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


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: {m for m, _ in _imports(path) if m in modules and m != name} for name, path in modules.items()}


def _in(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def test_imports_are_absolute_so_the_graph_sees_them():
    relative = [f"{path.relative_to(ROOT)}:{line}" for path in _modules().values() for module, line in _imports(path)
                if module.startswith(".")]
    assert relative == []


def test_the_run_path_never_imports_the_tools_or_the_cli():
    """`pipeline.tools` (bench, evaluate, report, conformance, retry, synthetic) and `pipeline.cli` sit on top of
    the run path: a run, its workers and its output never load them."""
    graph = _graph()
    lower = [m for m in graph
             if not _in(m, "pipeline.tools") and not _in(m, "pipeline.cli") and m != "pipeline.__main__"]
    wrong = sorted(f"{m} -> {dep}" for m in lower for dep in graph[m]
                   if _in(dep, "pipeline.tools") or _in(dep, "pipeline.cli"))
    assert wrong == []


def test_only_the_cli_and_python_dash_m_import_the_cli():
    graph = _graph()
    wrong = sorted(f"{m} -> {dep}" for m, deps in graph.items() for dep in deps
                   if _in(dep, "pipeline.cli") and not _in(m, "pipeline.cli") and m != "pipeline.__main__")
    assert wrong == []


def test_the_output_package_builds_on_the_run_paths_base_only():
    """`pipeline.output` may use config, storage, partitions and units, never the run that drives it."""
    graph = _graph()
    above = ("pipeline.run", "pipeline.dataflow", "pipeline.planning", "pipeline.routing",
             "pipeline.progress", "pipeline.submit", "pipeline.summary", "pipeline.quality", "pipeline.lifecycle",
             "pipeline.lease", "pipeline.unit_pool", "pipeline.units_source")
    wrong = sorted(f"{m} -> {dep}" for m in graph if _in(m, "pipeline.output") for dep in graph[m]
                   if any(_in(dep, a) for a in above))
    assert wrong == []


OUTPUT_NAMES = {"_SUCCESS", "_partitions", "_staging", "_runs", "_lease.json", "manifest.json"}


def test_the_outputs_files_are_named_only_in_the_output_package():
    """No consumer finds committed files by surgery on a `_SUCCESS` or manifest path: they read `committed()`,
    and every path under OUTPUT comes from `pipeline.output.layout.OutputLayout`."""
    outside = sorted(f"{path.relative_to(ROOT)}:{node.lineno} {node.value!r}" for name, path in _modules().items()
                     if not _in(name, "pipeline.output") for node in ast.walk(ast.parse(path.read_text()))
                     if isinstance(node, ast.Constant) and node.value in OUTPUT_NAMES)
    assert outside == []
    assert [str(path.relative_to(ROOT)) for name, path in _modules().items()
            if not _in(name, "pipeline.output") and "_SUCCESS" in path.read_text()] == []


def test_workers_never_import_the_pipeline():
    """The dependency runs one way: `pipeline/` (the driver) builds on `workers/` (what runs on the actors), never
    the reverse, so an actor loads nothing of the driver and the outcome contract sits below both."""
    wrong = sorted(f"{path.relative_to(ROOT)}:{line} {module}" for name, path in _modules().items()
                   if _in(name, "workers") for module, line in _imports(path) if _in(module, "pipeline"))
    assert wrong == []


def _outcome_column_names() -> set[str]:
    """The names the contract gives outcome columns that no other string in the house could mean: every `_`-prefixed
    one, and the dead letters' own. The dead letters' plain words (`reason`, `error`, `run_id`, `attempts`, …) are
    also manifest and error keys everywhere, so a grep for them would find those; they are left out."""
    from workers import outcome

    names = {f.name for f in outcome.OUTCOME_FIELDS} | set(outcome.ROW_LINEAGE_COLUMNS) | set(outcome.INTERNAL_COLUMNS)
    names |= {outcome.DeadCol.FAILED_AT, outcome.DeadCol.RAW_OUTPUT, outcome.DeadCol.FINISH_REASON}
    assert all(n.startswith("_") for n in names - set(outcome.DEAD_LETTER_COLUMNS))
    return names


# Files whose literals coincide with a contract name without naming a column (the list stays short and each says why).
LITERAL_ALLOWED = {
    "pipeline/tools/report/runs.py",  # 'raw_output': the report's own field name after its rename maps
    "schemas/contract.py",  # '_model': a pickled attribute of the contract, not a column
}


def test_outcome_column_names_are_written_only_in_the_contract():
    names = _outcome_column_names()
    found = sorted(f"{rel}:{node.lineno} {node.value!r}" for path in _modules().values()
                   if (rel := str(path.relative_to(ROOT))) != "workers/outcome.py" and rel not in LITERAL_ALLOWED
                   for node in ast.walk(ast.parse(path.read_text()))
                   if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in names)
    assert found == []


def test_the_literal_check_sees_a_literal():
    names = _outcome_column_names()
    tree = ast.parse('table.column("_kind")')
    assert [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and n.value in names] == ["_kind"]


MAX_MODULE_LINES = 600
MAX_FUNCTION_LINES = 50  # from its `def` to its last line


def _own_python_files() -> list[Path]:
    """The repository's own Python files, every folder's: those git tracks, or without git every `.py` under the
    root but .venv's and .git's."""
    try:
        done = subprocess.run(["git", "ls-files", "-z", "*.py"], cwd=ROOT, capture_output=True, text=True,
                              check=True)
    except (OSError, subprocess.CalledProcessError):
        return sorted(p for p in ROOT.rglob("*.py") if not {".venv", ".git"} & set(p.relative_to(ROOT).parts))
    return [ROOT / name for name in done.stdout.split("\0") if name and (ROOT / name).is_file()]


def _too_long(source: str, name: str) -> list[str]:
    """`name` if the module is over MAX_MODULE_LINES, and each function or method of it over MAX_FUNCTION_LINES,
    with its line count."""
    found = []
    if (lines := len(source.splitlines())) > MAX_MODULE_LINES:
        found.append(f"{name}: {lines} lines")
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            if (length := node.end_lineno - node.lineno + 1) > MAX_FUNCTION_LINES:
                found.append(f"{name}:{node.lineno} {node.name}: {length} lines")
    return found


def test_no_module_is_over_600_lines_and_no_function_over_50():
    files = _own_python_files()
    assert Path(__file__).resolve() in [f.resolve() for f in files]  # the list holds this file: it is not empty
    too_long = [found for path in files for found in _too_long(path.read_text(), str(path.relative_to(ROOT)))]
    assert too_long == [], "over the bounds (split them):\n" + "\n".join(too_long)


def _a_method_of(lines: int) -> str:
    """A module whose class has one method `lines` lines long, from its `def` (line 2) to its last line."""
    return "class C:\n    async def method(self):\n" + "".join(f"        x{i} = {i}\n" for i in range(lines - 1))


def test_the_length_check_finds_a_long_function_and_a_long_module():
    assert _too_long(_a_method_of(51), "m.py") == ["m.py:2 method: 51 lines"]
    assert _too_long(_a_method_of(50), "m.py") == []
    assert _too_long("x = 1\n" * 601, "big.py") == ["big.py: 601 lines"]
    assert _too_long("x = 1\n" * 600, "big.py") == []


def _product_files() -> list[Path]:
    """The product's Python files: its packages', and the jobs it ships (jobs/: their schemas and input makers)."""
    return [*_modules().values(), *sorted((ROOT / "jobs").rglob("*.py"))]


_LAB_MODULE = re.compile(r"^lab(?:\.\w+)*(?::\w+)?$")  # "lab.experiments.x", "lab.x:Model": import_module's text


def _lab_imports(path: Path, root: Path = ROOT) -> list[str]:
    """Each import of the lab (`lab` or `lab.*`) in the file, and each string that is a dotted lab module (what
    `importlib.import_module` or a `module:Model` reference would load), as `path:line module`."""
    tree = ast.parse(path.read_text())
    strings = [(node.value, node.lineno) for node in ast.walk(tree) if isinstance(node, ast.Constant)
               and isinstance(node.value, str) and "." in node.value and _LAB_MODULE.match(node.value)]
    return [f"{path.relative_to(root)}:{line} {module}"
            for module, line in sorted([*((m, n) for m, n in _imports(path) if _in(m, "lab")), *strings],
                                       key=lambda found: found[1])]


def test_the_product_never_imports_the_lab():
    """`lab/` (experiment scripts, their journal) builds on the product; nothing under pipeline/, schemas/,
    workers/ or jobs/ loads it, so the product installs and runs without it."""
    files = _product_files()
    assert any(path.parts[-3] == "jobs" for path in files)  # the shipped jobs are read too
    wrong = sorted(found for path in files for found in _lab_imports(path))
    assert wrong == [], "the product imports the lab:\n" + "\n".join(wrong)


def test_the_lab_import_check_names_each_lab_import(tmp_path):
    source = tmp_path / "m.py"
    source.write_text("import lab\nimport labels\nfrom lab.experiments import engine_ab\n"
                      "def f():\n    import lab.journal\n"
                      "    importlib.import_module('lab.experiments.driver_growth')\n"
                      "    print('lab', 'lab/README.md')\n")
    assert _lab_imports(source, tmp_path) == ["m.py:1 lab", "m.py:3 lab.experiments",
                                              "m.py:3 lab.experiments.engine_ab", "m.py:5 lab.journal",
                                              "m.py:6 lab.experiments.driver_growth"]


REF_KEYWORD = "$ref"
REF_MODULES = {"schemas/refs.py", "schemas/limits.py"}  # the schema graph, and the hostile-schema limits


def _naming_ref(paths: list[Path], root: Path = ROOT) -> list[str]:
    """Each module that names the `$ref` keyword (in code, a string or a comment), as `path:line`, first line."""
    found = []
    for path in paths:
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if REF_KEYWORD in line:
                found.append(f"{path.relative_to(root)}:{number}")
                break
    return found


def test_ref_is_named_only_by_the_schema_graph_and_the_limits():
    """References are followed in one place, `schemas.refs` (`SchemaGraph`: `$ref`, `$anchor` and `$id`, one rule for
    siblings and cycles); every walker reads its view. Only the hostile-schema limits name `$ref` besides."""
    naming = _naming_ref(_product_files())
    assert {entry.split(":")[0] for entry in naming} >= REF_MODULES  # the check sees the keyword where it is
    wrong = sorted(entry for entry in naming if entry.split(":")[0] not in REF_MODULES)
    assert wrong == [], "modules naming $ref (walk references through schemas.refs.SchemaGraph):\n" + "\n".join(wrong)


def test_the_ref_check_names_each_module_that_names_the_keyword(tmp_path):
    (tmp_path / "walker.py").write_text('x = 1\nif "$ref" in node:\n    pass\n')
    (tmp_path / "doc.py").write_text('"""follows a `$ref` by hand"""\n')
    (tmp_path / "clean.py").write_text('graph.expand(node)\n')
    assert _naming_ref(sorted(tmp_path.glob("*.py")), tmp_path) == ["doc.py:1", "walker.py:2"]


MAX_README_LINES = 150
MAX_DOC_PAGE_LINES = 400


def _pages_over(pages: list[Path], bound: int) -> list[str]:
    return [f"{page.relative_to(ROOT)}: {n} lines (at most {bound})" for page in pages
            if (n := len(page.read_text().splitlines())) > bound]


def test_the_readme_is_at_most_150_lines():
    """The README says what the tool is, the two commands, the next ones, the exit codes and where to read on."""
    over = _pages_over([ROOT / "README.md"], MAX_README_LINES)
    assert over == [], "shorten it (the history belongs in lab/journal/):\n" + "\n".join(over)


def test_no_docs_page_is_over_400_lines():
    """docs/ is the manual of the product as it is; the measurement history lives in lab/journal/."""
    pages = sorted((ROOT / "docs").glob("*.md"))
    assert pages, "docs/ holds no page"
    over = _pages_over(pages, MAX_DOC_PAGE_LINES)
    assert over == [], "split or shorten (the history belongs in lab/journal/):\n" + "\n".join(over)


def test_the_page_length_check_names_a_long_page():
    page = ROOT / "docs" / "config.md"
    assert _pages_over([page], 10**6) == []
    assert _pages_over([page], 1) == [f"docs/config.md: {len(page.read_text().splitlines())} lines (at most 1)"]
