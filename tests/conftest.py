from __future__ import annotations

import contextlib
import json
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

from pipeline.tools.localcluster import free_port, node_port_flags  # one picker of ports: never one port twice

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "jobs" / "sample" / "invoices.parquet"
TEST_KV_CACHE_BYTES = 256 << 20


# A line Ray forwards from a worker of a cluster this process is connected to, `(ActorName pid=123) ...`, maybe
# coloured: an actor of an earlier test can print one late, while a test reads stderr (seen once in a lone-clone run).
_RAY_WORKER_LINE = re.compile(r"^(\x1b\[[0-9;]*m)?\(.*\bpid=\d+")


def own_err(capsys) -> str:
    """What the code under test wrote to stderr, without lines Ray forwarded from workers meanwhile."""
    return "".join(line for line in capsys.readouterr().err.splitlines(keepends=True)
                   if not _RAY_WORKER_LINE.match(line))


def write_config(folder: Path, simulated: dict | bool = False, **overrides) -> Path:
    """An extract.yaml in `folder`, the sample job's keys with `overrides` (dotted keys) applied.

    `simulated` (True, or `model.simulated` settings): the job runs on the simulated engine (workers/simulated.py)
    instead of vLLM, for tests whose subject is the pipeline around the engine (resume, leases, exit codes,
    accounting): no model import, load or grammar compile, so a run costs seconds less. An output longer than
    `model.max_tokens` (characters / 4) is truncated, as on vLLM.
    """
    config = yaml.safe_load((ROOT / "jobs" / "extract.yaml").read_text())
    config["input"]["uri"] = str(SAMPLE)
    config["output"]["uri"] = str(folder / "out")
    for dotted, value in overrides.items():
        node = config
        *parents, leaf = dotted.split(".")
        for part in parents:
            node = node.setdefault(part, {})
        if value is DELETE:
            node.pop(leaf, None)
        else:
            node[leaf] = value
    if simulated is not False:
        on_simulated_engine(config, simulated if isinstance(simulated, dict) else {})
    else:
        # A small fixed KV cache, never a share of the machine: engines start the same way on any machine and
        # several fit side by side.
        config.setdefault("model", {}).setdefault("engine_kwargs", {}).setdefault("kv_cache_memory_bytes",
                                                                                  TEST_KV_CACHE_BYTES)
    path = folder / "extract.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


DELETE = object()


def on_simulated_engine(config: dict, settings: dict) -> dict:
    """A job's config (a dict, changed in place) on the simulated engine with `settings` (`model.simulated`): the
    keys of vLLM's that the simulation refuses dropped."""
    model = config.setdefault("model", {})
    for key in ("engine_kwargs", "constrained", "sampling", "chat_template"):  # vLLM's, not the simulation's
        model.pop(key, None)
    model["path"] = "simulated"
    model["simulated"] = {"allow": True, **settings}
    return config


def gold_answers(path: Path, doc_ids) -> Path:
    """The sample's gold records of `doc_ids` (jobs/sample/invoices_gold.jsonl), as lines of {"document", "output"}:
    the format `model.simulated.outputs` reads, so the simulated engine answers those documents with their gold."""
    gold = {}
    for line in (ROOT / "jobs" / "sample" / "invoices_gold.jsonl").read_text().splitlines():
        record = json.loads(line)
        gold[record.pop("doc_id")] = record
    texts = dict(zip(*pq.read_table(SAMPLE, columns=["doc_id", "text"]).to_pydict().values(), strict=True))
    path.write_text("".join(json.dumps({"document": texts[i], "output": gold[i]}) + "\n" for i in doc_ids))
    return path


def write_docs(path: Path, ids: list, texts: list) -> Path:
    pq.write_table(pa.table({"doc_id": ids, "text": pa.array(texts, pa.string())}), path)
    return path


