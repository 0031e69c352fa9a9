"""Compile coverage: which grammar backend can take a schema, how long it takes, and what it leaves out.

Compilation runs in a child process (`workers.compile_child`), one per `SchemaCompiler`, which loads the
tokenizer once. A compile that outlives the timeout kills that child (the next call starts a fresh one), so a
pathological schema costs the caller `timeout_s` at most and can never hang it.

What each backend does *not* enforce is measured, not assumed (`workers.enforcement`: the probes and the
measured `ENFORCEMENT` table, re-exported here). Whatever the chosen backend leaves out is enforced by the
post-check (`schemas.validation.full_validator`) on every emitted record.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from schemas.contract import schema_hash
from schemas.limits import SchemaLimitError, SchemaLimits, check_limits
from schemas.pointer import pointer
from schemas.validation import draft_name
from workers.compile_child import BACKENDS, one_line
from workers.enforcement import (
    ENFORCEMENT,
    PROBES,
    Probe,
    compact,
    derive_enforcement,
    enforced_by,
    probe_status,
    refused_keywords,
    unenforced_keywords,
)
from workers.engine.outputs import grammar_spec

__all__ = ["BACKENDS", "ENFORCEMENT", "PROBES", "STARTUP_TIMEOUT_S", "CompileResult", "CompileWorkerError", "Probe",
           "SchemaCheck", "SchemaCompiler", "compact", "derive_enforcement", "enforced_by", "probe_status",
           "refused_keywords", "unenforced_keywords"]

STARTUP_TIMEOUT_S = 180.0  # importing vLLM and loading a tokenizer; not part of any compile's budget
_ROOT = Path(__file__).resolve().parents[1]


@dataclass
class CompileResult:
    backend: str
    ok: bool
    seconds: float
    error: str | None


@dataclass
class SchemaCheck:
    name: str
    schema_hash: str
    limit_error: str | None
    results: dict[str, CompileResult] = field(default_factory=dict)
    backend: str | None = None
    unenforced: list[tuple[str, str]] = field(default_factory=list)
    enforced_by: str = ""
    schema_error: str | None = None  # the schema is not valid under its draft's meta-schema

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "schema_hash": self.schema_hash,
            "limit_error": self.limit_error,
            "schema_error": self.schema_error,
            "backend": self.backend,
            "results": {k: vars(v) for k, v in self.results.items()},
            "unenforced": [list(item) for item in self.unenforced],
            "enforced_by": self.enforced_by,
        }


class CompileWorkerError(RuntimeError):
    """The compile worker could not start (bad model path, missing package, ...)."""


# --- the parent side ---------------------------------------------------------------------------------


class _Timeout(Exception):
    pass


class _Worker:
    """One child process and its pipes. Replies are read with a deadline; the caller kills on timeout."""

    def __init__(self, model_path: str, disable_any_whitespace: bool) -> None:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(_ROOT), env.get("PYTHONPATH")]))
        env.setdefault("VLLM_LOGGING_LEVEL", "ERROR")
        env.setdefault("TOKENIZERS_PARALLELISM", "false")
        self.log = tempfile.TemporaryFile(mode="w+b")
        args = [sys.executable, "-m", "workers.compile_child", model_path]
        if not disable_any_whitespace:
            args.append("--any-whitespace")
        self.proc = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log, env=env)
        self._buffer = b""

    def read(self, timeout_s: float) -> dict[str, Any]:
        deadline = time.monotonic() + timeout_s
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        while b"\n" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                raise _Timeout()
            ready, _, _ = select.select([fd], [], [], left)
            if ready:
                chunk = os.read(fd, 1 << 16)
                if not chunk:
                    raise EOFError(self.stderr_tail())
                self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        return json.loads(line)

    def send(self, request: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write((json.dumps(request) + "\n").encode())
        self.proc.stdin.flush()

    def stderr_tail(self) -> str:
        self.log.seek(0)
        lines = [ln for ln in self.log.read().decode(errors="replace").splitlines() if ln.strip()]
        return " | ".join(lines[-3:])[-600:]

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        self.log.close()

    def close(self) -> None:
        if self.proc.poll() is None and self.proc.stdin is not None:
            try:
                self.proc.stdin.close()
                self.proc.wait(timeout=10)
            except (OSError, subprocess.TimeoutExpired):
                pass
        self.kill()


class SchemaCompiler:
    """Compiles schemas per backend against one model's tokenizer, in a child with a hard timeout.

    Use as a context manager, or call `close()`: it owns a child process.
    """

    def __init__(
        self,
        model_path: str,
        timeout_s: float = 30.0,
        backends: Iterable[str] = BACKENDS,
        limits: SchemaLimits | None = None,
        disable_any_whitespace: bool = True,
    ) -> None:
        self.model_path = model_path
        self.timeout_s = float(timeout_s)
        self.backends = tuple(backends)
        unknown = [b for b in self.backends if b not in BACKENDS]
        if unknown:
            raise ValueError(f"unknown backend(s) {unknown}: expected some of {list(BACKENDS)}")
        self.limits = limits or SchemaLimits(compile_timeout_s=self.timeout_s)
        self.disable_any_whitespace = disable_any_whitespace
        self.startup_seconds: float | None = None
        self._worker: _Worker | None = None

    def __enter__(self) -> SchemaCompiler:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._worker is not None:
            self._worker.close()
            self._worker = None

    def _ensure_worker(self) -> _Worker:
        if self._worker is not None and self._worker.proc.poll() is None:
            return self._worker
        self.close()
        worker = _Worker(self.model_path, self.disable_any_whitespace)
        try:
            hello = worker.read(STARTUP_TIMEOUT_S)
        except (_Timeout, EOFError) as exc:
            worker.kill()
            raise CompileWorkerError(
                f"compile worker for {self.model_path} did not start: {exc or 'timed out'}"
            ) from None
        if not hello.get("ready"):
            worker.kill()
            raise CompileWorkerError(f"compile worker for {self.model_path} did not start: {hello.get('error')}")
        self.startup_seconds = float(hello["seconds"])
        self._worker = worker
        return worker

    def _call(self, request: dict[str, Any], timeout_s: float) -> dict[str, Any]:
        """One request; a reply, or {"timeout": True} / {"died": msg} after killing the child."""
        worker = self._ensure_worker()
        worker.send(request)
        try:
            return worker.read(timeout_s)
        except _Timeout:
            self._worker = None
            worker.kill()
            return {"timeout": True}
        except EOFError as exc:
            self._worker = None
            code = worker.proc.wait()
            worker.kill()
            return {"died": f"compile worker died (exit {code}): {exc}"}

    def compile(self, json_schema: dict[str, Any], backend: str) -> CompileResult:
        """Whether vLLM would accept `json_schema` on `backend` and compile it, and how long that took."""
        if backend not in BACKENDS:
            raise ValueError(f"unknown backend {backend!r}: expected one of {list(BACKENDS)}")
        self._ensure_worker()  # startup is not compile time
        started = time.perf_counter()
        reply = self._call({"op": "compile", "backend": backend, "schema": grammar_spec(json_schema)}, self.timeout_s)
        if reply.get("timeout"):
            return CompileResult(backend, False, time.perf_counter() - started,
                                 f"compile did not finish within limits.compile_timeout_s={self.timeout_s:g}s; "
                                 "the compile worker was killed")
        if "died" in reply:
            return CompileResult(backend, False, time.perf_counter() - started, reply["died"])
        return CompileResult(backend, bool(reply["ok"]), float(reply["seconds"]), reply.get("error"))

    def probe(self, json_schema: dict[str, Any], backend: str, instances: list[str]) -> tuple[str | None, list[bool]]:
        """(vLLM's rejection or None, whether the backend's matcher accepts each instance text).
        The grammar is compiled even when vLLM would reject the schema, to see what it would do."""
        request = {"op": "probe", "backend": backend, "schema": grammar_spec(json_schema), "instances": instances}
        reply = self._call(request, self.timeout_s)
        if reply.get("timeout") or "died" in reply:
            return (reply.get("died") or "timed out"), []
        return reply.get("error"), list(reply.get("accepted", []))

    def _sleep_in_worker(self, seconds: float) -> dict[str, Any]:
        """Test hook: make the child hang for `seconds`, under the compile timeout."""
        return self._call({"op": "sleep", "seconds": seconds}, self.timeout_s)

    def check(self, json_schema: dict[str, Any], name: str = "", all_backends: bool = False) -> SchemaCheck:
        """Limits first; then each backend in order until one compiles (all of them with
        `all_backends`, to measure coverage). The first that compiles is the one a job uses."""
        result = SchemaCheck(name=name, schema_hash=_safe_hash(json_schema), limit_error=None)
        try:
            check_limits(json_schema, self.limits)
        except SchemaLimitError as exc:
            result.limit_error = str(exc)
            return result
        result.schema_error = _meta_schema_error(json_schema)
        for backend in self.backends:
            compiled = self.compile(json_schema, backend)
            if not compiled.ok and (compiled.error or "").startswith("vLLM rejects it"):
                culprits = refused_keywords(json_schema, backend)
                if culprits:
                    shown = ", ".join(f"{k} at {p}" for k, p in culprits[:5]) + (", ..." if len(culprits) > 5 else "")
                    compiled.error = f"{compiled.error} [refused for {backend} here: {shown}]"
            result.results[backend] = compiled
            if compiled.ok and result.backend is None:
                result.backend = backend
                if not all_backends:
                    break
        if result.backend is not None:
            result.unenforced = unenforced_keywords(json_schema, result.backend)
            result.enforced_by = enforced_by(json_schema, result.unenforced, result.backend)
        return result


def _safe_hash(json_schema: Any) -> str:
    try:
        return schema_hash(json_schema)
    except (TypeError, ValueError, RecursionError):
        return "unhashable"


def _meta_schema_error(json_schema: dict[str, Any]) -> str | None:
    import jsonschema

    from schemas.validation import full_validator

    try:
        full_validator(json_schema)
    except jsonschema.SchemaError as exc:
        where = pointer(list(exc.absolute_path)) or "/"
        return f"not a valid JSON Schema ({draft_name(json_schema)}) at {where}: {one_line(Exception(exc.message))}"
    return None


def _main(argv: list[str]) -> int:
    if argv[:1] == ["--derive"]:
        from workers.bundled_model import resolve_model_path

        model = resolve_model_path(argv[1] if len(argv) > 1 else "bundled")
        with SchemaCompiler(model) as compiler:
            derived = {backend: derive_enforcement(compiler, backend) for backend in BACKENDS}
        print(json.dumps(derived, indent=4))
        return 0
    print("usage: python -m workers.compiler --derive [MODEL]", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
