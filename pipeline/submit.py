"""`extract submit`: send a job to a running Ray cluster through the Ray Jobs API.

The config's folder becomes the job's `working_dir`, so the config and the user's schema module
travel with it; the job runs `extract run <config>` (or `extract backfill ...`) on the cluster, where
this project must be installed (the GPU image in infra/ has it).
"""

from __future__ import annotations

import os
import shlex
from pathlib import Path

from pipeline.config import LoadedConfig

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
    return client.submit_job(
        entrypoint=entrypoint(Path(loaded.path).name, extra_args),
        runtime_env={"working_dir": str(working_dir), "env_vars": env,
                     "excludes": ["out/", ".venv/", "*.parquet.tmp"]},
        submission_id=submission_id,
        metadata={"job": loaded.config.name, "config_hash": loaded.config_hash},
    )