@pytest.fixture
def cli_env(ray_head):
    """The environment of a CLI child process whose runs join the session's Ray cluster (`ray_head`), as a run
    submitted to a cluster does: a run then skips the start and stop of a local cluster of its own (about 4 s
    each). Tests whose subject is the driver's own local cluster (its lifecycle, its processes, its noise) take
    `local_cli_env` instead."""
    return joining(ray_head)


def joining(head: dict) -> dict[str, str]:
    """This process's environment, for a child whose Ray runs join the cluster `head` (`start_ray_head`): its
    address, and the token auth its head requires. Each run's actors start engines of their own, the default users
    get (shared engine hosts for the suite were tried twice and gained nothing: docs/testing.md)."""
    return {**os.environ, "RAY_ADDRESS": head["address"], "RAY_AUTH_MODE": "token"}


@pytest.fixture
def local_cli_env():
    """The environment of a CLI child process that starts (and stops) a local Ray cluster of its own."""
    env = dict(os.environ)
    env.pop("RAY_ADDRESS", None)
    return env


def run_cli(args: list[str], env: dict[str, str], cwd: Path | None = None, timeout: float = 600):
    import subprocess

    return subprocess.run([sys.executable, "-m", "pipeline", *args], capture_output=True, text=True, env=env,
                          cwd=cwd or ROOT, timeout=timeout)


@dataclass
class Ran:
    """What `run_main` saw: the same fields as a finished `subprocess.run`."""

    args: list[str]
    returncode: int
    stdout: str
    stderr: str


def run_main(args: list[str], cwd: Path | None = None, env: dict[str, str | None] | None = None) -> Ran:
    """`extract ARGS` in this process (`pipeline.cli.main.main`), for tests whose subject is a command's exit code and
    its lines, not the process: a child's interpreter start and imports (about 2 CPU s each) saved. stdout and stderr
    are captured, the working folder is `cwd`, `env` updates the environment (None removes a key); all three, the
    warning filters and the log setup are put back after. The driver's stderr gate (`logs.quiet_driver`, a pipe on
    file descriptor 2 for the process's life) is left out: it belongs to a CLI process, and Ray must not start here
    (a command that would start it is refused)."""
    import contextlib
    import warnings

    import structlog

    from pipeline.cli import main as cli_main

    out, err = _captured(), _captured()  # text streams with a .buffer, as sys.stdout has (CSV goes to it)
    saved_env, saved_cwd, saved_logs = dict(os.environ), Path.cwd(), structlog.get_config()
    ray = sys.modules.get("ray")
    was_connected = bool(ray is not None and ray.is_initialized())
    try:
        os.environ.update({k: v for k, v in (env or {}).items() if v is not None})
        for key in [k for k, v in (env or {}).items() if v is None]:
            os.environ.pop(key, None)
        os.chdir(cwd or ROOT)
        with warnings.catch_warnings(), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), \
                _without(cli_main.logs, "quiet_driver"), _without(cli_main, "settle_workers"):
            try:
                code = cli_main.main([str(a) for a in args])
            except SystemExit as exc:  # argparse's own exit (2), or a command's sys.exit
                code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    finally:
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)
        structlog.configure(**saved_logs)
    ray = sys.modules.get("ray")
    if ray is not None and ray.is_initialized() and not was_connected:
        ray.shutdown()
        raise AssertionError(f"extract {' '.join(map(str, args))} started Ray in the test process")
    return Ran([str(a) for a in args], int(code), _text(out), _text(err))


def _captured():
    import io

    return io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="backslashreplace", newline="", write_through=True)


def _text(stream) -> str:
    stream.flush()
    return stream.buffer.getvalue().decode("utf-8", errors="replace")


@contextlib.contextmanager
def _without(owner, name: str):
    """`owner.name` replaced by a no-op for the block."""
    kept = getattr(owner, name)
    setattr(owner, name, lambda *a, **k: None)
    try:
        yield
    finally:
        setattr(owner, name, kept)


