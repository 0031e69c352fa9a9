"""`extract submit CONFIG --address URL`: submit `extract run` to a running Ray cluster (Ray Jobs API)."""

from __future__ import annotations

import argparse

from pipeline import exit_codes
from pipeline.cli.options import config_options, days, error_line, overrides, set_items
from pipeline.config import load_config


def cmd_submit(args: argparse.Namespace) -> int:
    from pipeline import submit as job

    job.prepare_auth()  # before anything imports Ray: it reads the auth mode at import
    loaded = load_config(args.config, overrides(args))
    job.check_output(loaded, args.address, args.allow_local_output)
    extra: list[str] = []
    day = None
    if args.date:
        day = days(loaded, args.date)[0]
        extra += ["--date", day.isoformat() if day else args.date]
    if args.force:
        extra.append("--force")
    files = job.job_files(loaded)
    try:
        job_id = job.submit(loaded, args.address, extra, set_items(args),
                            args.submission_id or job.submission_id(loaded, day), files)
    except job.SubmitError as exc:
        error_line(exc)
        return exit_codes.USAGE
    print(f"submitted {job_id} to {args.address}")
    print(f"  shipped {len(files)} file(s) from {loaded.base_dir}" + (f", and {len(args.set)} --set value(s) in "
                                                                       f"{job.SET_FILE}" if args.set else ""))
    for rel in files:
        print(f"    {rel}")
    print(f"  follow:  RAY_AUTH_MODE=token ray job logs --address {args.address} --follow {job_id}")
    print(f"  status:  RAY_AUTH_MODE=token ray job status --address {args.address} {job_id}")
    if not args.wait:
        return 0
    status, logs = job.wait(args.address, job_id, args.timeout)
    print(logs, end="" if logs.endswith("\n") else "\n")
    print(f"job {job_id}: {status}")
    return 0 if status == "SUCCEEDED" else 1


def register(sub: argparse._SubParsersAction) -> None:
    submit = sub.add_parser("submit", parents=[config_options("path to extract.yaml; its folder is shipped as the "
                                                              "job's working_dir")],
                            help="submit `extract run` to a running Ray cluster (Ray Jobs API)")
    submit.add_argument("--address", required=True, help="the cluster's dashboard, e.g. http://HEAD:8265")
    submit.add_argument("--date", help="the partition to run when input.uri has {date}")
    submit.add_argument("--force", action="store_true", help="redo a committed partition on the cluster")
    submit.add_argument("--submission-id", help="a job id of your choosing (default <name>-<day>: a day is "
                        "submitted once)")
    submit.add_argument("--allow-local-output", action="store_true",
                        help="accept a local output.uri (a path every node of the cluster shares)")
    submit.add_argument("--wait", action="store_true", help="wait for the job, print its logs, exit 0 on success")
    submit.add_argument("--timeout", type=float, default=24 * 3600, help="seconds to --wait at most")
    submit.set_defaults(func=cmd_submit)
