"""`extract query CONFIG|OUTPUT SQL`: SQL (DuckDB) over the committed output, as views `rows` and `dead_letters`.

Like `extract report`, it takes the job's extract.yaml or the output folder (or s3:// prefix) itself."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import pyarrow as pa

from pipeline import exit_codes
from pipeline.cli.options import config_options, error_line, overrides
from pipeline.config import load_config


def output_folder(target: str) -> str:
    """An output folder as the command line names it: an s3:// prefix as it is, a local path absolute against the
    working directory (`./out/invoices`, `out/invoices` and the absolute path are the same output)."""
    return target if "://" in target else os.path.abspath(os.path.expanduser(target))


def sql_error(exc: Exception) -> str:
    """DuckDB's error in one line: its message without the `LINE 1: ...` caret picture."""
    lines = []
    for line in str(exc).splitlines():
        if line.startswith("LINE ") or not line.strip():
            break
        lines.append(line.strip())
    return " ".join(lines) or type(exc).__name__


def cmd_query(args: argparse.Namespace) -> int:
    import duckdb

    from pipeline.output.query import NothingCommittedError, run_query

    target = args.config
    if target.endswith((".yaml", ".yml")) or Path(target).is_file():
        target = load_config(target, overrides(args))
    elif args.set:
        print("error: --set applies to a config; this is an output folder (query it through its extract.yaml "
              "to use the job's storage settings)", file=sys.stderr)
        return exit_codes.USAGE
    else:
        target = output_folder(target)
        if "://" not in target and not os.path.isdir(target):
            print(f"error: {target}: no such output folder (give the job's extract.yaml, its output.uri or an "
                  "s3:// prefix)", file=sys.stderr)
            return exit_codes.USAGE
    try:
        relation = run_query(target, args.sql, verify=args.verify)
        if relation is not None:
            if args.format == "csv":
                import pyarrow.csv as pacsv

                pacsv.write_csv(flat_for_csv(relation.to_arrow_table()), sys.stdout.buffer)
            elif args.format == "json":
                for row in relation.to_arrow_table().to_pylist():
                    print(json.dumps(row, default=str))
            else:
                relation.show(max_rows=args.max_rows, max_width=200)
    except NothingCommittedError as exc:  # a missing or empty output: what was asked for is not there
        error_line(exc)
        return exit_codes.USAGE
    except duckdb.Error as exc:  # bad SQL, an unknown column, a failed cast: the query's fault
        error_line(f"the query failed: {sql_error(exc)}")
        return exit_codes.USAGE
    return 0


def flat_for_csv(table: pa.Table) -> pa.Table:
    """`table` with each nested column (a struct, a list, a map: a record's `customer` or `items`) written as JSON
    text, which CSV can hold; the other columns as they are."""
    for i, field in enumerate(table.schema):
        if pa.types.is_nested(field.type):
            as_map = pa.types.is_map(field.type)  # a map's values come as (key, value) pairs: written as an object
            text = [None if v is None else json.dumps(dict(v) if as_map else v, default=str, ensure_ascii=False)
                    for v in table.column(i).to_pylist()]
            table = table.set_column(i, pa.field(field.name, pa.string()), pa.array(text, pa.string()))
    return table


def register(sub: argparse._SubParsersAction) -> None:
    query = sub.add_parser("query", parents=[config_options("the job's extract.yaml, or its output folder or "
                                                            "s3:// prefix", set_example="output.uri=out/other")],
                           help="SQL over the committed output: views `rows` and `dead_letters`")
    query.add_argument("sql", help="a DuckDB query, e.g. \"SELECT reason, count(*) FROM dead_letters GROUP BY 1\"")
    query.add_argument("--format", choices=["table", "csv", "json"], default="table",
                       help="table (default), csv or json lines")
    query.add_argument("--max-rows", type=int, default=40, help="rows shown in a table (default 40)")
    query.add_argument("--verify", action="store_true",
                       help="also check each committed file's content hash against its manifest (sizes are always "
                            "checked); a mismatch exits 8")
    query.set_defaults(func=cmd_query)