# The session's head requires its token of drivers (Ray 2.60), this process's too (`ray_cluster`); Ray reads the
# mode when it is imported, so it is set here, before any test module imports Ray. Local clusters use the token by
# default anyway.
os.environ.setdefault("RAY_AUTH_MODE", "token")
# moto accepts any credentials; they must be set before Ray starts so its workers inherit them.
os.environ.setdefault("AWS_ACCESS_KEY_ID", "testing")
os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "testing")
os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")


@pytest.fixture(scope="session")
def ray_cluster(ray_head):
    """The session's Ray cluster (`ray_head`), joined by this process for every in-process job of the session: one
    cluster for both kinds of run, not a second one beside it whose own processes (GCS, raylet, dashboard, log
    monitor, Ray Data's actors) would take their share of the 2 cores for the whole session."""
    import ray

    ray.init(address=ray_head["address"], logging_level="WARNING")
    yield
    ray.shutdown()


@pytest.fixture(scope="module")
def s3_endpoint():
    """A real S3 HTTP API on loopback (moto's server), on a free port."""
    from moto.server import ThreadedMotoServer

    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    yield f"http://127.0.0.1:{port}"
    server.stop()


def s3_client(endpoint: str):
    import boto3

    return boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1")


def kill_processes_mentioning(text: str) -> int:
    import psutil

    killed = 0
    for proc in psutil.process_iter(["cmdline"]):
        try:
            if text in " ".join(proc.info["cmdline"] or []):
                proc.kill()
                killed += 1
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            pass
    return killed


def processes_of_cluster(temp_dir: str) -> list:
    """The processes of the Ray cluster whose temp dir is `temp_dir` (its raylets and GCS name it on their command
    lines) and all their descendants (workers, actors, engine cores), so a test kills only what it started, never
    another cluster's process on the same machine."""
    import psutil

    found: dict[int, psutil.Process] = {}
    for proc in psutil.process_iter(["cmdline"]):
        try:
            if temp_dir in " ".join(proc.info["cmdline"] or []):
                found[proc.pid] = proc
                found.update((child.pid, child) for child in proc.children(recursive=True))
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            pass
    return list(found.values())


def descendants_named(root_pid: int, text: str) -> list:
    """The descendants of `root_pid` whose command line or name contains `text`: a driver that starts its own
    local Ray cluster is the ancestor of its raylet, workers, actors and their engine cores."""
    import psutil

    try:
        children = psutil.Process(root_pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []
    found = []
    for proc in children:
        try:
            if text in " ".join(proc.cmdline() or []) or text in proc.name():
                found.append(proc)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            pass
    return found


def start_ray_head(cpus: float, worker_nodes: int = 0, worker_cpus: float = 1):
    """`ray start --head` without Ray's dashboard (no test of the session's cluster uses its state or Jobs API:
    `extract submit`'s test runs on test_multinode.py's cluster, which has one), plus `worker_nodes` more nodes on
    this machine. Ray 2.60 still runs a minimal dashboard process and the dashboard agent; its nine module
    processes (Jobs, state, metrics, ...) are not started, about 0.02 CPU s less a second of the session.

    The cluster has its own temp dir, so it is neither found by nor in the way of other clusters, and
    `stop_ray_head` stops only its processes. Ray's own start gives up after about a minute when the machine is too
    busy to start its processes: a head that fails so is stopped and started once more, on new ports.
    """
    import subprocess

    for attempt in range(2):
        try:
            return _start_ray_head_once(cpus, worker_nodes, worker_cpus)
        except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as exc:
            reason = (getattr(exc, "stderr", None) or b"")
            reason = reason.decode(errors="replace") if isinstance(reason, bytes) else reason
            if attempt:
                raise RuntimeError(f"`ray start` failed twice: {reason[-2000:]}") from exc


def _start_ray_head_once(cpus: float, worker_nodes: int, worker_cpus: float) -> dict:
    import subprocess
    import tempfile

    from pipeline.tools.localcluster import ensure_auth_token

    temp_dir = tempfile.mkdtemp(prefix="rh", dir="/tmp")  # short: Ray puts sockets under it
    port = free_port()
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}:{env.get('PATH', '')}"
    env.pop("RAY_ADDRESS", None)
    ray_bin = str(Path(sys.executable).parent / "ray")
    env["RAY_AUTH_MODE"] = "token"  # as set for this process above: the head, its workers and every driver
    ensure_auth_token(ray_bin, env)  # a machine that never ran Ray has no token, and `ray start` makes none
    try:
        subprocess.run(
            [ray_bin, "start", "--head", f"--port={port}", f"--temp-dir={temp_dir}", f"--num-cpus={cpus}",
             "--include-dashboard=false", "--disable-usage-stats", f"--ray-client-server-port={free_port()}",
             *node_port_flags(node_manager=True)],
            check=True, env=env, capture_output=True, timeout=180,
        )
        for _ in range(worker_nodes):
            subprocess.run([ray_bin, "start", f"--address=127.0.0.1:{port}", f"--num-cpus={worker_cpus}",
                            "--disable-usage-stats", *node_port_flags(node_manager=True)],
                           check=True, env=env, capture_output=True, timeout=180)
    except BaseException:
        kill_processes_mentioning(temp_dir)  # what did start of it
        raise
    return {"address": f"127.0.0.1:{port}", "temp_dir": temp_dir}


