"""Compile coverage: which grammar backend can take a schema, how long it takes, and what it leaves out.

"Compiles" means what vLLM itself accepts at request time on that backend, with our engine's
options (`disable_any_whitespace=True`, see `workers/engine.py`): vLLM's own request validation for
the backend (`validate_xgrammar_grammar`, `validate_guidance_grammar`), then a real compilation of
the grammar against the model's tokenizer, along the same path vLLM's backend takes
(`xgrammar.GrammarCompiler.compile_json_schema`; `serialize_guidance_grammar` + `llguidance.LLMatcher`).

Compilation runs in a child process, one per `SchemaCompiler`, which loads the tokenizer once. A
compile that outlives the timeout kills that child (the next call starts a fresh one), so a
pathological schema costs the caller `timeout_s` at most and can never hang it. No engine is
started: a tokenizer is all a grammar needs.

What each backend does *not* enforce is measured, not assumed: `PROBES` are small schemas with
instances that satisfy and violate one keyword, and `derive_enforcement` feeds them to each
backend's own grammar matcher. `ENFORCEMENT` is the result, kept as a constant (tests re-derive part
of it from the engines so it cannot rot). Whatever the chosen backend leaves out is enforced by the
post-check (`schemas.validation.full_validator`) on every emitted record.
"""

from __future__ import annotations

import json
import os
import re
import select
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from schemas.contract import schema_hash
from schemas.limits import SchemaLimitError, SchemaLimits, check_limits, iter_subschemas, pointer
from schemas.validation import checked_formats, draft_name

BACKENDS = ("xgrammar", "guidance")
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


# --- the child process ------------------------------------------------------------------------------


