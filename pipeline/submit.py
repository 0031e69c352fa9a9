"""`extract submit`: send a job to a running Ray cluster through the Ray Jobs API.

The config's folder becomes the job's `working_dir`, so the config and the user's schema module
travel with it; the job runs `extract run <config>` (or `extract backfill ...`) on the cluster, where
this project must be installed (the GPU image in infra/ has it).
"""

from __future__ import annotations

import os
import shlex
import time
from pathlib import Path

from pipeline.config import LoadedConfig

AGENT_WAIT_S = 120
FORWARDED_ENV = ("EXTRACT_LOG_FORMAT", "EXTRACT_LOG_LEVEL", "EXTRACT_CACHE_DIR", "AWS_ENDPOINT_URL",
                 "AWS_ENDPOINT_URL_S3", "AWS_REGION", "AWS_DEFAULT_REGION", "VLLM_LOGGING_LEVEL")


def entrypoint(config_name: str, extra: list[str]) -> str:
    return " ".join(["extract", "run", shlex.quote(config_name), *map(shlex.quote, extra)])


def submit(loaded: LoadedConfig, address: str, extra_args: list[str], submission_id: str | None = None) -> str:
    from ray.job_submission import JobSubmissionClient

    os.environ.setdefault("RAY_AUTH_MODE", "token")
    client = JobSubmissionClient(address)
    working_dir = Path(loaded.path).parent
    # Only non-secret settings are forwarded; credentials come from the cluster's own AWS chain.
    env = {key: os.environ[key] for key in FORWARDED_ENV if key in os.environ}
    deadline = time.monotonic() + AGENT_WAIT_S
    while True:
        try:
            return client.submit_job(
                entrypoint=entrypoint(Path(loaded.path).name, extra_args),
                runtime_env={"working_dir": str(working_dir), "env_vars": env,
                             "excludes": ["out/", ".venv/", "*.parquet.tmp"]},
                submission_id=submission_id,
                metadata={"job": loaded.config.name, "config_hash": loaded.config_hash},
            )
        except RuntimeError as exc:
            # A head that has just started has no job agent yet; it answers 500 until it does.
            if "No available agent" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(2)


def wait(address: str, job_id: str, timeout_s: float, poll_s: float = 2.0) -> tuple[str, str]:
    """Block until the job ends; return its final status and its logs."""
    import time

    from ray.job_submission import JobStatus, JobSubmissionClient

    client = JobSubmissionClient(address)
    terminal = {JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.STOPPED}
    deadline = time.monotonic() + timeout_s
    status = client.get_job_status(job_id)
    while status not in terminal:
        if time.monotonic() > deadline:
            return f"TIMEOUT ({status})", client.get_job_logs(job_id)
        time.sleep(poll_s)
        status = client.get_job_status(job_id)
    return str(status.value if hasattr(status, "value") else status), client.get_job_logs(job_id)
