"""A Ray head and worker raylets on loopback, each with ports and a temp dir of its own (`extract bench --simulate`
and the multi-node tests): `LocalCluster(...).stop()` ends only this cluster's processes."""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

_HANDED_OUT: set[int] = set()


def free_port() -> int:
    """A loopback port free now and never handed out before by this process.

    A port the kernel gives for a bind to 0 is free only until it is closed, and the next bind to 0 may give the very
    same port again: two flags of one `ray start` then name one port, and Ray refuses to start ("metrics_export is
    trying to use a port number ... that is used by other components"). Remembering what was handed out rules that
    out; another process taking the port before Ray binds it stays possible, as with any pick of a free port."""
    for _ in range(1000):
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        if port not in _HANDED_OUT:
            _HANDED_OUT.add(port)
            return port
    raise RuntimeError("no loopback port left that this process has not handed out already")


def node_port_flags(node_manager: bool = False) -> list[str]:
    """`ray start` flags giving each port of a node one of its own, so it never collides with another cluster's."""
    names = ["dashboard-agent-listen-port", "dashboard-agent-grpc-port", "runtime-env-agent-port",
             "metrics-export-port", "object-manager-port", *(["node-manager-port"] if node_manager else [])]
    return [f"--{name}={free_port()}" for name in names]


def ensure_auth_token(ray: str, env: dict[str, str]) -> None:
    """Make sure a Ray auth token exists (`~/.ray/auth_token`, or the one `env` points to) before a head starts.

    Ray 2.60 heads and drivers use token auth (`RAY_AUTH_MODE=token`), and `ray start` in that mode refuses to
    start where no token is found; only `ray.init` of a local cluster makes one. On a machine that never ran Ray
    (a fresh CI machine), a `ray start --head` is then the first and fails. `ray get-auth-token --generate` writes
    one where none exists and leaves an existing one alone."""
    done = subprocess.run([ray, "get-auth-token", "--generate"], env=env, capture_output=True, text=True, timeout=120)
    if done.returncode != 0:  # its stdout is the token: never shown
        raise RuntimeError(f"ray get-auth-token --generate failed: {done.stderr.strip()[-800:]}")


def _dashboard_flags(port: int | None) -> list[str]:
    if port is None:
        return ["--include-dashboard=false"]
    return ["--include-dashboard=true", f"--dashboard-port={port}", "--dashboard-host=127.0.0.1"]


class LocalCluster:
    """A Ray head and worker raylets on loopback, with their own temp dir; `stop` ends only their processes.

    Each node gets its `--num-cpus` and a custom resource `node<i>` (head: node0), so a test can place work.
    `node_env` is added to the environment of every `ray start` (Ray's `RAY_<setting>` system settings).
    `dashboard`: the head runs Ray's dashboard (on a free port, its address `dashboard_url`), which Ray's state API
    (`ray.util.state`) and Jobs API (`extract submit`) need."""

    def __init__(self, cpus: list[int], node_env: dict[str, str] | None = None, dashboard: bool = False) -> None:
        self.temp_dir = tempfile.mkdtemp(prefix="rs", dir="/tmp")  # short: Ray puts sockets under it
        self.port = free_port()
        self.node_ports: list[int] = []
        dashboard_port = free_port() if dashboard else None
        self.dashboard_url = f"http://127.0.0.1:{dashboard_port}" if dashboard_port else None
        env = {**self.env(), **(node_env or {})}
        ray = str(Path(sys.executable).parent / "ray")
        env["RAY_AUTH_MODE"] = "token"  # every node, and the drivers (`driver_env`), on one token
        ensure_auth_token(ray, env)
        for i, n in enumerate(cpus):
            manager = free_port()
            self.node_ports.append(manager)
            common = [f"--num-cpus={n}", f"--resources={json.dumps({f'node{i}': 1000})}", "--disable-usage-stats",
                      f"--node-manager-port={manager}", *node_port_flags()]
            if i == 0:
                args = [ray, "start", "--head", f"--port={self.port}", f"--temp-dir={self.temp_dir}",
                        *_dashboard_flags(dashboard_port), f"--ray-client-server-port={free_port()}", *common]
            else:
                args = [ray, "start", f"--address=127.0.0.1:{self.port}", *common]
            done = subprocess.run(args, env=env, capture_output=True, text=True, timeout=180)
            if done.returncode != 0:
                self.stop()
                raise RuntimeError(f"ray start failed: {(done.stderr or done.stdout).strip()[-800:]}")

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        env["PATH"] = f"{Path(sys.executable).parent}:{env.get('PATH', '')}"
        env.pop("RAY_ADDRESS", None)
        return env

    def driver_env(self) -> dict[str, str]:
        return {**self.env(), "RAY_ADDRESS": self.address, "RAY_AUTH_MODE": "token"}

    def raylet(self, node: int) -> Any:
        """The raylet process of node `node` (0 is the head), found by its node-manager port."""
        import psutil

        flag = f"--node_manager_port={self.node_ports[node]}"
        for proc in psutil.process_iter(["cmdline"]):
            cmd = proc.info["cmdline"] or []
            if cmd and cmd[0].endswith("raylet") and flag in cmd:
                return proc
        return None

    def stop(self) -> None:
        import psutil

        gcs = re.compile(rf":{self.port}(\D|$)")
        mine: dict[int, Any] = {}
        for node in range(len(self.node_ports)):  # each raylet's children: workers, and agents whose titles hide it
            raylet = self.raylet(node)
            if raylet is not None:
                try:
                    mine.update({p.pid: p for p in [raylet, *raylet.children(recursive=True)]})
                except psutil.NoSuchProcess:
                    pass
        for proc in psutil.process_iter(["cmdline"]):
            try:
                cmd = " ".join(proc.info["cmdline"] or [])
                if self.temp_dir in cmd or gcs.search(cmd):
                    mine[proc.pid] = proc
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                pass
        mine.pop(os.getpid(), None)
        procs = list(mine.values())
        for proc in procs:
            try:
                proc.kill()
            except psutil.NoSuchProcess:
                pass
        psutil.wait_procs(procs, timeout=10)
        shutil.rmtree(self.temp_dir, ignore_errors=True)
