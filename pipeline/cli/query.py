"""`extract query CONFIG|OUTPUT SQL`: SQL (DuckDB) over the committed output, as views `rows` and `dead_letters`.

Like `extract report`, it takes the job's extract.yaml or the output folder (or s3:// prefix) itself."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from pipeline.cli.options import config_options, overrides
from pipeline.config import load_config


def cmd_query(args: argparse.Namespace) -> int:
    from pipeline.output.query import NothingCommittedError, run_query

    target = args.config
    if target.endswith((".yaml", ".yml")) or Path(target).is_file():
        target = load_config(target, overrides(args))
    elif args.set:
        print("error: --set applies to a config; this is an output folder (query it through its extract.yaml "
              "to use the job's storage settings)", file=sys.stderr)
        return 2
    try:
        relation = run_query(target, args.sql)
    except NothingCommittedError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    if relation is not None:
        if args.format == "csv":
            table = relation.to_arrow_table()
            import pyarrow.csv as pacsv

            pacsv.write_csv(table, sys.stdout.buffer)
        elif args.format == "json":
            for row in relation.to_arrow_table().to_pylist():
                print(json.dumps(row, default=str))
        else:
            relation.show(max_rows=args.max_rows, max_width=200)
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    query = sub.add_parser("query", parents=[config_options("the job's extract.yaml, or its output folder or "
                                                            "s3:// prefix")],
                           help="SQL over the committed output: views `rows` and `dead_letters`")
    query.add_argument("sql", help="a DuckDB query, e.g. \"SELECT reason, count(*) FROM dead_letters GROUP BY 1\"")
    query.add_argument("--format", choices=["table", "csv", "json"], default="table",
                       help="table (default), csv or json lines")
    query.add_argument("--max-rows", type=int, default=40, help="rows shown in a table (default 40)")
    query.set_defaults(func=cmd_query)