class _WorkerState:
    """Lives in the child: the tokenizer, an xgrammar compiler and an llguidance tokenizer, built once."""

    def __init__(self, model_path: str, disable_any_whitespace: bool) -> None:
        import xgrammar as xgr
        from vllm.tokenizers import get_tokenizer
        from vllm.v1.structured_output.backend_guidance import GuidanceBackend

        self.tokenizer = get_tokenizer(model_path)
        self.vocab_size = self._vocab_size(model_path)
        self.disable_any_whitespace = disable_any_whitespace
        info = xgr.TokenizerInfo.from_huggingface(self.tokenizer, vocab_size=self.vocab_size)
        # As vLLM's XgrammarBackend builds it, without the cache so each compile is timed in full.
        self.xgr_compiler = xgr.GrammarCompiler(info, max_threads=8, cache_enabled=False)
        self.guidance_supported = GuidanceBackend.is_tokenizer_supported(self.tokenizer)
        self.ll_tokenizer = (
            GuidanceBackend._build_ll_tokenizer(self.tokenizer, self.vocab_size) if self.guidance_supported else None
        )
        # One trivial compile per backend pays the lazy imports and thread pools now, at startup,
        # so they never count against (or time out) the first real compile.
        for backend in BACKENDS:
            self.handle({"op": "compile", "backend": backend, "schema": '{"type": "integer"}'})

    @staticmethod
    def _vocab_size(model_path: str) -> int:
        from transformers import AutoConfig

        config = AutoConfig.from_pretrained(model_path)
        text_config = getattr(config, "get_text_config", lambda: config)()
        return int(getattr(text_config, "vocab_size", None) or config.vocab_size)

    # vLLM's request-time validation, per backend (what `SamplingParams._validate_structured_outputs`
    # runs when the engine is configured with that backend).
    def vllm_validate(self, backend: str, schema_text: str) -> str | None:
        from vllm.sampling_params import SamplingParams, StructuredOutputsParams, check_json_nesting

        params = SamplingParams(structured_outputs=StructuredOutputsParams(json=schema_text))
        try:
            check_json_nesting(schema_text)
            if backend == "xgrammar":
                from vllm.v1.structured_output.backend_xgrammar import validate_xgrammar_grammar

                validate_xgrammar_grammar(params)
            elif backend == "guidance":
                from vllm.v1.structured_output.backend_guidance import validate_guidance_grammar

                if not self.guidance_supported:
                    return "the guidance backend supports only fast Hugging Face tokenizers"
                validate_guidance_grammar(params, tokenizer=None)
            else:
                return f"unknown backend {backend!r}"
        except Exception as exc:  # noqa: BLE001 - vLLM raises several types; each means "rejected"
            return f"vLLM rejects it: {_one_line(exc)}"
        return None

    def build_matcher(self, backend: str, schema_text: str) -> Any:
        """The grammar matcher vLLM's backend would build for this request; raises if it cannot."""
        if backend == "xgrammar":
            import xgrammar as xgr

            separators = (",", ":") if self.disable_any_whitespace else None
            compiled = self.xgr_compiler.compile_json_schema(
                schema_text, any_whitespace=not self.disable_any_whitespace, separators=separators
            )
            return xgr.GrammarMatcher(compiled)
        import llguidance
        from vllm.v1.structured_output.backend_guidance import serialize_guidance_grammar
        from vllm.v1.structured_output.backend_types import StructuredOutputOptions

        grammar = serialize_guidance_grammar(
            StructuredOutputOptions.JSON, schema_text, self.disable_any_whitespace, False
        )
        matcher = llguidance.LLMatcher(self.ll_tokenizer, grammar, log_level=0)
        if matcher.is_error():
            raise ValueError(matcher.get_error())
        return matcher

    def first_mask(self, backend: str, matcher: Any) -> str | None:
        """Compute the first token mask, as the engine does before the first token. llguidance
        builds its lexer lazily, so this is where its real compile cost (and any hang) shows up."""
        if backend == "xgrammar":
            import xgrammar as xgr

            matcher.fill_next_token_bitmask(xgr.allocate_token_bitmask(1, self.vocab_size))
            return None
        matcher.compute_bitmask()
        if matcher.is_error():
            return f"guidance cannot compile it: {_one_line(Exception(matcher.get_error()))}"
        return None

    def accepts(self, backend: str, matcher: Any, text: str) -> bool:
        """Whether the matcher lets the model emit exactly `text` and then stop."""
        if backend == "xgrammar":
            return bool(
                matcher.accept_string(text)
                and matcher.accept_token(self.tokenizer.eos_token_id)
                and matcher.is_terminated()
            )
        ids = self.tokenizer.encode(text, add_special_tokens=False)
        return matcher.try_consume_tokens(ids) == len(ids) and bool(matcher.is_accepting())

    def handle(self, request: dict[str, Any]) -> dict[str, Any]:
        op = request["op"]
        if op == "sleep":  # test hook: a compile that hangs
            time.sleep(float(request["seconds"]))
            return {"ok": True}
        backend, schema_text = request["backend"], request["schema"]
        started = time.perf_counter()
        rejected = self.vllm_validate(backend, schema_text)
        if op == "compile" and rejected:
            return {"ok": False, "seconds": time.perf_counter() - started, "error": rejected}
        try:
            matcher = self.build_matcher(backend, schema_text)
        except Exception as exc:  # noqa: BLE001 - any compile failure is reported, not raised
            return {"ok": False, "seconds": time.perf_counter() - started, "error": rejected or
                    f"{backend} cannot compile it: {_one_line(exc)}"}
        if op == "compile":
            error = self.first_mask(backend, matcher)
            return {"ok": error is None, "seconds": time.perf_counter() - started, "error": error}
        accepted = []
        for text in request["instances"]:
            matcher.reset()
            accepted.append(self.accepts(backend, matcher, text))
        return {"ok": rejected is None, "error": rejected, "accepted": accepted}


_NATIVE_PREFIX = re.compile(r"\[\d\d:\d\d:\d\d\] \S+:\d+: ")  # xgrammar's "[05:23:50] /project/cpp/x.cc:936: "


def _one_line(exc: BaseException) -> str:
    text = _NATIVE_PREFIX.sub("", " ".join(str(exc).split())) or type(exc).__name__
    return text if len(text) <= 400 else text[:397] + "..."


