"""`extract bench [CONFIG]`: benchmark the pipeline against the bare engine and a retry loop (pipeline.tools.bench)."""

from __future__ import annotations

import argparse
from typing import Any

from pipeline import exit_codes

DEFAULT_CONFIG = "jobs/extract.yaml"


def cmd_bench(args: argparse.Namespace) -> int:
    import sys
    from pathlib import Path

    if args.simulate:
        return _simulated(args)
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
    long = _long_setup(args)
    if args.long_only:
        from pipeline.tools.bench import run_long_only

        run_long_only(Path(args.config), docs, Path(args.out), max_tokens, long)
        print((Path(args.out) / "bench-long.md").read_text())
        print(f"wrote {args.out}/bench-long.json, bench-long.md, bench-windows.png")
        return 0
    report = run_bench(Path(args.config), docs, Path(args.out), scaling=args.scaling, memory_scale=args.memory_scale,
                       max_tokens=max_tokens, price_rounds=rounds, naive=args.naive,
                       long=long if args.long else None)
    print((Path(args.out) / "bench.md").read_text())
    print(f"wrote {args.out}/bench.json, bench.md, bench.png")
    return 0 if report else 1


def _simulated(args: argparse.Namespace) -> int:
    """`extract bench --simulate`: the pipeline at corpus scale on the simulated engine (pipeline.tools.simbench)."""
    import json
    import sys
    from pathlib import Path

    from pipeline.tools.simbench import GRIDS, run_simulated_bench

    if args.config is not None or args.config_flag is not None:
        print("error: bench --simulate makes its own corpus and config; give no config", file=sys.stderr)
        return exit_codes.USAGE
    grid = dict(GRIDS[args.grid])
    for key in ("docs", "actors", "partitions"):
        given = getattr(args, f"sim_{key}")
        if given:
            grid[key] = [int(v) for v in given.split(",")]
    if args.sim_cells:  # docs:actors:partitions,...: exactly these cells
        grid["cells"] = [[int(v) for v in cell.split(":")] for cell in args.sim_cells.split(",")]
    simulated = json.loads(args.sim_engine) if args.sim_engine else {}
    out = Path(args.out if args.out != "out/bench" else "out/bench-sim")
    report = run_simulated_bench(out, grid, batch_size=args.sim_batch_size, checkpoint_rows=args.sim_checkpoint_rows,
                                 simulated=simulated, nodes=args.sim_nodes, ceilings=not args.no_ceilings)
    print((out / "bench-sim.md").read_text())
    print(f"wrote {out}/bench-sim.json, bench-sim.md, bench-sim.png")
    return 0 if report["cells"] and all(c["exit"] == 0 for c in report["cells"]) else 1


def _long_setup(args: argparse.Namespace) -> Any:  # a pipeline.tools.bench_long.LongSetup
    from pipeline.tools.bench_long import LongSetup

    curve = tuple(int(k) for k in args.curve.split(",")) if args.curve else LongSetup().curve
    return LongSetup(window_tokens=args.window_tokens, windows=args.long_windows, curve=curve)


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
    bench.add_argument("--naive", action="store_true", help="also run the arm `naive` (vLLM's defaults, the user's "
                       "prompt, the plain grammar; one more engine start) and the ratios pipeline/naive")
    bench.add_argument("--max-tokens", type=int, help="output budget of every arm (default: the config's; 96 with "
                       "--quick)")
    bench.add_argument("--price-rounds", type=int, metavar="N",
                       help="time each side of the constraint price N times, alternating, and compare medians "
                       "(default 3; 1 with --quick)")
    bench.add_argument("--memory-scale", type=int, default=0, metavar="K",
                       help="also run the pipeline on K times the documents and report the driver's RSS ratio")
    long = bench.add_argument_group("long documents (issue 56): one engine, the short documents, then long ones "
                                    "made of them read in windows, then one document per point of the curve")
    long.add_argument("--long", action="store_true", help="also run the long-document arm and the windows curve "
                      "(OUT/bench-long.json, .md, bench-windows.png; the ratio long_over_short_tokens)")
    long.add_argument("--long-only", action="store_true", help="run only the long-document arm and the curve")
    long.add_argument("--window-tokens", type=int, default=512, metavar="N",
                      help="input.window_tokens of the long documents' job (default 512)")
    long.add_argument("--long-windows", type=int, default=4, metavar="K",
                      help="about K windows per long document (default 4)")
    long.add_argument("--curve", metavar="K,...", help="windows per document of the curve's points "
                      "(default 1,2,5,10,20,50)")
    sim = bench.add_argument_group("--simulate: the pipeline at corpus scale, the engine simulated (no model)")
    sim.add_argument("--simulate", action="store_true", help="run the simulated grid instead of the model arms; "
                     "writes OUT (default out/bench-sim)/bench-sim.json, .md, .png")
    sim.add_argument("--grid", choices=("quick", "medium", "full"), default="quick",
                     help="quick: 10^4 docs, 1 and 4 actors, 1 and 10 partitions (default); full: 10^4..10^6 docs, "
                     "1/4/16 actors, 1 and 1000 partitions")
    sim.add_argument("--sim-docs", help="documents per cell, comma-separated (over the grid's)")
    sim.add_argument("--sim-actors", help="actors per cell, comma-separated")
    sim.add_argument("--sim-partitions", help="partitions (days) per cell, comma-separated")
    sim.add_argument("--sim-cells", metavar="D:A:P,...", help="exactly these cells (documents:actors:partitions), "
                     "instead of the grid's product")
    sim.add_argument("--sim-batch-size", type=int, default=500, help="workers.batch_size (default 500)")
    sim.add_argument("--sim-checkpoint-rows", type=int, default=500, help="output.checkpoint_rows (default 500)")
    sim.add_argument("--sim-nodes", type=int, default=1, help="raylets on loopback (a head and N-1 workers)")
    sim.add_argument("--sim-engine", metavar="JSON", help='model.simulated settings, e.g. \'{"tokens_per_s": 50, '
                     '"ttft_s": 0.2}\' (default: answers at once)')
    sim.add_argument("--no-ceilings", action="store_true", help="skip the commit and Ray Data ceilings")
    bench.set_defaults(func=cmd_bench)
