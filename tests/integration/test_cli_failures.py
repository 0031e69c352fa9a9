"""Issue 23 item 5: every failure in the exit-code table, through the real command.

Each case gives its documented exit code and exactly one line on stderr (the broken pipe: none), never a
traceback; where a case meets input or a committed output, no document is lost or duplicated (`committed_ids`).
None starts Ray or an engine, so the cases run `extract`'s main in this process (`tests.conftest.run_main`, which
fails a command that starts Ray); the late refusal at commit resumes a run whose documents were all staged, so the
commit is the run's first write to the data folders. What needs a process of its own runs as `extract` in a child:
the broken pipe (exit 141 as SIGPIPE) and Ray that cannot start or connect (the entry point itself:
test_cli_exit_codes.py). The stores that refuse are real: a tmpfs mounted read-only or filled (root), or a folder
without write permission (any other user); a case that can do neither here is skipped, saying why.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

from pipeline import exit_codes
from tests.conftest import DELETE, ROOT, run_cli, run_main, write_config, write_docs
from tests.fixtures.commits import DOCS, commit_outcome, committer_for, invoice, outcomes

ROOT_USER = os.geteuid() == 0


@contextmanager
def tmpfs(path: Path, size: str = "1m") -> Iterator[Path]:
    """A real tmpfs of `size` at `path`, unmounted afterwards; skips the test where none can be mounted."""
    path.mkdir(parents=True, exist_ok=True)
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0755", "tmpfs", str(path)],
                             capture_output=True, text=True) if ROOT_USER else None
    if mounted is None or mounted.returncode != 0:
        pytest.skip("needs a tmpfs: " + ("mount failed: " + mounted.stderr.strip() if mounted else "not root"))
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], capture_output=True)


def read_only(path: Path, stack: ExitStack) -> None:
    """Make the folder `path` (a tmpfs when root: chmod does not stop root) refuse writes."""
    if ROOT_USER:
        subprocess.run(["mount", "-o", "remount,ro", str(path)], check=True)
        return
    folders = [path, *(p for p in path.rglob("*") if p.is_dir())]
    for folder in folders:
        folder.chmod(0o555)
    stack.callback(lambda: [folder.chmod(0o755) for folder in folders])


def fill(path: Path) -> None:
    """Write into the tmpfs at `path` until it is full."""
    with open(path / "filler", "wb") as handle:
        try:
            while True:
                handle.write(b"\0" * 65536)
                handle.flush()
        except OSError:
            pass


def job(tmp_path: Path, **keys) -> Path:
    """The sample job over the four documents of tests.fixtures.commits."""
    docs = write_docs(tmp_path / "docs.parquet", DOCS, ["Invoice A-1, total 1.0", "b", "c", "d"])
    return write_config(tmp_path, **{"input.uri": str(docs), **keys})


def committed_job(tmp_path: Path, **keys) -> Path:
    """`job`, committed once by the real committer: row a; dead letters b, c, d."""
    cfg = job(tmp_path, **keys)
    commit_outcome(cfg, "first", {"a": invoice("A-1")}, {"b": "truncated", "c": "truncated", "d": "empty_input"})
    return cfg


def committed_ids(cfg: Path) -> list | None:
    """Every id the output's committed rows and dead letters hold (None: nothing committed), through DuckDB."""
    from pipeline.config import load_config
    from pipeline.output.query import NothingCommittedError, run_query

    try:
        relation = run_query(load_config(cfg), "SELECT doc_id FROM rows UNION ALL SELECT doc_id FROM dead_letters")
    except NothingCommittedError:
        return None
    return sorted(row[0] for row in relation.fetchall())


def bad_ids(tmp_path: Path, ids: pa.Array) -> list[str]:
    docs = tmp_path / "docs.parquet"
    pq.write_table(pa.table({"doc_id": ids, "text": pa.array(["x"] * len(ids), pa.string())}), docs)
    return ["run", str(write_config(tmp_path, **{"input.uri": str(docs)}))]


def not_utf8(values: list[bytes]) -> pa.Array:
    raw = pa.array(values, pa.binary())
    return pa.Array.from_buffers(pa.string(), len(raw), raw.buffers())  # Arrow checks nothing built this way


def yaml_file(tmp_path: Path, text: str) -> list[str]:
    (tmp_path / "extract.yaml").write_text(text)
    return ["run", str(tmp_path / "extract.yaml")]