def _worker_main(model_path: str, disable_any_whitespace: bool) -> int:
    """Child entry point: JSON requests on stdin, one JSON reply per line on the original stdout."""
    reply = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # anything a library prints goes to stderr, never into the protocol
    sys.stdout = sys.stderr
    started = time.perf_counter()
    try:
        state = _WorkerState(model_path, disable_any_whitespace)
    except Exception as exc:  # noqa: BLE001 - reported to the parent, which raises it
        reply.write(json.dumps({"ready": False, "error": _one_line(exc)}) + "\n")
        return 1
    reply.write(json.dumps({"ready": True, "seconds": time.perf_counter() - started}) + "\n")
    for line in sys.stdin:
        if line.strip():
            reply.write(json.dumps(state.handle(json.loads(line))) + "\n")
    return 0


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
        args = [sys.executable, "-m", "workers.compiler", "--worker", model_path]
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
        reply = self._call({"op": "compile", "backend": backend, "schema": json.dumps(json_schema)}, self.timeout_s)
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
        request = {"op": "probe", "backend": backend, "schema": json.dumps(json_schema), "instances": instances}
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
        return f"not a valid JSON Schema ({draft_name(json_schema)}) at {where}: {_one_line(Exception(exc.message))}"
    return None


def enforced_by(json_schema: dict[str, Any], unenforced: list[tuple[str, str]], backend: str | None = None) -> str:
    """Which check enforces what the engine leaves out; names any format that neither the post-check
    nor `backend`'s grammar checks (such a format is an annotation only)."""
    text = f"post-check: JSON Schema {draft_name(json_schema)} validator (jsonschema)"
    checked = set(checked_formats(json_schema))
    engine = ENFORCEMENT.get(backend or "", {})
    unchecked = sorted(
        {f"{node['format']} at {pointer(list(path))}/format" for path, node in iter_subschemas(json_schema)
         if isinstance(node.get("format"), str) and node["format"] not in checked
         and engine.get(f"format:{node['format']}") != "enforced"}
    )
    if unchecked:
        text += "; format not checked by anything (annotation only): " + ", ".join(unchecked)
    return text


# --- what each backend enforces, measured -------------------------------------------------------------

D7 = "http://json-schema.org/draft-07/schema#"
D4 = "http://json-schema.org/draft-04/schema#"


@dataclass(frozen=True)
class Probe:
    """One keyword in one context: a schema, instances that satisfy it and instances that violate it."""

    id: str
    keyword: str
    schema: dict[str, Any]
    good: tuple[Any, ...]
    bad: tuple[Any, ...]


def _field(sub: dict[str, Any], draft: str | None = None) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "properties": {"v": sub}, "required": ["v"]}
    if draft:
        schema = {"$schema": draft, **schema}
    return schema


def _p(probe_id: str, keyword: str, sub: dict[str, Any], good: Iterable[Any], bad: Iterable[Any],
       draft: str | None = None) -> Probe:
    """A probe on a single field `v`: instances are the field's values."""
    return Probe(probe_id, keyword, _field(sub, draft), tuple({"v": g} for g in good), tuple({"v": b} for b in bad))


def _o(probe_id: str, keyword: str, schema: dict[str, Any], good: Iterable[Any], bad: Iterable[Any]) -> Probe:
    """A probe on a whole object schema."""
    return Probe(probe_id, keyword, schema, tuple(good), tuple(bad))


_INT = {"type": "integer"}
_FORMAT_CASES: dict[str, tuple[list[str], list[str]]] = {
    "date": (["2024-01-31"], ["hello", "2024-13-45"]),
    "date-time": (["2024-01-31T10:20:30Z"], ["hello", "2024-01-31"]),
    "time": (["10:20:30Z"], ["hello", "25:99:00Z"]),
    "duration": (["P3D"], ["hello", "P"]),
    "email": (["ann@example.com"], ["hello", "a b@c"]),
    "idn-email": (["ann@example.com"], ["hello"]),
    "hostname": (["example.com"], ["-bad-", "a b"]),
    "idn-hostname": (["example.com"], ["-bad-"]),
    "ipv4": (["10.1.2.3"], ["hello", "999.1.1.1"]),
    "ipv6": (["::1"], ["hello", "::g"]),
    "uri": (["https://example.com/a"], ["hello world", "no-scheme"]),
    "uri-reference": (["/a/b"], ["a b"]),
    "iri": (["https://example.com/ä"], ["hello world"]),
    "uri-template": (["/a/{b}"], ["/a/{b"]),
    "uuid": (["123e4567-e89b-12d3-a456-426614174000"], ["hello", "123e4567"]),
    "json-pointer": (["/a/b"], ["a/b"]),
    "relative-json-pointer": (["0/a"], ["/a"]),
    "regex": (["^a+$"], ["("]),
}