def stop_ray_head(head: dict) -> None:
    """Every process of the cluster: those naming its temp dir and their descendants (the raylet's dashboard agent
    and workers name it nowhere on their command lines, and outlived a kill of the others), and those naming its
    GCS port (the Ray client server, `ray.util.client.server --address=HOST:PORT`, names neither and is no
    descendant of them: it outlived every session, as LocalCluster.stop's same match already kills its own)."""
    import re
    import time

    import psutil

    gcs = re.compile(rf":{head['address'].rsplit(':', 1)[1]}(\D|$)")
    found = {proc.pid: proc for proc in processes_of_cluster(head["temp_dir"])}
    for proc in psutil.process_iter(["cmdline"]):
        try:
            if proc.pid != os.getpid() and gcs.search(" ".join(proc.info["cmdline"] or [])):
                found[proc.pid] = proc
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            pass
    for proc in found.values():
        try:
            proc.kill()
        except psutil.NoSuchProcess:
            pass
    time.sleep(1)


@pytest.fixture(scope="session")
def ray_head():
    """One `ray start --head` cluster (token auth, no dashboard) for the session's CLI runs (`cli_env`)."""
    head = start_ray_head(cpus=2)
    yield head
    stop_ray_head(head)


# Fixtures that start a Ray cluster, a vLLM engine or a grammar-compile child process. A test that uses one is in
# the `engine` tier whether or not it says so; `make test-fast` runs the rest (`-m "not engine"`).
HEAVY_FIXTURES = frozenset({"ray_cluster", "ray_head", "engine", "compiler", "model_path"})
# Fixtures of tests that take seconds without an engine: a real S3 server on loopback, or the CLI in a child
# process (`cli_env`). They are `slow`, and `make test-fast` leaves them out too.
SLOW_FIXTURES = frozenset({"s3_endpoint", "cli_env", "local_cli_env"})


UNIT = Path(__file__).resolve().parent / "unit"


# The CPU work of the whole session, printed at its end: the suite's floor on this machine's cores is that work
# over the cores (docs/testing.md), whatever runs in parallel; every process on the machine counts, so a run beside
# other work says so by a higher figure.
_SESSION_CPU: dict = {}


def pytest_sessionstart(session):
    import time

    from pipeline.tools.machine import cpu_seconds

    _SESSION_CPU.update(wall=time.monotonic(), cpu=cpu_seconds())
    if not hasattr(session.config, "workerinput"):  # under pytest-xdist, the controller writes it for all
        compile_our_modules()


