"""`extract bench`: benchmark the pipeline against the bare engine and a retry loop (see pipeline.tools.bench)."""

from __future__ import annotations

import argparse


def cmd_bench(args: argparse.Namespace) -> int:
    from pathlib import Path

    from pipeline.tools.bench import run_bench

    docs = args.docs if args.docs is not None else (6 if args.quick else 1000)
    max_tokens = args.max_tokens or (96 if args.quick else None)  # a smoke run need not finish invoices
    rounds = args.price_rounds if args.price_rounds is not None else (1 if args.quick else 3)
    report = run_bench(Path(args.config), docs, Path(args.out), scaling=args.scaling, memory_scale=args.memory_scale,
                       max_tokens=max_tokens, price_rounds=rounds)
    print((Path(args.out) / "bench.md").read_text())
    print(f"wrote {args.out}/bench.json, bench.md, bench.png")
    return 0 if report else 1


def register(sub: argparse._SubParsersAction) -> None:
    bench = sub.add_parser("bench", help="benchmark the pipeline against the bare engine and a retry loop")
    bench.add_argument("--config", default="jobs/extract.yaml", help="model, prompt and schema to use")
    bench.add_argument("--docs", type=int, help="synthetic documents (default 1000; 6 with --quick)")
    bench.add_argument("--out", default="out/bench", help="folder for bench.json, bench.md, bench.png")
    bench.add_argument("--quick", action="store_true", help="a few documents: a smoke run")
    bench.add_argument("--scaling", action="store_true", help="also run the pipeline with 2 actors")
    bench.add_argument("--max-tokens", type=int, help="output budget of every arm (default: the config's; 96 with "
                       "--quick)")
    bench.add_argument("--price-rounds", type=int, metavar="N",
                       help="time each side of the constraint price N times, alternating, and compare medians "
                       "(default 3; 1 with --quick)")
    bench.add_argument("--memory-scale", type=int, default=0, metavar="K",
                       help="also run the pipeline on K times the documents and report the driver's RSS ratio")
    bench.set_defaults(func=cmd_bench)
