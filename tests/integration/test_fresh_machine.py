"""A machine that never ran Ray: no `~/.ray/auth_token`. Ray 2.60's `ray start` in token mode makes none and
refuses to start, which failed every test on the session's cluster on a fresh machine (only `ray.init` of a local
cluster makes a token, and the first such run came later). The clusters we start make sure a token exists."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.tools.localcluster import LocalCluster, ensure_auth_token

pytestmark = pytest.mark.slow


def test_a_token_is_made_where_none_is_and_an_existing_one_is_kept(tmp_path):
    ray = str(Path(sys.executable).parent / "ray")
    env = {**os.environ, "HOME": str(tmp_path), "RAY_AUTH_MODE": "token"}
    env.pop("RAY_AUTH_TOKEN", None)
    env.pop("RAY_AUTH_TOKEN_PATH", None)
    ensure_auth_token(ray, env)
    token = (tmp_path / ".ray" / "auth_token").read_text().strip()
    assert len(token) >= 32
    ensure_auth_token(ray, env)
    assert (tmp_path / ".ray" / "auth_token").read_text().strip() == token


@pytest.mark.engine
def test_a_local_cluster_starts_on_a_machine_that_never_ran_ray(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("RAY_AUTH_TOKEN", raising=False)
    monkeypatch.delenv("RAY_AUTH_TOKEN_PATH", raising=False)
    cluster = LocalCluster([1])  # raised "ray start failed: ... no authentication token was found" before
    try:
        assert (tmp_path / ".ray" / "auth_token").exists()
        done = subprocess.run([str(Path(sys.executable).parent / "ray"), "status", f"--address={cluster.address}"],
                              env=cluster.driver_env(), capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr[-2000:]
    finally:
        cluster.stop()
