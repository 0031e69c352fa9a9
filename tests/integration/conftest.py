"""Fixtures that tests of more than one module of tests/integration read (each starts once a session)."""

from __future__ import annotations

import pytest

from tests.conftest import joining

# What a user's shell does not set: our own verbosity and log settings, and vLLM's log level.
NOT_A_USERS = ("EXTRACT_VERBOSE", "EXTRACT_LOG_FORMAT", "VLLM_LOGGING_LEVEL")


@pytest.fixture(scope="session")
def first_job_page(tmp_path_factory, ray_head):
    """docs/first-job.md run once as written, in a user's environment, its runs joining the session's Ray cluster
    (`test_first_job.run_page`). Its first `extract run` is on vLLM: test_first_job.py checks every command's exit
    and output, test_noise.py that run's console (vLLM's, torch's and Ray's lines kept out)."""
    from tests.integration.test_first_job import run_page

    env = {k: v for k, v in joining(ray_head).items() if k not in NOT_A_USERS}
    return run_page(tmp_path_factory.mktemp("first-job"), env)