# The packages of ours that the suite's child processes import (CLI runs, Ray's workers and actors, compile children).
OUR_PACKAGES = ("pipeline", "workers", "schemas", "jobs", "tests")


def compile_our_modules() -> None:
    """Where PYTHONDONTWRITEBYTECODE is set (this project's CI machines set it), no process writes the bytecode of
    the modules it compiles, so each of the hundreds of Python processes a session starts compiled ours from source
    again (about 0.2 CPU s a process that imports them all, measured 2026-12-07). Written once here, next to the
    sources as Python itself writes it where the variable is unset (`__pycache__/`, git-ignored), every process
    reads it; a changed source is compiled again, by its own mtime and size. Nothing to do where Python writes it."""
    if not sys.flags.dont_write_bytecode:
        return
    import compileall

    for package in OUR_PACKAGES:
        compileall.compile_dir(ROOT / package, quiet=2, workers=1)


def pytest_terminal_summary(terminalreporter):
    import time

    from pipeline.tools.machine import cpu_seconds, cpu_work_line

    wall = time.monotonic() - _SESSION_CPU.get("wall", time.monotonic())
    if wall < 60:  # a session of a few tests: the figure says nothing
        return
    line = cpu_work_line(_SESSION_CPU["cpu"], cpu_seconds(), wall, os.cpu_count())
    if line:
        terminalreporter.write_line(line)


# The tests that start real vLLM engines: a whole module, or one test of a module (`module.py::test`, with every
# parameter). Under `make test`'s two test processes (pytest-xdist, `--dist loadgroup`) they form one group, run one
# after the other in one process: two vLLM CPU engines side by side slow each other more than they overlap (the
# lab's journal). Every other test is in its module's group, so a module's fixtures (its cluster, its S3 server,
# its compile child) start once, in one process; a module named here as a whole keeps its fixtures the same way.
REAL_ENGINE_TESTS = frozenset({
    "test_bench.py::test_engine_arms_figures_on_a_real_engine",
    "test_conformance.py::test_quick_slice_writes_a_consistent_report",
    "test_contracts.py", "test_engine_failures.py", "test_engine_host.py", "test_engine_thread.py",
    "test_first_job.py::test_first_job_page_runs_as_written",
    "test_noise.py::test_a_run_prints_our_lines_and_the_summary_only",
    "test_per_row_schemas.py", "test_pipeline_e2e.py", "test_side_by_side.py", "test_vllm_version.py"})


def group_of(nodeid: str) -> str:
    """The group of the test `nodeid` (`tests/x/test_m.py::test_name[param]`): `real-engines` for a test of
    REAL_ENGINE_TESTS, else its module's path."""
    path, _, rest = nodeid.partition("::")
    module, name = path.rsplit("/", 1)[-1], rest.split("::")[-1].split("[")[0]
    if module in REAL_ENGINE_TESTS or f"{module}::{name}" in REAL_ENGINE_TESTS:
        return "real-engines"
    return path


# `--unit-beside` (make test's default, with `-n 2`): the second test process runs tests/unit only, at the lowest CPU
# priority (nice 19), beside the first, which runs everything else in the order of a one-process run. The
# integration tier leaves about 0.8 of the 2 cores idle on average (process starts, Ray's waits, one-core CLI runs),
# and the unit tier's pure logic (about 70 CPU s) fills those gaps without taking a core from an engine or a raylet:
# at nice 19 it gets about 1.5% of a core that a nice-0 process wants.
UNIT_LANE = "gw1"


def pick_group(groups, worker: str, beside: bool) -> str | None:
    """The next group (in `groups`' order) for the test process `worker`. Without `beside`, the first. With it,
    `UNIT_LANE` takes only tests/unit's groups; the other process takes the others first, then tests/unit's
    (from the end of the queue) if any are left, or None when nothing is left for the process."""
    groups = list(groups)
    if not beside:
        return groups[0] if groups else None
    units = [g for g in groups if g.startswith("tests/unit/")]
    if worker == UNIT_LANE:
        return units[0] if units else None
    rest = [g for g in groups if not g.startswith("tests/unit/")]
    return rest[0] if rest else (units[-1] if units else None)


