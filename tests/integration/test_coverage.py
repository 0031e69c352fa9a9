"""Compile coverage (`workers.compiler`): real vLLM request validation and real grammar compilation
against the bundled model's tokenizer, in a child process with a hard timeout. No engine is started."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipeline.cli.schemas import load_schema, render_check
from schemas.invoice import Invoice
from schemas.lint import lint
from tests.conftest import run_main
from tests.fixtures.corpora import SHARED, TINY, needs_shared
from workers.compiler import (
    ENFORCEMENT,
    PROBES,
    CompileWorkerError,
    SchemaCompiler,
    derive_enforcement,
)

HARD = Path("jsonschemabench-dev") / "schemas" / "Github_hard"

# Several keywords per backend, with each status represented: enforced, ignored, rejected.
REDERIVED = ("minLength", "minLength+pattern", "format:email", "multipleOf:number", "not", "if", "oneOf",
             "dependentRequired", "uniqueItems", "patternProperties", "pattern:unanchored")


@pytest.fixture(scope="module")
def model_path() -> str:
    from workers.bundled_model import resolve_model_path

    return resolve_model_path("bundled")


@pytest.fixture(scope="module")
def compiler(model_path: str):
    with SchemaCompiler(model_path, timeout_s=120) as shared:
        yield shared


def hard_schema(root: Path, name: str) -> dict:
    return json.loads((root / HARD / name).read_text())


# A Github_hard schema of each kind: of the tiny corpora (tests/fixtures/corpora), and of the external ones.
GUIDANCE_ONLY = [pytest.param(TINY, "o301.json", id="tiny"),
                 pytest.param(SHARED, "o12498.json", id="shared", marks=needs_shared)]
NEITHER = [pytest.param(TINY, "o302.json", id="tiny"),
           pytest.param(SHARED, "o12459.json", id="shared", marks=needs_shared)]


def test_invoice_compiles_on_xgrammar(compiler: SchemaCompiler) -> None:
    check = compiler.check(Invoice.model_json_schema(), "invoice")
    assert check.limit_error is None and check.schema_error is None
    assert check.backend == "xgrammar" and list(check.results) == ["xgrammar"]
    assert check.results["xgrammar"].ok and check.results["xgrammar"].error is None
    assert check.results["xgrammar"].seconds > 0
    assert check.unenforced == []
    assert check.enforced_by == "post-check: JSON Schema Draft 2020-12 validator (jsonschema)"


def test_unenforced_keywords_are_reported_with_the_check_that_enforces_them(compiler: SchemaCompiler) -> None:
    schema = {
        "type": "object",
        "properties": {"kind": {"enum": ["a", "b"]}, "n": {"type": "integer", "not": {"const": 3}},
                       "shape": {"oneOf": [{"type": "integer", "minimum": 0}, {"type": "integer", "maximum": 9}]}},
        "required": ["kind"],
        "dependentRequired": {"n": ["kind"]},
    }
    check = compiler.check(schema, "mixed")
    assert check.backend == "xgrammar"
    assert check.unenforced == [("dependentRequired", "/dependentRequired"), ("not", "/properties/n/not"),
                                ("oneOf", "/properties/shape/oneOf")]
    assert check.enforced_by == "post-check: JSON Schema Draft 2020-12 validator (jsonschema)"


def test_guidance_takes_what_xgrammar_refuses(compiler: SchemaCompiler) -> None:
    check = compiler.check({"type": "object", "properties": {"n": {"type": "integer", "multipleOf": 3}}})
    assert not check.results["xgrammar"].ok
    assert "not supported by xgrammar" in check.results["xgrammar"].error
    assert check.results["guidance"].ok and check.backend == "guidance"


@pytest.mark.parametrize(("root", "name"), GUIDANCE_ONLY)
def test_corpus_schema_only_guidance_compiles(compiler: SchemaCompiler, root: Path, name: str) -> None:
    check = compiler.check(hard_schema(root, name), name, all_backends=True)
    assert check.limit_error is None
    assert not check.results["xgrammar"].ok and check.results["guidance"].ok
    assert check.backend == "guidance"


def test_schema_no_backend_compiles(compiler: SchemaCompiler) -> None:
    check = compiler.check({"type": "object", "properties": {"tags": {"type": "array", "uniqueItems": True}}})
    assert check.backend is None and check.unenforced == []
    assert "not supported by xgrammar" in check.results["xgrammar"].error
    assert "uniqueItems" in check.results["guidance"].error


@pytest.mark.parametrize(("root", "name"), NEITHER)
def test_corpus_schema_neither_compiles(compiler: SchemaCompiler, root: Path, name: str) -> None:
    check = compiler.check(hard_schema(root, name), name, all_backends=True)
    assert check.limit_error is None and check.backend is None
    assert "propertyNames" in check.results["guidance"].error


def test_limits_run_before_any_compile(compiler: SchemaCompiler) -> None:
    check = compiler.check({"type": "string", "pattern": "^(a+)+(?=b)"}, "hostile")  # RE2 cannot run it
    assert check.limit_error is not None and "limits.pattern_redos" in check.limit_error
    assert check.results == {} and check.backend is None


def test_enforcement_table_matches_the_engines(compiler: SchemaCompiler) -> None:
    """Re-derive part of ENFORCEMENT from the engines' own matchers, so the constant cannot rot."""
    probes = [p for p in PROBES if p.id in REDERIVED]
    assert len(probes) == len(REDERIVED)
    for backend in ("xgrammar", "guidance"):
        derived = derive_enforcement(compiler, backend, probes)
        assert derived == {pid: ENFORCEMENT[backend][pid] for pid in derived}, backend
    # The published finding this table encodes: XGrammar drops minLength next to pattern (vLLM
    # refuses such schemas for it), llguidance enforces it.
    assert ENFORCEMENT["xgrammar"]["minLength+pattern"] == "rejected"
    assert ENFORCEMENT["guidance"]["minLength+pattern"] == "enforced"