def latin1_file(tmp_path: Path) -> list[str]:
    (tmp_path / "extract.yaml").write_bytes("name: café\n".encode("latin-1"))
    return ["run", str(tmp_path / "extract.yaml")]


def yaml_bomb(tmp_path: Path) -> list[str]:
    """The sample job with a 1 KB billion-laughs bomb (9**9 strings once expanded) under model.engine_kwargs."""
    lines = ['x0: &x0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    lines += [f"x{n}: &x{n} [" + ", ".join([f"*x{n - 1}"] * 9) + "]" for n in range(1, 9)]
    config = yaml.safe_load(job(tmp_path).read_text())
    config.pop("model")
    body = yaml.safe_dump(config, sort_keys=False) + "model:\n  engine_kwargs:\n    laughs: *x8\n"
    return yaml_file(tmp_path, "\n".join(lines) + "\n" + body)


def deep_json(tmp_path: Path, key: str) -> list[str]:
    """A schema file, or a schema table, of JSON nested 20,000 deep (the decoder's own RecursionError)."""
    (tmp_path / "deep.json").write_text('{"a": ' * 20_000 + "1" + "}" * 20_000)
    keys = {"schema_file": "deep.json"} if key == "schema_file" else \
        {"input.schema_column": "text", "input.schema_table": "deep.json"}
    return ["run", str(job(tmp_path, schema=DELETE, **keys))]


def read_only_output(tmp_path: Path, stack: ExitStack) -> list[str]:
    out = tmp_path / "store"
    if ROOT_USER:
        stack.enter_context(tmpfs(out))
    cfg = committed_job(tmp_path, **{"output.uri": str(out / "out")})
    read_only(out, stack)
    return ["run", str(cfg)]


def full_disk(tmp_path: Path, stack: ExitStack) -> list[str]:
    out = stack.enter_context(tmpfs(tmp_path / "store", "256k"))
    cfg = job(tmp_path, **{"output.uri": str(out / "out")})
    fill(out)
    return ["run", str(cfg)]


def late_refusal(tmp_path: Path, stack: ExitStack) -> list[str]:
    """A run interrupted after it staged every document (staged here by the real committer, as the actors
    would): `extract run` resumes it without an engine, takes the lease and begins the commit in the output's
    root, and its rows/ folder refuses the commit's files."""
    cfg = job(tmp_path)
    loaded, _, _, p, pinput, committer = committer_for(cfg, "interrupted")
    committer.prepare(p, fresh=True)
    committer.stage(p, pinput.units[0].id, outcomes(loaded.contract.hash, {"a": invoice("A-1")},
                                                     {"b": "truncated", "c": "truncated", "d": "empty_input"}))
    rows = tmp_path / "out" / "rows"
    if ROOT_USER:
        stack.enter_context(tmpfs(rows))
    else:
        rows.mkdir(parents=True)
    read_only(rows, stack)
    return ["run", str(cfg)]


def corrupt_manifest(command: str) -> Callable[[Path, ExitStack], list[str]]:
    def build(tmp_path: Path, stack: ExitStack) -> list[str]:
        cfg = committed_job(tmp_path)
        (tmp_path / "out" / "_partitions" / "all" / "manifest.json").write_text('{"partition": ')
        return [command, str(cfg), *(["SELECT count(*) FROM rows"] if command == "query" else [])]
    return build


def missing_data_file(command: str) -> Callable[[Path, ExitStack], list[str]]:
    def build(tmp_path: Path, stack: ExitStack) -> list[str]:
        cfg = committed_job(tmp_path)
        for part in (tmp_path / "out" / "rows").glob("part-*.parquet"):
            part.unlink()
        return [command, str(cfg), *(["SELECT count(*) FROM rows"] if command == "query" else [])]
    return build


def submit_folder(tmp_path: Path, extra: Callable[[Path], None]) -> list[str]:
    """A job in job/ whose input is the folder job/data/ (one Parquet file), plus what `extra` puts there."""
    data = tmp_path / "job" / "data"
    data.mkdir(parents=True)
    write_docs(data / "part-0.parquet", DOCS, ["x"] * len(DOCS))
    extra(data)
    cfg = write_config(tmp_path / "job", **{"input.uri": "data", "output.uri": "s3://bucket/out"})
    return ["submit", str(cfg), "--address", "http://127.0.0.1:1"]


def symlink_out(data: Path) -> None:
    outside = write_docs(data.parent.parent / "elsewhere.parquet", ["e"], ["x"])
    (data / "part-1.parquet").symlink_to(outside)


def secret_data(data: Path) -> None:
    write_docs(data / "credentials.parquet", ["e"], ["x"])


def locked_corrupt_lease(tmp_path: Path, stack: ExitStack) -> list[str]:
    """A `_lease.json` that is not a lease record, locked by a live process (here: the test's own lock): the
    run can neither read its holder nor take it over."""
    import fcntl

    cfg = committed_job(tmp_path)
    lease = tmp_path / "out" / "_lease.json"
    lease.write_text("{not a lease")
    fd = os.open(lease, os.O_RDWR)
    fcntl.flock(fd, fcntl.LOCK_EX)
    stack.callback(os.close, fd)
    return ["run", str(cfg)]


def _committed_rows_file(tmp_path: Path) -> Path:
    import json

    manifest = json.loads((tmp_path / "out" / "_partitions" / "all" / "manifest.json").read_text())
    return tmp_path / "out" / manifest["files"]["rows"]


def manifest_outside(tmp_path: Path, stack: ExitStack) -> list[str]:
    """A manifest edited to name another output's data file through `../` (its size and hash removed too)."""
    import json

    cfg = committed_job(tmp_path)
    other = write_docs(tmp_path / "other.parquet", ["z"], ["x"])
    path = tmp_path / "out" / "_partitions" / "all" / "manifest.json"
    raw = json.loads(path.read_text())
    raw["files"]["rows"] = os.path.relpath(other, tmp_path / "out")
    raw.pop("sizes", None), raw.pop("hashes", None)
    path.write_text(json.dumps(raw))
    return ["query", str(cfg), "SELECT count(*) FROM rows"]


def swapped_file(tmp_path: Path, stack: ExitStack) -> list[str]:
    cfg = committed_job(tmp_path)
    pq.write_table(pa.table({"doc_id": ["x", "y", "z"]}), _committed_rows_file(tmp_path))
    return ["query", str(cfg), "SELECT count(*) FROM rows"]


def changed_in_place(tmp_path: Path, stack: ExitStack) -> list[str]:
    """One byte of the committed rows file changed, its size kept: only `--verify`'s content hash tells."""
    cfg = committed_job(tmp_path)
    rows = _committed_rows_file(tmp_path)
    data = bytearray(rows.read_bytes())
    at = data.index(b"A-1")
    data[at:at + 3] = b"A-2"
    rows.write_bytes(bytes(data))
    return ["query", str(cfg), "SELECT count(*) FROM rows", "--verify"]


def reserved_field(tmp_path: Path, stack: ExitStack) -> list[str]:
    """A schema whose field is named like one of the output's own columns."""
    import json

    (tmp_path / "schema.json").write_text(json.dumps({"type": "object", "properties": {
        "_run_id": {"type": "string"}, "total": {"type": "number"}}, "required": ["total"]}))
    return ["validate", str(job(tmp_path, schema=DELETE, schema_file="schema.json"))]


@dataclass(frozen=True)
class Case:
    build: Callable[[Path, ExitStack], list[str]]  # the command line, from a fresh folder
    code: int  # the exit code the README documents
    says: str  # a piece of the one line
    ids: tuple[str, ...] | None = ()  # what the output holds after: () unchecked, None nothing committed
    resumes: bool = False  # staged work is kept: once the store takes writes, a rerun commits it


CASES: dict[str, Case] = {
    "yaml nested 20,000 deep": Case(lambda t, s: yaml_file(t, "a: " + "[" * 20_000 + "]" * 20_000 + "\n"),
                                    exit_codes.USAGE, "nests more than 64"),
    "a 1 KB yaml bomb": Case(lambda t, s: yaml_bomb(t), exit_codes.USAGE, "expands to more than 100,000"),
    "a config over 1 MiB": Case(lambda t, s: yaml_file(t, "prompt: '" + "x" * (1 << 20) + "'\n"),
                                exit_codes.USAGE, "is over 1,048,576 bytes"),
    "a config that is not utf-8": Case(lambda t, s: latin1_file(t), exit_codes.USAGE, "not UTF-8"),
    "a schema file nested 20,000 deep": Case(lambda t, s: deep_json(t, "schema_file"), exit_codes.USAGE,
                                             "nests too deep"),
    "a schema table nested 20,000 deep": Case(lambda t, s: deep_json(t, "input.schema_table"), exit_codes.USAGE,
                                              "nests too deep"),
    "an id that is not utf-8": Case(lambda t, s: bad_ids(t, not_utf8([b"a", b"\xff\xfe", b"c"])),
                                    exit_codes.USAGE, "1 id(s) that are not valid UTF-8", ids=None),
    "a struct id": Case(lambda t, s: bad_ids(t, pa.array([{"x": 1}, {"x": 2}])), exit_codes.USAGE,
                        "is struct<x: int64>", ids=None),
    "a list id": Case(lambda t, s: bad_ids(t, pa.array([["a"], ["b"]])), exit_codes.USAGE, "is list<", ids=None),
    "an existing read-only output": Case(read_only_output, exit_codes.STORAGE, "Read-only file system"
                                         if ROOT_USER else "Permission denied", ids=tuple(DOCS)),
    "a full disk": Case(full_disk, exit_codes.STORAGE, "No space left on device", ids=None),
    "a late refusal at commit": Case(late_refusal, exit_codes.STORAGE, "rows", ids=None, resumes=True),
    "query: a corrupt manifest": Case(corrupt_manifest("query"), exit_codes.OUTPUT_CORRUPT, "manifest.json"),
    "run: a corrupt manifest": Case(corrupt_manifest("run"), exit_codes.OUTPUT_CORRUPT, "manifest.json"),
    "query: a missing data file": Case(missing_data_file("query"), exit_codes.OUTPUT_CORRUPT, "missing"),
    "run: a missing data file": Case(missing_data_file("run"), exit_codes.OUTPUT_CORRUPT, "missing"),
    "a --set value nested 5,000 deep": Case(lambda t, s: ["validate", str(job(t)), "--set",
                                                        "model.engine_kwargs.x=" + "[" * 5000 + "]" * 5000],
                                            exit_codes.USAGE, "--set model.engine_kwargs.x: the value"),
    "run: a corrupt lease a live process holds": Case(locked_corrupt_lease, exit_codes.OUTPUT_LEASED, "_lease.json",
                                                      ids=tuple(DOCS)),
    "query: a manifest naming a file outside its partition": Case(manifest_outside, exit_codes.OUTPUT_CORRUPT,
                                                                  "is not a data file of partition all"),
    "query: a data file swapped for another": Case(swapped_file, exit_codes.OUTPUT_CORRUPT, "bytes, but"),
    "query --verify: a data file changed at its size": Case(changed_in_place, exit_codes.OUTPUT_CORRUPT,
                                                            "content hash"),
    "validate: a field named like an output column": Case(reserved_field, exit_codes.USAGE, "_run_id"),
    "submit: a symlink out of the folder": Case(lambda t, s: submit_folder(t, symlink_out), exit_codes.USAGE,
                                                "is a symlink to"),
    "submit: a secret-looking file the job reads": Case(lambda t, s: submit_folder(t, secret_data),
                                                         exit_codes.USAGE, "secret-looking name"),
}


# Only errors on stderr: each case must print exactly its one line. Outside any Ray cluster.
QUIET = {"EXTRACT_LOG_LEVEL": "error", "RAY_ADDRESS": None}


def _no_ray_env() -> dict[str, str]:
    env = {**os.environ, "EXTRACT_LOG_LEVEL": "error"}
    env.pop("RAY_ADDRESS", None)
    return env


@pytest.mark.parametrize("case", [pytest.param(case, id=name) for name, case in CASES.items()])
def test_each_failure_is_one_line_and_its_exit_code(case, tmp_path):
    with ExitStack() as stack:
        argv = case.build(tmp_path, stack)
        result = run_main(argv, tmp_path, QUIET)
        lines = result.stderr.splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr[-3000:]
        assert case.says in lines[0]
        assert result.returncode == case.code, lines[0]
        if case.ids != ():
            assert committed_ids(tmp_path / "extract.yaml") == (sorted(case.ids) if case.ids else None)
    if case.resumes:  # staged, not lost: once the store takes writes again, a rerun commits every document once
        rerun = run_main(argv, tmp_path, QUIET)
        assert rerun.returncode == 0, rerun.stderr[-3000:]
        assert committed_ids(tmp_path / "extract.yaml") == sorted(DOCS)


def test_a_reader_that_closes_stdout_ends_the_query_quietly(tmp_path):
    """`extract query ... --format csv | head -2`: no traceback, no 'Exception ignored', exit 141 (as SIGPIPE)."""
    cfg = committed_job(tmp_path)
    for fmt in ("csv", "json", "table"):
        read_end, write_end = os.pipe()
        os.close(read_end)  # the reader is gone before the first byte: every write meets a broken pipe
        try:
            result = subprocess.run([sys.executable, "-m", "pipeline", "query", str(cfg),
                                     "SELECT * FROM dead_letters", "--format", fmt], stdout=write_end,
                                    stderr=subprocess.PIPE, text=True, env=_no_ray_env(), cwd=ROOT, timeout=120)
        finally:
            os.close(write_end)
        assert (result.returncode, result.stderr) == (exit_codes.BROKEN_PIPE, ""), (fmt, result.stderr[-2000:])


def test_a_copied_partition_folder_does_not_change_what_query_reads(tmp_path):
    """`cp -r _partitions/all _partitions/all.bak`: only a partition label's manifest counts, so the query still
    reads each committed document once, and exits 0."""
    import shutil

    cfg = committed_job(tmp_path)
    meta = tmp_path / "out" / "_partitions"
    shutil.copytree(meta / "all", meta / "all.bak")
    result = run_main(["query", str(cfg), "SELECT doc_id FROM rows UNION ALL SELECT doc_id FROM dead_letters",
                       "--format", "csv"], tmp_path, QUIET)
    assert (result.returncode, result.stderr) == (0, ""), result.stderr[-2000:]
    assert sorted(v.strip('"') for v in result.stdout.split()[1:]) == sorted(DOCS)
    assert committed_ids(cfg) == sorted(DOCS)


def test_query_csv_writes_nested_columns_as_json_text(tmp_path):
    """The sample's rows hold a list (`items`) and structs: CSV cannot, so each is written as JSON text, not a
    pyarrow traceback."""
    import csv
    import io
    import json

    cfg = committed_job(tmp_path)
    result = run_main(["query", str(cfg), "SELECT doc_id, items, {'n': 1, 'l': [2]} AS s FROM rows", "--format",
                       "csv"], tmp_path, QUIET)
    assert (result.returncode, result.stderr) == (0, ""), result.stderr[-2000:]
    (row,) = list(csv.DictReader(io.StringIO(result.stdout)))
    assert row["doc_id"] == "a" and isinstance(json.loads(row["items"]), list)
    assert json.loads(row["s"]) == {"n": 1, "l": [2]}


def test_a_local_ray_cluster_that_cannot_start_is_one_line_and_exit_3(tmp_path, local_cli_env):
    """Ray cannot start the run's own cluster (here: its temp folder is too deep for the Unix sockets Ray puts in
    it, which Ray refuses at once; a machine too loaded to start Ray's processes in time fails the same way, after a
    minute). Before, Ray's bare `Exception` reached the terminal as a traceback."""
    deep = tmp_path / ("t" * 110)
    deep.mkdir()
    cfg = job(tmp_path)
    result = run_cli(["run", str(cfg)], {**local_cli_env, "EXTRACT_LOG_LEVEL": "error", "RAY_TMPDIR": str(deep)},
                     cwd=tmp_path)
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: Ray: could not start a local cluster: "), result.stderr
    assert "AF_UNIX path length" in lines[0]
    assert result.returncode == exit_codes.ENGINE
    assert committed_ids(cfg) is None  # nothing half-written
    assert "Traceback" not in result.stdout + result.stderr


def test_a_ray_address_where_nothing_listens_is_one_line_and_exit_3_at_once(tmp_path, local_cli_env):
    """Before, Ray retried a dead RAY_ADDRESS for minutes (more than 2 seen) before its own error."""
    from tests.conftest import free_port

    cfg = job(tmp_path)
    address = f"127.0.0.1:{free_port()}"
    result = run_cli(["run", str(cfg)], {**local_cli_env, "EXTRACT_LOG_LEVEL": "error", "RAY_ADDRESS": address},
                     cwd=tmp_path, timeout=120)
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: Ray: could not connect to the cluster at RAY_ADDRESS="
                                                   f"{address}: nothing answers"), result.stderr
    assert result.returncode == exit_codes.ENGINE
    assert committed_ids(cfg) is None