@pytest.hookimpl(optionalhook=True, tryfirst=True)
def pytest_xdist_make_scheduler(config, log):
    """`--dist loadgroup` with the groups of `group_of`, each sent whole to one test process, in the order of
    collection: the real-engine group among the first, tests/integration's long modules next and tests/unit's
    short ones last, to fill the end (xdist's default order, most tests first, would leave a long module of few
    tests to run alone at the end). The groups are told to the scheduler from the test ids: pytest-xdist 3.8's own
    `xdist_group` marks are lost under pytest 9.2, whose test ids it can no longer suffix (its issue 1386). With
    `--unit-beside`, each process takes the groups of its lane (`pick_group`)."""
    if config.getvalue("dist") != "loadgroup":
        return None
    config.option.loadscopereorder = False
    from xdist.scheduler import LoadGroupScheduling

    beside = bool(config.getoption("unit_beside", False))

    class ByTestGroup(LoadGroupScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return group_of(nodeid)

        def _assign_work_unit(self, node) -> None:
            group = pick_group(self.workqueue, node.gateway.id, beside)
            if group is None:
                node.shutdown()
                return
            work_unit = self.workqueue.pop(group)
            self.assigned_work.setdefault(node, {})[group] = work_unit
            collection = self.registered_collections[node]
            node.send_runtest_some([collection.index(nodeid) for nodeid, done in work_unit.items() if not done])

        def _reschedule(self, node) -> None:
            if node.shutting_down:
                return
            if pick_group(self.workqueue, node.gateway.id, beside) is None:
                node.shutdown()
                return
            if self._pending_of(self.assigned_work[node]) > 2:
                return
            self._assign_work_unit(node)

    return ByTestGroup(config, log)


def pytest_addoption(parser):
    parser.addoption("--unit-beside", action="store_true", dest="unit_beside",
                     help="with -n 2 --dist loadgroup: the second test process runs tests/unit only, at nice 19")


def pytest_configure(config):
    """Under pytest-xdist, the controller makes sure a Ray auth token exists before its test processes start: two
    of them making the first one at once (`ray start`, a local `ray.init`) could each write their own. With
    `--unit-beside`, the unit lane's process lowers its own CPU priority."""
    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None:
        if config.getoption("unit_beside", False) and workerinput.get("workerid") == UNIT_LANE:
            os.nice(19)
        return
    if getattr(config.option, "numprocesses", None):
        if not os.environ.get("RAY_AUTH_TOKEN") and not Path("~/.ray/auth_token").expanduser().exists():
            from pipeline.tools.localcluster import ensure_auth_token

            env = {**os.environ, "RAY_AUTH_MODE": "token"}
            ensure_auth_token(str(Path(sys.executable).parent / "ray"), env)


def pytest_collection_modifyitems(config, items):
    misplaced = []
    for item in items:
        fixtures = set(getattr(item, "fixturenames", ()))
        if HEAVY_FIXTURES & fixtures:
            item.add_marker(pytest.mark.engine)
        on_s3 = "s3" in str(getattr(getattr(item, "callspec", None), "id", "")).split("-")  # [s3], [s3-step]
        if SLOW_FIXTURES & fixtures or on_s3:
            item.add_marker(pytest.mark.slow)
        if UNIT in Path(str(item.fspath)).parents and any(item.get_closest_marker(m) for m in ("engine", "slow")):
            misplaced.append(item.nodeid)
    if misplaced:  # tests/unit is `make test-fast`: what starts an engine or takes seconds belongs in integration
        raise pytest.UsageError(f"engine or slow tests under tests/unit (move them to tests/integration): "
                                f"{', '.join(misplaced)}")