PROBES: tuple[Probe, ...] = (
    _p("type", "type", {"type": "string"}, ["a"], [1]),
    _p("type:integer", "type", {"type": "integer"}, [3], [1.5]),
    _p("type:multi", "type", {"type": ["string", "null"]}, [None, "a"], [1]),
    _p("enum", "enum", {"enum": ["a", "b"]}, ["a"], ["c"]),
    _p("enum:object", "enum", {"enum": [{"a": 1}, [1]]}, [{"a": 1}], [{"a": 2}, [2]]),
    _p("const:scalar", "const", {"const": "x"}, ["x"], ["y"]),
    _p("const:object", "const", {"const": {"a": 1}}, [{"a": 1}], [{"a": 2}]),
    _p("minLength", "minLength", {"type": "string", "minLength": 3}, ["abcd"], ["ab"]),
    _p("maxLength", "maxLength", {"type": "string", "maxLength": 3}, ["ab"], ["abcdef"]),
    _p("pattern", "pattern", {"type": "string", "pattern": "^[a-z]+$"}, ["abc"], ["ABC"]),
    _p("pattern:unanchored", "pattern", {"type": "string", "pattern": "b"}, ["abc"], ["xyz"]),
    _p("minLength+pattern", "minLength", {"type": "string", "pattern": "^[a-z]+$", "minLength": 3}, ["abcd"], ["ab"]),
    _p("maxLength+pattern", "maxLength", {"type": "string", "pattern": "^[a-z]+$", "maxLength": 3}, ["ab"],
       ["abcdef"]),
    _p("minLength+format", "minLength", {"type": "string", "format": "email", "minLength": 12}, ["abcdef@example.com"],
       ["a@b.co"]),
    _p("maxLength+format", "maxLength", {"type": "string", "format": "email", "maxLength": 8}, ["a@b.co"],
       ["abcdef@example.com"]),
    *(_p(f"format:{name}", "format", {"type": "string", "format": name}, good, bad)
      for name, (good, bad) in _FORMAT_CASES.items()),
    _p("minimum:integer", "minimum", {"type": "integer", "minimum": 5}, [6], [4]),
    _p("maximum:integer", "maximum", {"type": "integer", "maximum": 5}, [4], [6]),
    _p("minimum:number", "minimum", {"type": "number", "minimum": 5}, [6.5], [4.5]),
    _p("maximum:number", "maximum", {"type": "number", "maximum": 5}, [4.5], [6.5]),
    _p("exclusiveMinimum:integer", "exclusiveMinimum", {"type": "integer", "exclusiveMinimum": 5}, [6], [5]),
    _p("exclusiveMaximum:integer", "exclusiveMaximum", {"type": "integer", "exclusiveMaximum": 5}, [4], [5]),
    _p("exclusiveMinimum:number", "exclusiveMinimum", {"type": "number", "exclusiveMinimum": 5}, [5.5], [5, 4.5]),
    _p("exclusiveMaximum:number", "exclusiveMaximum", {"type": "number", "exclusiveMaximum": 5}, [4.5], [5, 5.5]),
    _p("exclusiveMinimum:draft4", "exclusiveMinimum", {"type": "number", "minimum": 5, "exclusiveMinimum": True},
       [6], [5], draft=D4),
    _p("exclusiveMaximum:draft4", "exclusiveMaximum", {"type": "number", "maximum": 5, "exclusiveMaximum": True},
       [4], [5], draft=D4),
    _p("multipleOf:integer", "multipleOf", {"type": "integer", "multipleOf": 3}, [6], [7]),
    _p("multipleOf:number", "multipleOf", {"type": "number", "multipleOf": 0.5}, [1.5], [1.25]),
    _p("minItems", "minItems", {"type": "array", "items": _INT, "minItems": 2}, [[1, 2]], [[1]]),
    _p("maxItems", "maxItems", {"type": "array", "items": _INT, "maxItems": 2}, [[1]], [[1, 2, 3]]),
    _p("uniqueItems", "uniqueItems", {"type": "array", "items": _INT, "uniqueItems": True}, [[1, 2]], [[1, 1]]),
    _p("contains", "contains", {"type": "array", "items": _INT, "contains": {"const": 5}}, [[1, 5]], [[1, 2]]),
    _p("minContains", "minContains", {"type": "array", "items": _INT, "contains": {"const": 5}, "minContains": 2},
       [[5, 5]], [[5, 1]]),
    _p("maxContains", "maxContains", {"type": "array", "items": _INT, "contains": {"const": 5}, "maxContains": 1},
       [[5, 1]], [[5, 5]]),
    _p("prefixItems", "prefixItems", {"type": "array", "prefixItems": [_INT, {"type": "string"}]}, [[1, "a"]],
       [["a", 1]]),
    _p("items:false", "items", {"type": "array", "prefixItems": [_INT], "items": False}, [[1]], [[1, 2]]),
    _p("items:array", "items", {"type": "array", "items": [_INT, {"type": "string"}]}, [[1, "a"]], [["a", 1]],
       draft=D7),
    _p("additionalItems", "additionalItems", {"type": "array", "items": [_INT], "additionalItems": False}, [[1]],
       [[1, 2]], draft=D7),
    _p("unevaluatedItems", "unevaluatedItems", {"type": "array", "prefixItems": [_INT], "unevaluatedItems": False},
       [[1]], [[1, 2]]),
    _o("required", "required", {"type": "object", "properties": {"a": _INT}, "required": ["a"]}, [{"a": 1}], [{}]),
    _o("additionalProperties:false", "additionalProperties",
       {"type": "object", "properties": {"a": _INT}, "additionalProperties": False}, [{"a": 1}], [{"a": 1, "b": 2}]),
    _o("additionalProperties:schema", "additionalProperties",
       {"type": "object", "properties": {"a": _INT}, "additionalProperties": _INT}, [{"a": 1, "b": 2}],
       [{"a": 1, "b": "x"}]),
    _o("additionalProperties:absent", "properties", {"type": "object", "properties": {"a": _INT}}, [{"a": 1, "b": 2}],
       []),
    _o("patternProperties", "patternProperties", {"type": "object", "patternProperties": {"^x_[a-z]+$": _INT}},
       [{"x_a": 1}], [{"x_a": "s"}]),
    _o("propertyNames", "propertyNames", {"type": "object", "propertyNames": {"pattern": "^[a-z]+$"}}, [{"ab": 1}],
       [{"AB": 1}]),
    _o("minProperties", "minProperties", {"type": "object", "additionalProperties": _INT, "minProperties": 2},
       [{"a": 1, "b": 2}], [{"a": 1}]),
    _o("maxProperties", "maxProperties", {"type": "object", "additionalProperties": _INT, "maxProperties": 1},
       [{"a": 1}], [{"a": 1, "b": 2}]),
    _o("dependentRequired", "dependentRequired",
       {"type": "object", "properties": {"a": _INT, "b": _INT}, "dependentRequired": {"a": ["b"]}},
       [{"a": 1, "b": 2}], [{"a": 1}]),
    _o("dependentSchemas", "dependentSchemas",
       {"type": "object", "properties": {"a": _INT, "b": _INT}, "dependentSchemas": {"a": {"required": ["b"]}}},
       [{"a": 1, "b": 2}], [{"a": 1}]),
    _o("dependencies", "dependencies",
       {"$schema": D7, "type": "object", "properties": {"a": _INT, "b": _INT}, "dependencies": {"a": ["b"]}},
       [{"a": 1, "b": 2}], [{"a": 1}]),
    _o("unevaluatedProperties", "unevaluatedProperties",
       {"type": "object", "properties": {"a": _INT}, "unevaluatedProperties": False}, [{"a": 1}], [{"a": 1, "b": 2}]),
    _p("not", "not", {"type": "integer", "not": {"const": 3}}, [4], [3]),
    _o("if", "if",
       {"type": "object", "properties": {"kind": {"enum": ["a", "b"]}, "x": _INT}, "required": ["kind"],
        "if": {"properties": {"kind": {"const": "a"}}}, "then": {"required": ["x"]}},
       [{"kind": "a", "x": 1}, {"kind": "b"}], [{"kind": "a"}]),
    _p("allOf:single", "allOf", {"allOf": [{"type": "integer", "minimum": 5}]}, [6], [4]),
    _p("allOf:multi", "allOf", {"allOf": [{"type": "string"}, {"enum": ["yes", "no"]}]}, ["yes"], ["maybe", 1]),
    _p("anyOf", "anyOf", {"anyOf": [_INT, {"type": "string", "maxLength": 2}]}, [1, "ab"], ["abcd"]),
    _p("oneOf", "oneOf", {"oneOf": [{"type": "integer", "minimum": 0}, {"type": "integer", "maximum": 10}]}, [20],
       [5]),
    _p("oneOf:disjoint", "oneOf", {"oneOf": [_INT, {"type": "string"}]}, [1, "a"], [1.5]),
)


