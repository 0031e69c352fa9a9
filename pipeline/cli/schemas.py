"""`extract schemas check|lint SCHEMA...`: does a schema compile, what does the engine leave out, is it well designed.

SCHEMA is a JSON Schema file, or `module:Model` (a Pydantic model, imported with the current folder
first on sys.path, as `extract run` does with the config's folder). `check` compiles each schema
against the model's tokenizer on each grammar backend (in a child process with a hard timeout),
and says which backend a job would use, how long compilation took, which keywords that backend
leaves unenforced and which check enforces them instead, plus the lint warnings. `lint` prints
the design warnings only.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pipeline.cli.options import error_line
from schemas.lint import LintWarning, lint
from workers.compiler import SchemaCheck
from workers.compiling import open_compiler

if TYPE_CHECKING:
    from workers.compiler import SchemaCompiler


class SchemaArgError(ValueError):
    """A SCHEMA argument that is neither a readable JSON Schema file nor an importable model."""


def load_schema(ref: str) -> tuple[str, dict[str, Any]]:
    """(display name, JSON Schema) for a file path or a `module:Model` reference."""
    path = Path(ref)
    if path.suffix == ".json" or path.is_file():
        try:
            schema = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError) as exc:
            raise SchemaArgError(f"{ref}: {exc}") from None
        if not isinstance(schema, dict):
            raise SchemaArgError(f"{ref}: a JSON Schema must be an object")
        return ref, schema
    if ":" in ref:
        from schemas.contract import SchemaContract
        from schemas.registry import SchemaNotFoundError

        try:
            contract = SchemaContract.from_model_ref(ref, Path.cwd())
        except SchemaNotFoundError as exc:
            raise SchemaArgError(str(exc)) from None
        return ref, contract.json_schema
    raise SchemaArgError(f"{ref}: no such file, and not a 'module:Model' reference")


def render_check(check: SchemaCheck, warnings: list[LintWarning]) -> str:
    lines = [f"{check.name}  (hash {check.schema_hash})"]
    if check.limit_error:
        lines.append(f"  rejected    {check.limit_error}")
        return "\n".join(lines)
    if check.schema_error:
        lines.append(f"  invalid     {check.schema_error}")
    for backend, result in check.results.items():
        state = "compiled" if result.ok else "failed"
        detail = "" if result.ok else f": {result.error}"
        lines.append(f"  {backend:<10}  {state} in {result.seconds:.3f}s{detail}")
    if check.backend is None:
        lines.append("  backend     none: no backend compiles this schema; a job with it fails before it starts")
        return "\n".join(lines)
    lines.append(f"  backend     {check.backend}")
    if check.unenforced:
        lines.append(f"  unenforced  {len(check.unenforced)} keyword(s) the {check.backend} grammar does not enforce:")
        lines += [f"                {keyword} at {where}" for keyword, where in check.unenforced]
    else:
        lines.append(f"  unenforced  none known for {check.backend}")
    lines.append(f"  enforced by {check.enforced_by}")
    lines += _render_lint(warnings)
    return "\n".join(lines)


def _render_lint(warnings: list[LintWarning]) -> list[str]:
    return [f"  lint        {w.code} at {w.path}: {w.message}" for w in warnings]


def _lint_dict(warnings: list[LintWarning]) -> list[dict[str, str]]:
    return [{"code": w.code, "path": w.path, "message": w.message} for w in warnings]


def _load_all(refs: list[str]) -> list[tuple[str, dict[str, Any]]] | None:
    loaded = []
    for ref in refs:
        try:
            loaded.append(load_schema(ref))
        except SchemaArgError as exc:
            error_line(exc)
            return None
    return loaded


def _contract_of(ref: str, schema: dict[str, Any]) -> Any:
    from schemas.contract import SchemaContract

    if ":" in ref and not Path(ref).is_file():
        return SchemaContract.from_model_ref(ref, Path.cwd())
    return SchemaContract.from_dict(schema, default_name=Path(ref).stem, source=ref)


def check_examples_file(ref: str, schema: dict[str, Any], path: str, compiler: SchemaCompiler,
                        backend: str | None) -> str:
    """The few-shot examples of `path` against SCHEMA (schema, validators, then the compiled grammar):
    'N example(s) ok ...', or raises ExampleError naming the first bad one."""
    from schemas.examples import ExampleError, check_examples, check_grammar, load_examples_file

    checked = check_examples(load_examples_file(Path(path)), _contract_of(ref, schema))
    if backend is None:
        raise ExampleError("examples: no backend compiles the schema, so no grammar can accept them")
    check_grammar(checked, schema, compiler, backend)
    return f"{len(checked)} example(s) ok: the schema, the validators and the {backend} grammar accept each"


def cmd_check(args: argparse.Namespace) -> int:
    loaded = _load_all(args.schemas)
    if loaded is None:
        return 2
    from schemas.examples import ExampleError

    outputs: list[dict[str, Any]] = []
    ok = True
    with open_compiler(args.model, args.timeout) as compiler:  # no verdict cache: the check reports each compile
        for name, schema in loaded:
            check = compiler.check(schema, name)
            warnings = lint(schema) if check.limit_error is None else []
            ok = ok and check.backend is not None and check.schema_error is None
            verdict = None
            if args.examples:
                try:
                    verdict = check_examples_file(name, schema, args.examples, compiler, check.backend)
                except ExampleError as exc:
                    ok, verdict = False, f"FAILED {exc}"
            if args.format in ("json", "csv"):
                outputs.append({**check.as_dict(), "lint": _lint_dict(warnings), "examples": verdict})
            else:
                print(render_check(check, warnings))
                if verdict:
                    print(f"  examples    {verdict}")
    if args.format == "json":
        print(json.dumps(outputs, indent=2))
    elif args.format == "csv":  # a row per schema; its lint warnings counted (`schemas lint --format csv` lists them)
        _print_csv([{**{k: v for k, v in o.items() if k != "lint"}, "lint_warnings": len(o["lint"])}
                    for o in outputs])
    return 0 if ok else 2


def cmd_lint(args: argparse.Namespace) -> int:
    loaded = _load_all(args.schemas)
    if loaded is None:
        return 2
    outputs = []
    for name, schema in loaded:
        warnings = lint(schema)
        if args.format == "json":
            outputs.append({"name": name, "lint": _lint_dict(warnings)})
        elif args.format == "csv":  # a row per warning
            outputs += [{"name": name, **w} for w in _lint_dict(warnings)]
        else:
            print(f"{name}: {len(warnings)} warning(s)")
            print("\n".join(_render_lint(warnings)) if warnings else "  (none)")
    if args.format == "json":
        print(json.dumps(outputs, indent=2))
    elif args.format == "csv":
        _print_csv(outputs, ("name", "code", "path", "message"))
    return 0


def _print_csv(rows: list[dict[str, Any]], columns: tuple[str, ...] = ()) -> None:
    """`rows` as CSV on stdout: the columns given, else every key in the order first seen; a nested value as JSON."""
    import csv

    names = list(columns) or list(dict.fromkeys(k for row in rows for k in row))
    writer = csv.writer(sys.stdout, lineterminator="\n")
    writer.writerow(names)
    for row in rows:
        writer.writerow(["" if row.get(k) is None else json.dumps(row[k]) if isinstance(row.get(k), (dict, list))
                         else row[k] for k in names])


def format_flags(p: argparse.ArgumentParser) -> None:
    """`--format table|csv|json`, as `extract query` takes it; `--json` is the older spelling."""
    p.add_argument("--format", choices=["table", "csv", "json"], default="table",
                   help="table: text for a person (default); csv: a row per schema (check) or per warning "
                   "(lint); json: one JSON list")
    p.add_argument("--json", dest="format", action="store_const", const="json",
                   help="the same as --format json (deprecated)")


def register(sub: argparse._SubParsersAction) -> None:
    """Add `schemas check` and `schemas lint` to the `extract` command line."""
    schemas = sub.add_parser("schemas", help="check or lint JSON Schemas / Pydantic models")
    actions = schemas.add_subparsers(dest="schemas_command", required=True, metavar="check|lint")

    check = actions.add_parser(
        "check", help="compile each schema per grammar backend; report backend, compile time, unenforced keywords"
    )
    check.add_argument("schemas", nargs="+", metavar="SCHEMA", help="a JSON Schema file or module:Model")
    check.add_argument("--model", default="bundled", help="model whose tokenizer to compile against (default: bundled)")
    check.add_argument("--timeout", type=float, default=30.0, help="hard compile timeout per schema and backend, s")
    format_flags(check)
    check.add_argument("--examples", metavar="FILE", help="also check these few-shot examples (JSONL of {document, "
                       "output}) against each schema, its validators and its compiled grammar")
    check.set_defaults(func=cmd_check)

    lint_parser = actions.add_parser("lint", help="design warnings: no escape hatch, answer before reasoning, "
                                     "unbounded lists and strings")
    lint_parser.add_argument("schemas", nargs="+", metavar="SCHEMA", help="a JSON Schema file or module:Model")
    format_flags(lint_parser)
    lint_parser.set_defaults(func=cmd_lint)