def test_compile_timeout_kills_the_worker_and_a_fresh_one_takes_over(model_path: str) -> None:
    # Long bounded strings make XGrammar expand huge repetitions: about 14 s for this one on 2 cores.
    heavy = {"type": "object", "properties": {f"f{i}": {"type": "string", "maxLength": 3000 + i} for i in range(8)}}
    with SchemaCompiler(model_path, timeout_s=1.0, backends=("xgrammar",)) as quick:
        # A hang (test hook: the child sleeps) is cut at the timeout, and the child is killed.
        assert quick._sleep_in_worker(600) == {"timeout": True}
        assert quick._worker is None
        # The next call gets a fresh child.
        assert quick.compile({"type": "object", "properties": {"a": {"type": "integer"}}}, "xgrammar").ok
        # A real pathological schema is bounded the same way.
        check = quick.check(heavy, "heavy")
        result = check.results["xgrammar"]
        assert not result.ok and check.backend is None
        assert "limits.compile_timeout_s=1s" in result.error and "killed" in result.error
        assert quick._worker is None


@pytest.mark.engine
def test_worker_that_cannot_start_says_why(tmp_path: Path) -> None:
    with SchemaCompiler(str(tmp_path / "no-model")) as broken, pytest.raises(CompileWorkerError,
                                                                           match="did not start") as failed:
        broken.compile({"type": "integer"}, "xgrammar")
    assert f"no model folder at {tmp_path / 'no-model'}" in str(failed.value)


@pytest.mark.engine
def test_cli_schemas_check(tmp_path: Path) -> None:
    good = tmp_path / "good.json"
    good.write_text(json.dumps({"type": "object", "properties": {"n": {"type": "integer", "not": {"const": 0}}},
                                "required": ["n"]}))
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"type": "object", "properties": {"t": {"type": "array", "uniqueItems": True}}}))
    done = run_main(["schemas", "check", good, bad, "--json", "--timeout", "60"])  # in this process
    assert done.returncode == 2, done.stderr
    ok, unsupported = json.loads(done.stdout)
    assert ok["name"] == str(good) and ok["backend"] == "xgrammar" and ok["results"]["xgrammar"]["ok"]
    assert ok["unenforced"] == [["not", "/properties/n/not"]] and ok["enforced_by"].startswith("post-check")
    assert {w["code"] for w in ok["lint"]} == {"no_escape_hatch"}
    assert unsupported["backend"] is None and set(unsupported["results"]) == {"xgrammar", "guidance"}


def test_check_report_text(compiler: SchemaCompiler) -> None:
    name, schema = load_schema("schemas.invoice:Invoice")
    text = render_check(compiler.check(schema, name), lint(schema))
    assert text.startswith("schemas.invoice:Invoice  (hash ")
    assert "xgrammar    compiled in " in text and "backend     xgrammar" in text
    assert "unenforced  none known for xgrammar" in text and "enforced by post-check" in text
    assert "lint " not in text  # the sample schema lints clean
    hatchless = {"type": "object", "properties": {"currency": {"enum": ["USD", "EUR"]}},
                 "required": ["currency"]}
    warned = render_check(compiler.check(hatchless, "h.json"), lint(hatchless))
    assert "lint        no_escape_hatch at currency" in warned
    failed = render_check(compiler.check({"type": "array", "uniqueItems": True}, "u.json"), [])
    assert "backend     none" in failed and "guidance    failed in" in failed


@pytest.mark.engine
def test_the_grammar_checker_routes_each_schema_to_the_first_backend_that_compiles_it(tmp_path, monkeypatch) -> None:
    """The check routing runs before any actor starts (`workers.compiling.GrammarChecker`), its cache in tmp_path."""
    from pipeline.config import SchemaPolicyConfig
    from schemas.contract import SchemaContract
    from schemas.limits import SchemaLimits
    from workers import compiling

    monkeypatch.setattr(compiling, "cache_dir", lambda kind: tmp_path / kind)
    schemas = {"plain": {"type": "object", "properties": {"n": {"type": "integer"}}},
               "needs_guidance": {"type": "object", "properties": {"n": {"type": "integer", "multipleOf": 5}}},
               "unsupported": {"type": "object", "properties": {"t": {"type": "array", "uniqueItems": True}}}}
    with compiling.GrammarChecker("bundled", SchemaPolicyConfig(compile_timeout_s=60), SchemaLimits()) as checker:
        verdicts = [checker.verdict(SchemaContract.from_dict(schema, default_name=name))
                    for name, schema in schemas.items()]
    assert [v.backend for v in verdicts] == ["xgrammar", "guidance", None]
    assert len(list((tmp_path / "verdicts").glob("*.json"))) == 3  # each verdict kept for the next run
