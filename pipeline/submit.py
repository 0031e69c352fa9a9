"""`extract submit`: send a job to a running Ray cluster through the Ray Jobs API.

Only what the job needs is shipped as its `working_dir`: the config, the schema module or file, the example
and schema tables and chat template it names, and a local input inside the config's folder (of a folder, only
the files the job reads: `*.parquet` of an input, `*.json` of a schema table). Dotfiles, anything under a
dot-folder (`.aws/`, `.env`, `.git/`) and secret-looking files (`*.env`, `*.pem`, `*.key`, `id_rsa`,
`credentials`, ...) are never shipped: one the job would read is refused in one line (left behind, its
documents would be lost), as is a file that is a symlink out of the folder (shipping its target would ship what
the folder does not hold). The list is printed. `--set`
values travel in a file in that working dir, not on the job's command line (which `ray job list` shows).
The job runs `extract run <config>` (or with `--date`/`--force`) on the cluster, where this project must be
installed (the GPU image in infra/ has it).

Before anything is sent: the output must be one the cluster can write for good (no relative path, and no
local path for a remote cluster, unless `--allow-local-output`); Ray's auth mode is set before Ray is
imported; and the submission id is `<job name>-<day>`, so a night submitted twice is refused by Ray.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import socket
import tempfile
import time
from datetime import date, datetime, timezone
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from pipeline.config import ConfigError, LoadedConfig
from pipeline.storage import has_glob, is_s3

AGENT_WAIT_S = 120
SET_FILE = "extract-set.json"
FORWARDED_ENV = ("EXTRACT_LOG_FORMAT", "EXTRACT_LOG_LEVEL", "EXTRACT_CACHE_DIR", "AWS_ENDPOINT_URL",
                 "AWS_ENDPOINT_URL_S3", "AWS_REGION", "AWS_DEFAULT_REGION", "VLLM_LOGGING_LEVEL")
TOKEN_FILE = "~/.ray/auth_token"
# Files never shipped, whatever the config names: environment files, keys and certificates, credential stores.
SECRET_FILE = re.compile(r"(?i)(\.env(\..*)?|\.pem|\.key|\.p12|\.pfx|\.jks|\.keystore|\.kdbx|\.ppk|\.netrc|\.pgpass"
                         r"|\.htpasswd)$|^(id_(rsa|dsa|ecdsa|ed25519)(\.pub)?|credentials(\..*)?|secrets?(\..*)?"
                         r"|netrc|pgpass|htpasswd)$")
# What the job reads of a folder a config key names (other files there are not the job's).
FOLDER_FILES = {"input.uri": ".parquet", "input.schema_table": ".json"}


class SubmitError(RuntimeError):
    """The cluster refused the job (authentication, a submission id already used): one line."""


def prepare_auth() -> None:
    """Ray reads RAY_AUTH_MODE when it is imported: set token mode first when a token is at hand."""
    if "RAY_AUTH_MODE" not in os.environ and (os.environ.get("RAY_AUTH_TOKEN")
                                              or os.path.exists(os.path.expanduser(TOKEN_FILE))):
        os.environ["RAY_AUTH_MODE"] = "token"


def is_remote(address: str) -> bool:
    """Whether the cluster at `address` runs on another machine than this one."""
    host = urlparse(address if "://" in address else f"http://{address}").hostname or ""
    if host in {"localhost", "127.0.0.1", "::1", ""} or host.startswith("127."):
        return False
    return host not in {socket.gethostname(), socket.getfqdn()}


def check_output(loaded: LoadedConfig, address: str, allow_local: bool) -> None:
    """Refuse an output the job would write where it is lost: a relative path (inside Ray's temporary working
    dir), or a local path on a remote cluster (on whichever node ran the job)."""
    raw = loaded.config.output.uri
    if is_s3(raw) or allow_local:
        return
    if not Path(raw).expanduser().is_absolute():
        raise ConfigError(f"output.uri {raw!r} is relative: on the cluster it would be written inside the job's "
                          "temporary working dir and lost; give an s3:// URI or an absolute shared path "
                          "(or --allow-local-output)")
    if is_remote(address):
        raise ConfigError(f"output.uri {raw!r} is a local path and {address} is a remote cluster: the output would "
                          "stay on the node that ran the job; give an s3:// URI (or --allow-local-output for a "
                          "path every node shares)")


def submission_id(loaded: LoadedConfig, day: date | None) -> str:
    """`<job name>-<day>`: the same job and night always get the same id, so Ray refuses a second submission."""
    when = day or datetime.now(timezone.utc).date()
    return f"{loaded.config.name}-{when.isoformat()}"


def _shippable(base: Path, ref: str | None, key: str) -> list[Path]:
    """The files under `base` that config key `key` names (a file or a folder), relative to `base`. Absolute
    paths and s3:// URIs are not shipped: the cluster must reach them itself."""
    if not ref or is_s3(ref) or Path(ref).expanduser().is_absolute():
        return []
    if "{date}" in ref:
        ref = ref.replace("{date}", "*")
    target = (base / ref).resolve()
    if base.resolve() not in (target, *target.parents) and not has_glob(ref):
        raise ConfigError(f"{key}: {ref!r} is outside the config's folder {base}: submit ships only that folder "
                          "(move it there, or give an absolute path the cluster can read)")
    suffix = FOLDER_FILES.get(key, "")
    if has_glob(ref):
        found = [p for p in base.glob(ref) if p.is_file() and p.name.endswith(suffix)]
    elif target.is_dir():
        found = [p for p in (base / ref).rglob("*") if p.is_file() and p.name.endswith(suffix)]
    else:
        found = [base / ref] if target.is_file() else []
    return sorted(_inside(base, p, key) for p in found)


