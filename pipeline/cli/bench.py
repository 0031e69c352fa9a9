"""`extract bench [CONFIG]`: benchmark the pipeline against the bare engine and a retry loop (pipeline.tools.bench)."""

from __future__ import annotations

import argparse

from pipeline import exit_codes

DEFAULT_CONFIG = "jobs/extract.yaml"


def cmd_bench(args: argparse.Namespace) -> int:
    import sys
    from pathlib import Path

    from pipeline.tools.bench import run_bench

    if args.config_flag is not None:
        if args.config is not None:
            print("error: give the config once: as the first argument (--config is its old spelling)",
                  file=sys.stderr)
            return exit_codes.USAGE
        print("warning: `bench --config FILE` is deprecated: give the config as the first argument, as every "
              "other command takes it", file=sys.stderr)
    args.config = args.config or args.config_flag or DEFAULT_CONFIG
    if not Path(args.config).is_file():
        print(f"error: {args.config}: no such config file", file=sys.stderr)
        return exit_codes.USAGE
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
    bench.add_argument("config", nargs="?", help=f"the extract.yaml whose model, prompt and schema to use (default "
                       f"{DEFAULT_CONFIG})")
    bench.add_argument("--config", dest="config_flag", metavar="CONFIG", help="the same as the first argument "
                       "(deprecated)")
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