def compact(instance: Any) -> str:
    """An instance as the engine emits it with `disable_any_whitespace`: no whitespace at all."""
    return json.dumps(instance, separators=(",", ":"), ensure_ascii=False)


def probe_status(rejected: str | None, good: list[bool], bad: list[bool]) -> str:
    """'rejected' (vLLM refuses such schemas), 'error' (no verdict), 'ignored' (every violation
    passes), 'partial' (some pass), 'enforced'; '+narrowed' when valid instances are refused too."""
    if rejected:
        return "rejected"
    if len(good) == 0 and len(bad) == 0:
        return "error"
    status = "ignored" if bad and all(bad) else "partial" if any(bad) else "enforced"
    if not all(good):
        status += "+narrowed"
    return status


def derive_enforcement(compiler: SchemaCompiler, backend: str, probes: Iterable[Probe] = PROBES) -> dict[str, str]:
    """Each probe's status on `backend`, measured with that backend's grammar matcher."""
    table: dict[str, str] = {}
    for probe in probes:
        texts = [compact(x) for x in (*probe.good, *probe.bad)]
        rejected, accepted = compiler.probe(probe.schema, backend, texts)
        if not accepted:
            table[probe.id] = "rejected" if rejected and rejected.startswith("vLLM") else "error"
            continue
        table[probe.id] = probe_status(rejected, accepted[: len(probe.good)], accepted[len(probe.good):])
    return table