def _inside(base: Path, path: Path, key: str) -> Path:
    """`path` relative to `base`; `ConfigError` in one line when it is a symlink that leads out of `base`."""
    real, root = path.resolve(), base.resolve()
    if root not in real.parents:
        shown = os.path.relpath(path, base) if path.is_absolute() else str(path)
        raise ConfigError(f"{key}: {shown} is a symlink to {real}, outside the config's folder {base}: submit ships "
                          "only that folder (copy the file in, or give an absolute path the cluster can read)")
    return Path(os.path.relpath(os.path.abspath(path), os.path.abspath(base)))


def _module_files(base: Path, schema_ref: str | None) -> list[Path]:
    """The schema module (`module:Model`) if it lives in the config's folder; an installed one is not shipped."""
    if not schema_ref or ":" not in schema_ref:
        return []
    top = schema_ref.split(":", 1)[0].split(".")[0]
    if (base / f"{top}.py").is_file():
        return [_inside(base, base / f"{top}.py", "schema")]
    if (base / top).is_dir():
        return sorted(_inside(base, p, "schema") for p in (base / top).rglob("*.py"))
    return []


def job_files(loaded: LoadedConfig) -> list[Path]:
    """What the job needs from the config's folder, relative to it; never a dotfile or a dot-folder's file. A
    secret-looking file the job would read is refused in one line rather than left behind."""
    cfg, base = loaded.config, loaded.base_dir
    files = [Path(loaded.path).resolve().relative_to(base.resolve())]
    files += _module_files(base, cfg.schema_ref)
    for key, ref in (("schema_file", cfg.schema_file), ("input.schema_table", cfg.input.schema_table),
                     ("examples", cfg.examples), ("model.chat_template", cfg.model.chat_template),
                     ("input.uri", cfg.input.uri)):
        files += _shippable(base, ref, key)
    hidden = [f for f in files if any(part.startswith(".") or part == "__pycache__" for part in f.parts)]
    secret = sorted({f for f in files[1:] if f not in hidden and SECRET_FILE.search(f.name)})  # [0]: the config
    if secret:  # a file the job reads: leaving it behind would lose its documents on the cluster, so say so
        raise ConfigError(f"{secret[0]} has a secret-looking name (an .env file, a key, a certificate, credentials) "
                          f"and submit never ships one{f' ({len(secret)} such files)' if len(secret) > 1 else ''}; "
                          "rename it if it is job data, or move it out of what the config names")
    return sorted(set(files) - set(hidden))


def stage_working_dir(loaded: LoadedConfig, files: list[Path], sets: list[str]) -> Path:
    """A fresh folder holding only `files` (and the `--set` values, in `SET_FILE`): the job's working_dir."""
    folder = Path(tempfile.mkdtemp(prefix="extract-submit-"))
    for rel in files:
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(loaded.base_dir / rel, folder / rel)
    if sets:
        path = folder / SET_FILE
        path.write_text(json.dumps(sets))
        path.chmod(0o600)
    return folder


def entrypoint(config_name: str, extra: list[str], with_sets: bool) -> str:
    sets = ["--set-file", SET_FILE] if with_sets else []
    return " ".join(["extract", "run", shlex.quote(config_name), *map(shlex.quote, [*extra, *sets])])


def submit(loaded: LoadedConfig, address: str, extra_args: list[str], sets: list[str], job_id: str,
           files: list[Path]) -> str:
    """Ship `files` (and `sets`) and start `extract run` on the cluster; `SubmitError` in one line if refused."""
    prepare_auth()
    from ray.job_submission import JobSubmissionClient

    env = {key: os.environ[key] for key in FORWARDED_ENV if key in os.environ}  # never credentials
    folder = stage_working_dir(loaded, files, sets)
    try:
        client = _client(JobSubmissionClient, address)
        deadline = time.monotonic() + AGENT_WAIT_S
        while True:
            try:
                return client.submit_job(
                    entrypoint=entrypoint(Path(loaded.path).name, extra_args, bool(sets)),
                    runtime_env={"working_dir": str(folder), "env_vars": env},
                    submission_id=job_id,
                    metadata={"job": loaded.config.name, "config_hash": loaded.config_hash},
                )
            except Exception as exc:  # noqa: BLE001 - Ray raises plain RuntimeErrors; each is told in one line
                if "No available agent" in str(exc) and time.monotonic() < deadline:
                    time.sleep(2)  # a head that has just started has no job agent yet; it answers 500 until then
                    continue
                raise SubmitError(explain(exc, address, job_id)) from None
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _client(cls: Any, address: str) -> Any:
    try:
        return cls(address)
    except Exception as exc:  # noqa: BLE001 - connection and auth failures: one line
        raise SubmitError(explain(exc, address, "")) from None


def explain(exc: BaseException, address: str, job_id: str) -> str:
    text = str(exc)
    first = next((line.strip() for line in text.splitlines() if line.strip()), type(exc).__name__)
    if "already exists" in text:
        return (f"job {job_id} was already submitted to {address} (a night runs once); see `ray job status "
                f"{job_id}`, or pass --submission-id to run it again")
    if "Authentication" in type(exc).__name__ or "auth" in text.lower() or "401" in text or "403" in text:
        return (f"the cluster at {address} refused authentication: put its token in RAY_AUTH_TOKEN or "
                f"{TOKEN_FILE} (RAY_AUTH_MODE=token) ({first[:200]})")
    return f"could not submit to {address}: {type(exc).__name__}: {first[:300]}"


def wait(address: str, job_id: str, timeout_s: float, poll_s: float = 2.0) -> tuple[str, str]:
    """Block until the job ends; return its final status and its logs."""
    prepare_auth()
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
