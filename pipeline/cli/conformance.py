"""`extract conformance CORPUS... --out DIR`: the conformance harness's command line (see
pipeline/tools/conformance/)."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from pipeline.cli.options import error_line
from pipeline.tools.conformance import (
    BENCH,
    CORPORA,
    DEFAULT_CORPORA_ROOT,
    ConformanceError,
    Options,
    corpora_root_for,
    resolve_corpora,
    run_conformance,
)
from workers.compiler import CompileWorkerError


def cmd_conformance(args: argparse.Namespace) -> int:
    """Exit 0 when every emitted row re-validates, 1 when one does not, 2 on a bad corpus or option."""
    try:
        corpora = resolve_corpora(args.corpus)
        if args.limit is not None and args.limit < 1:
            raise ConformanceError(f"--limit {args.limit}: must be at least 1")
        if args.generate_limit is not None and args.generate_limit < 1:
            raise ConformanceError(f"--generate-limit {args.generate_limit}: must be at least 1")
        if args.max_tokens < 1:
            raise ConformanceError(f"--max-tokens {args.max_tokens}: must be at least 1")
        opts = Options(
            corpora_root=corpora_root_for(args.corpus, Path(args.corpora_root)),
            subsets=args.subset,
            categories=args.category,
            limit=args.limit,
            max_tokens=args.max_tokens,
            max_model_len=args.max_model_len,
            generate=not args.no_generate,
            generate_limit=args.generate_limit,
            compile_timeout_s=args.compile_timeout,
            keep=args.keep,
            grammar_bounds=args.grammar_bounds,
        )
        out = Path(args.out)
        started = time.perf_counter()
        report = run_conformance(corpora, out, opts)
    except (ConformanceError, CompileWorkerError) as exc:
        error_line(exc)
        return 2
    print((out / "conformance.md").read_text())
    print(f"wrote {out}/conformance.json and {out}/conformance.md in {time.perf_counter() - started:.1f} s")
    overall = report.get(BENCH, {}).get("all", {})
    return 1 if overall.get("emitted") and overall.get("emitted_valid_share") != 1.0 else 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("conformance", help="measure schema coverage, compliance and validator agreement on the "
                                           "shared corpora")
    p.add_argument("corpus", nargs="+", help=f"{' or '.join(CORPORA)}, all, or any folder of *.json schemas "
                                             "(optionally with instances.jsonl), under any name, links followed")
    p.add_argument("--out", required=True, help="folder for conformance.json and conformance.md")
    p.add_argument("--subset", action="append", help=f"a {BENCH} subset, e.g. Github_hard (repeatable)")
    p.add_argument("--category", action="append", help="a test-suite keyword category (file name), e.g. "
                                                        "minLength (repeatable)")
    p.add_argument("--limit", type=int, help="the first N schemas of each subset, in id order")
    p.add_argument("--max-tokens", type=int, default=512, help="output tokens per generated output")
    p.add_argument("--grammar-bounds", choices=("auto", "none"), default="auto",
                   help="generate under the grammar-only string/array bounds fitted to --max-tokens, as a job does "
                   "by default (auto), or under each schema as written (none)")
    p.add_argument("--max-model-len", type=int, default=4096, help="the engine's context; long schemas are cut "
                                                                   "in the prompt to fit")
    p.add_argument("--no-generate", action="store_true", help="coverage and validator agreement only")
    p.add_argument("--generate-limit", type=int,
                   help="generate for the first N schemas of each subset only (coverage and agreement: all)")
    p.add_argument("--compile-timeout", type=float, default=30.0, help="seconds per schema compile, at most")
    p.add_argument("--corpora-root", default=str(DEFAULT_CORPORA_ROOT), help="the folder holding the corpora")
    p.add_argument("--keep", action="store_true",
                   help="keep the parts of earlier runs in --out (a long run split into several commands)")
    p.set_defaults(func=cmd_conformance)


def main(argv: list[str] | None = None) -> int:
    """`python -m pipeline.cli.conformance ...`: the same command without the rest of `extract`."""
    from workers import logs

    top = argparse.ArgumentParser(prog="extract")
    register(top.add_subparsers(dest="command", required=True))
    args = top.parse_args(argv)
    logs.configure()
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