# Measured with derive_enforcement (`python -m workers.compiler --derive`) on xgrammar 0.2.8,
# llguidance 1.7.6, vLLM 0.32.0, disable_any_whitespace=True. tests/test_coverage.py re-derives a sample.
ENFORCEMENT: dict[str, dict[str, str]] = {
    "xgrammar": {
        "type": "enforced",
        "type:integer": "enforced",
        "type:multi": "enforced",
        "enum": "enforced",
        "enum:object": "enforced",
        "const:scalar": "enforced",
        "const:object": "enforced",
        "minLength": "enforced",
        "maxLength": "enforced",
        "pattern": "enforced",
        "pattern:unanchored": "enforced+narrowed",
        "minLength+pattern": "rejected",
        "maxLength+pattern": "rejected",
        "minLength+format": "rejected",
        "maxLength+format": "rejected",
        "format:date": "enforced",
        "format:date-time": "enforced",
        "format:time": "enforced",
        "format:duration": "enforced",
        "format:email": "enforced",
        "format:idn-email": "rejected",
        "format:hostname": "enforced",
        "format:idn-hostname": "rejected",
        "format:ipv4": "enforced",
        "format:ipv6": "enforced",
        "format:uri": "enforced",
        "format:uri-reference": "enforced",
        "format:iri": "rejected",
        "format:uri-template": "enforced",
        "format:uuid": "enforced",
        "format:json-pointer": "enforced",
        "format:relative-json-pointer": "enforced",
        "format:regex": "rejected",
        "minimum:integer": "enforced",
        "maximum:integer": "enforced",
        "minimum:number": "enforced",
        "maximum:number": "enforced",
        "exclusiveMinimum:integer": "enforced",
        "exclusiveMaximum:integer": "enforced",
        "exclusiveMinimum:number": "enforced",
        "exclusiveMaximum:number": "enforced",
        "exclusiveMinimum:draft4": "rejected",
        "exclusiveMaximum:draft4": "rejected",
        "multipleOf:integer": "rejected",
        "multipleOf:number": "rejected",
        "minItems": "enforced",
        "maxItems": "enforced",
        "uniqueItems": "rejected",
        "contains": "rejected",
        "minContains": "rejected",
        "maxContains": "rejected",
        "prefixItems": "enforced",
        "items:false": "enforced",
        "items:array": "rejected",
        "additionalItems": "rejected",
        "unevaluatedItems": "enforced",
        "required": "enforced",
        "additionalProperties:false": "enforced",
        "additionalProperties:schema": "enforced",
        "additionalProperties:absent": "enforced+narrowed",
        "patternProperties": "enforced",
        "propertyNames": "enforced",
        "minProperties": "enforced",
        "maxProperties": "enforced",
        "dependentRequired": "ignored",
        "dependentSchemas": "ignored",
        "dependencies": "ignored",
        "unevaluatedProperties": "enforced",
        "not": "ignored",
        "if": "ignored",
        "allOf:single": "enforced",
        "allOf:multi": "rejected",
        "anyOf": "enforced",
        "oneOf": "ignored",
        "oneOf:disjoint": "enforced",
    },
    "guidance": {
        "type": "enforced",
        "type:integer": "enforced",
        "type:multi": "enforced",
        "enum": "enforced",
        "enum:object": "enforced",
        "const:scalar": "enforced",
        "const:object": "enforced",
        "minLength": "enforced",
        "maxLength": "enforced",
        "pattern": "enforced",
        "pattern:unanchored": "enforced",
        "minLength+pattern": "enforced",
        "maxLength+pattern": "enforced",
        "minLength+format": "enforced",
        "maxLength+format": "enforced",
        "format:date": "enforced",
        "format:date-time": "enforced",
        "format:time": "enforced",
        "format:duration": "enforced",
        "format:email": "enforced",
        "format:idn-email": "rejected",
        "format:hostname": "enforced",
        "format:idn-hostname": "rejected",
        "format:ipv4": "enforced",
        "format:ipv6": "enforced",
        "format:uri": "enforced",
        "format:uri-reference": "rejected",
        "format:iri": "rejected",
        "format:uri-template": "rejected",
        "format:uuid": "enforced",
        "format:json-pointer": "rejected",
        "format:relative-json-pointer": "rejected",
        "format:regex": "rejected",
        "minimum:integer": "enforced",
        "maximum:integer": "enforced",
        "minimum:number": "enforced",
        "maximum:number": "enforced",
        "exclusiveMinimum:integer": "enforced",
        "exclusiveMaximum:integer": "enforced",
        "exclusiveMinimum:number": "enforced",
        "exclusiveMaximum:number": "enforced",
        "exclusiveMinimum:draft4": "enforced",
        "exclusiveMaximum:draft4": "enforced",
        "multipleOf:integer": "enforced",
        "multipleOf:number": "enforced",
        "minItems": "enforced",
        "maxItems": "enforced",
        "uniqueItems": "rejected",
        "contains": "rejected",
        "minContains": "rejected",
        "maxContains": "rejected",
        "prefixItems": "enforced",
        "items:false": "enforced",
        "items:array": "enforced",
        "additionalItems": "enforced",
        "unevaluatedItems": "rejected",
        "required": "enforced",
        "additionalProperties:false": "enforced",
        "additionalProperties:schema": "enforced",
        "additionalProperties:absent": "enforced",
        "patternProperties": "enforced",
        "propertyNames": "rejected",
        "minProperties": "enforced",
        "maxProperties": "enforced",
        "dependentRequired": "rejected",
        "dependentSchemas": "rejected",
        "dependencies": "rejected",
        "unevaluatedProperties": "rejected",
        "not": "rejected",
        "if": "rejected",
        "allOf:single": "enforced",
        "allOf:multi": "enforced",
        "anyOf": "enforced",
        "oneOf": "rejected",
        "oneOf:disjoint": "enforced",
    },
}

