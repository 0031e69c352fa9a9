"""Schema routing, decided by the driver before any actor starts.

vLLM holds one structured-output backend per engine. So every schema of a job is checked up front
(bounds, then compiled on the configured backends against the model's tokenizer, in a child process
with a hard timeout), and each gets the first backend that compiles it: XGrammar, else llguidance.
Rows are routed to one actor pool per backend in use. A schema no backend compiles fails the job
here, or, with `schema_policy.on_unsupported: dead_letter`, dead-letters its rows as
`schema_unsupported`.

The check itself, its child process and its disk cache belong to the compile lifecycle's owner,
`workers.compiling` (`GrammarChecker`); this module decides the routes from its verdicts. What it reads of the
job is `pipeline.stage_config.RoutingConfig`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import structlog

from pipeline.config import ConfigError
from pipeline.reader import read_schema_values
from pipeline.stage_config import RoutingConfig
from pipeline.storage import Storage
from pipeline.units import Unit
from schemas.contract import SchemaContract
from schemas.row_schema import RowSchemaError, row_contract
from workers.compiling import GrammarChecker, SchemaVerdict

__all__ = ["SchemaRoutes", "SchemaVerdict", "route_schemas"]

log = structlog.get_logger(__name__)


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


def _row_contract(value: str, routing: RoutingConfig) -> SchemaContract | None:
    """The contract a per-row value names (`schemas.row_schema`), or None when it is unusable (the actor
    dead-letters its rows)."""
    try:
        return row_contract(value, routing.schema_table, routing.limits, routing.schema_column)
    except (RowSchemaError, RecursionError):  # nested thousands deep: the decoder's own stack
        return None


def route_schemas(routing: RoutingConfig, units_by_storage: list[tuple[Storage, list[Unit]]]) -> SchemaRoutes:
    """Check every schema the pending units use and route it to a backend. Raises `ConfigError` when a
    schema compiles on no backend, unless the policy dead-letters its rows."""
    policy = routing.policy
    primary = policy.backends[0]
    if not routing.constrained:
        return SchemaRoutes(default=primary)
    routes = SchemaRoutes(default=primary)
    with GrammarChecker(routing.model_path, policy, routing.limits) as checker:
        if not routing.contract.per_row:
            verdict = checker.verdict(routing.contract)
            routes.verdicts.append(verdict)
            if verdict.backend is None:
                _unsupported(verdict, routes, policy.on_unsupported)
            else:
                routes.default = verdict.backend
                check_examples_grammar(routing, verdict.backend)  # few-shot outputs the grammar must accept
            return routes
        column = routing.schema_column
        assert column is not None
        values: set[str] = set(routing.schema_table)
        for storage, units in units_by_storage:
            values |= read_schema_values(storage, units, column)
        seen: dict[str, SchemaVerdict] = {}
        for value in sorted(values):
            contract = _row_contract(value, routing)
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


def check_examples_grammar(routing: RoutingConfig, backend: str) -> None:
    """Each few-shot example's output through `backend`'s compiled grammar (a child process); ConfigError naming
    the first the grammar refuses. Runs where the job's schema is routed, before any actor starts."""
    if not routing.examples or not routing.constrained:
        return
    from schemas.examples import ExampleError
    from workers.compiling import check_examples_grammar as check

    try:  # through the compile lifecycle's owner: its child process, its cache of passes
        check(routing.examples, routing.contract, routing.model_path, backend, routing.policy.compile_timeout_s,
              routing.limits)
    except ExampleError as exc:
        raise ConfigError(f"{routing.source}: examples: {exc}") from None


def _unsupported(verdict: SchemaVerdict, routes: SchemaRoutes, on_unsupported: str) -> None:
    if on_unsupported == "fail":
        raise ConfigError(f"{verdict.message()}; set schema_policy.on_unsupported: dead_letter to dead-letter "
                          "its rows as schema_unsupported instead")
    routes.unsupported[verdict.schema_hash] = verdict.message()
