"""A partition's commit from its slices on S3: the driver's `PartitionCommitter.commit`, timed, against a real S3
API on loopback (moto's server, in a process of its own), with a latency added to every request as a stand-in for
S3's time to first byte (moto on loopback answers in about a millisecond; S3 in tens).

The slices are what a run's actors stage: one per batch (`--batch-size`), `--checkpoint-rows` rows a unit, synthetic
row outcomes (`pipeline.tools.simbench._synthetic_outcomes`) written with the actors' own `SliceWriter`. Then the
partition is committed as the driver commits it, from the listing `prepare` returns, `--rounds` times (the commit
deletes the staging, so each round stages again). Timed: staging (one slice after the other), what a rerun does first
with the staged partition (`rerun_check_s`: list the staging and read every slice back), and the commit. The same on
local disk for scale.

    .venv/bin/python lab/experiments/s3_commit.py --docs 10000 --latency-ms 20 --rounds 2 --out /tmp/s/s3commit

Prints one line per store and round; writes `s3_commit.json` in `--out`.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import pyarrow.parquet as pq  # noqa: E402

from pipeline.config import load_config  # noqa: E402
from pipeline.output.commit import PartitionCommitter, output_parts  # noqa: E402
from pipeline.output.layout import OutputLayout  # noqa: E402
from pipeline.output.slices import SliceWriter  # noqa: E402
from pipeline.partition import partition_for  # noqa: E402
from pipeline.run import _pending_work, plan_one  # noqa: E402
from pipeline.storage import storage_for  # noqa: E402
from pipeline.tools.localcluster import free_port  # noqa: E402
from pipeline.tools.machine import machine  # noqa: E402
from pipeline.tools.simbench import _synthetic_outcomes, make_corpus, write_config  # noqa: E402

# moto's WSGI app behind a middleware that sleeps before every request, served threaded (requests overlap, as S3's).
SERVER = r"""
import sys, time
from werkzeug.serving import make_server
from moto.moto_server.werkzeug_app import DomainDispatcherApplication, MotoRequestHandler, create_backend_app
port, delay = int(sys.argv[1]), float(sys.argv[2]) / 1000
app = DomainDispatcherApplication(create_backend_app)
def delayed(environ, start_response):
    if delay:
        time.sleep(delay)
    return app(environ, start_response)
make_server("127.0.0.1", port, delayed, True, request_handler=MotoRequestHandler).serve_forever()
"""


def start_s3(latency_ms: float) -> tuple[subprocess.Popen, str]:
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-c", SERVER, str(port), str(latency_ms)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    endpoint = f"http://127.0.0.1:{port}"
    for _ in range(200):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
            return proc, endpoint
        except OSError:
            time.sleep(0.05)
    proc.kill()
    raise RuntimeError("the S3 server did not start")


def one_store(out: Path, corpus: Path, info: dict, output_uri: str, args: argparse.Namespace,
              endpoint: str | None) -> list[dict]:
    config = write_config(out / "extract.yaml", corpus, info, out / "unused", 1, args.batch_size,
                          args.checkpoint_rows, {})
    overrides = {"output.uri": output_uri, **({"storage.endpoint_url": endpoint} if endpoint else {})}
    loaded = load_config(config, overrides)
    pinput = plan_one(loaded, partition_for(loaded.input_uri, None))
    storage = storage_for(loaded.output_uri, loaded.s3_settings)
    layout = OutputLayout(loaded.output_uri)
    committer = PartitionCommitter(storage, layout, loaded.contract, "simulated", loaded.output_hash, "bench-run",
                                   parts=output_parts(loaded.decisive))
    writer = SliceWriter(storage, "bench-run")
    units = _synthetic_outcomes([pinput], loaded.contract.hash)
    rounds = []
    for n in range(args.rounds):
        committer.prepare(pinput.partition, fresh=True)
        staged_at = time.perf_counter()
        for _, unit, table in units:
            for start in range(unit.start, unit.stop, args.batch_size):  # a slice's range: rows of the input file
                stop = min(start + args.batch_size, unit.stop)
                writer.write(committer.slice_path(pinput.partition, unit.id, start, stop),
                             table.slice(start - unit.start, stop - start))
        stage_s = time.perf_counter() - staged_at
        # What a rerun does first with a partition whose units are all in slices (a driver died before committing
        # it): list the staging, and read each unit's slices back to check them (pipeline.run._pending_work).
        checked_at = time.perf_counter()
        work = _pending_work(committer, pinput, False)
        rerun_check_s = time.perf_counter() - checked_at
        assert not work.pending, "every unit is in slices"
        _, found = committer.prepare(pinput.partition, fresh=False)
        by_unit: dict[str, list] = {}
        for s in found:
            by_unit.setdefault(s.unit_id, []).append(s)
        begun = time.perf_counter()
        result = committer.commit(pinput, begun, 0, slices=by_unit)
        commit_s = time.perf_counter() - begun
        assert result.rows + result.dead_letters == args.docs, result
        rows_file = pq.ParquetFile(storage.arrow_path(committer.committed(pinput.partition).uri("rows", layout.root)),
                                   filesystem=storage.arrow_fs())
        rounds.append({"round": n, "slices": len(found), "units": len(pinput.units), "stage_s": round(stage_s, 3),
                       "rerun_check_s": round(rerun_check_s, 3), "commit_s": round(commit_s, 3),
                       "commit_ms_per_slice": round(1000 * commit_s / max(len(found), 1), 2),
                       "rows_row_groups": rows_file.metadata.num_row_groups,
                       "rows_footer_bytes": rows_file.metadata.serialized_size})
    return rounds


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--docs", type=int, default=10_000)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--checkpoint-rows", type=int, default=256)
    ap.add_argument("--latency-ms", type=float, default=20.0)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--no-local", action="store_true", help="skip the local-disk store")
    ap.add_argument("--no-s3", action="store_true", help="skip the S3 store")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    corpus = out / "corpus"
    info = make_corpus(corpus, args.docs, 1)
    os.environ.setdefault("AWS_ACCESS_KEY_ID", "bench")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "bench")
    os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
    report: dict = {"docs": args.docs, "batch_size": args.batch_size, "checkpoint_rows": args.checkpoint_rows,
                    "latency_ms": args.latency_ms, "machine": machine()}
    if not args.no_local:
        report["local"] = one_store(out, corpus, info, str(out / "local-output"), args, None)
        for r in report["local"]:
            print(f"local round {r['round']}: " + json.dumps(r), flush=True)
    if args.no_s3:
        (out / "s3_commit.json").write_text(json.dumps(report, indent=2, default=str))
        return
    proc, endpoint = start_s3(args.latency_ms)
    try:
        import boto3

        boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1").create_bucket(Bucket="bench")
        report["s3"] = one_store(out, corpus, info, "s3://bench/output", args, endpoint)
    finally:
        proc.kill()
    for r in report["s3"]:
        print(f"s3 ({args.latency_ms} ms a request) round {r['round']}: " + json.dumps(r), flush=True)
    report["s3_commit_s_median"] = statistics.median(r["commit_s"] for r in report["s3"])
    print(f"median S3 commit: {report['s3_commit_s_median']} s for {args.docs} documents")
    (out / "s3_commit.json").write_text(json.dumps(report, indent=2, default=str))


if __name__ == "__main__":
    main()