_NOT_ENFORCED = ("ignored", "partial")


def _types(node: dict[str, Any]) -> set[str]:
    kind = node.get("type")
    if isinstance(kind, str):
        return {kind}
    return {k for k in kind if isinstance(k, str)} if isinstance(kind, list) else set()


def _numeric_suffix(node: dict[str, Any]) -> str:
    types = _types(node)
    return ":integer" if types and types <= {"integer"} else ":number"


def _probe_ids(keyword: str, value: Any, node: dict[str, Any]) -> list[str]:
    """The probes that describe `keyword` as it appears in `node` (its context decides which)."""
    rules: dict[str, Callable[[], list[str]]] = {
        "type": lambda: ["type:multi"] if isinstance(value, list) and len(value) > 1
        else ["type:integer"] if "integer" in _types(node) else ["type"],
        "enum": lambda: ["enum:object"] if isinstance(value, list) and any(isinstance(v, (dict, list)) for v in value)
        else ["enum"],
        "const": lambda: ["const:object"] if isinstance(value, (dict, list)) else ["const:scalar"],
        "minLength": lambda: [f"minLength+{'format' if 'format' in node else 'pattern'}"]
        if "pattern" in node or "format" in node else ["minLength"],
        "maxLength": lambda: [f"maxLength+{'format' if 'format' in node else 'pattern'}"]
        if "pattern" in node or "format" in node else ["maxLength"],
        "pattern": lambda: ["pattern", "pattern:unanchored"],
        "format": lambda: [f"format:{value}"],
        "exclusiveMinimum": lambda: ["exclusiveMinimum:draft4"] if isinstance(value, bool)
        else [f"exclusiveMinimum{_numeric_suffix(node)}"],
        "exclusiveMaximum": lambda: ["exclusiveMaximum:draft4"] if isinstance(value, bool)
        else [f"exclusiveMaximum{_numeric_suffix(node)}"],
        "minimum": lambda: [f"minimum{_numeric_suffix(node)}"],
        "maximum": lambda: [f"maximum{_numeric_suffix(node)}"],
        "multipleOf": lambda: [f"multipleOf{_numeric_suffix(node)}"],
        "uniqueItems": lambda: ["uniqueItems"] if value is True else [],
        "items": lambda: ["items:false"] if value is False else ["items:array"] if isinstance(value, list) else [],
        "additionalItems": lambda: ["additionalItems"] if value is not True else [],
        "additionalProperties": lambda: ["additionalProperties:false"] if value is False
        else ["additionalProperties:schema"] if isinstance(value, dict) and value else [],
        "allOf": lambda: ["allOf:multi"] if isinstance(value, list) and len(value) > 1 else ["allOf:single"],
    }
    if keyword in rules:
        return rules[keyword]()
    plain = {"minItems", "maxItems", "contains", "minContains", "maxContains", "prefixItems", "unevaluatedItems",
             "required", "patternProperties", "propertyNames", "minProperties", "maxProperties",
             "dependentRequired", "dependentSchemas", "dependencies", "unevaluatedProperties", "not", "if", "anyOf",
             "oneOf"}
    return [keyword] if keyword in plain else []


def _keywords_with_status(json_schema: dict[str, Any], backend: str, wanted: tuple[str, ...]) -> list[tuple[str, str]]:
    table = ENFORCEMENT.get(backend)
    if table is None:
        raise ValueError(f"unknown backend {backend!r}: expected one of {list(ENFORCEMENT)}")
    found: list[tuple[str, str]] = []
    for path, node in iter_subschemas(json_schema):
        for keyword, value in node.items():
            statuses = [table.get(pid, "") for pid in _probe_ids(keyword, value, node)]
            if any(s.split("+")[0] in wanted for s in statuses):
                found.append((keyword, pointer([*path, keyword])))
    return sorted(found, key=lambda item: item[1])


def unenforced_keywords(json_schema: dict[str, Any], backend: str) -> list[tuple[str, str]]:
    """(keyword, JSON pointer to it) for every keyword occurrence `backend`'s grammar will not
    enforce, per the measured `ENFORCEMENT` table. Keywords vLLM refuses outright on that backend
    are not listed: such a schema does not compile there at all."""
    return _keywords_with_status(json_schema, backend, _NOT_ENFORCED)


def refused_keywords(json_schema: dict[str, Any], backend: str) -> list[tuple[str, str]]:
    """(keyword, JSON pointer) for the occurrences that make vLLM refuse the schema on `backend`
    (per `ENFORCEMENT`): vLLM's own message for XGrammar does not say which feature it objects to."""
    return _keywords_with_status(json_schema, backend, ("rejected",))


def _main(argv: list[str]) -> int:
    if len(argv) >= 2 and argv[0] == "--worker":
        return _worker_main(argv[1], disable_any_whitespace="--any-whitespace" not in argv)
    if argv[:1] == ["--derive"]:
        from workers.bundled_model import resolve_model_path

        model = resolve_model_path(argv[1] if len(argv) > 1 else "bundled")
        with SchemaCompiler(model) as compiler:
            derived = {backend: derive_enforcement(compiler, backend) for backend in BACKENDS}
        print(json.dumps(derived, indent=4))
        return 0
    print("usage: python -m workers.compiler --derive [MODEL] | --worker MODEL", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
