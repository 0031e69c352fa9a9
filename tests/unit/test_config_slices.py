"""Stages get what they read (issue 53, item 6): planning, routing and the actors' spec take their typed slices of
the job (`pipeline.stage_config`), not `LoadedConfig`; and no module of `pipeline/` or `workers/` reads the job's config
or an actor's spec by probing (`getattr(spec, "name", default)`): a slice has its fields, or it is the wrong one."""

from __future__ import annotations

import ast
import dataclasses
import inspect
from pathlib import Path

import pytest

from pipeline.config import load_config
from tests.conftest import write_config

ROOT = Path(__file__).resolve().parents[2]
# The names a job's config, one of its slices or an actor's spec goes by in the code.
CONFIG_NAMES = {"spec", "config", "cfg", "loaded", "source", "planning", "routing", "input_config", "prompting"}


def _root_name(node: ast.expr) -> str | None:
    while isinstance(node, ast.Attribute):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def config_probes(path: Path) -> list[str]:
    """Each `getattr(X, "literal", ...)` in `path` whose X is a config, a slice or a spec, or an attribute of one:
    'file:line getattr(X, name)'."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getattr"
                and len(node.args) >= 2):
            continue
        target, name = node.args[0], node.args[1]
        if isinstance(name, ast.Constant) and isinstance(name.value, str) and _root_name(target) in CONFIG_NAMES:
            found.append(f"{path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}:{node.lineno} "
                         f"getattr({ast.unparse(target)}, {name.value!r})")
    return found


def test_no_module_probes_the_config_or_the_spec():
    probes = [p for package in ("pipeline", "workers") for path in sorted((ROOT / package).rglob("*.py"))
              for p in config_probes(path)]
    assert probes == [], "read the field of the typed slice instead: " + "; ".join(probes)


def test_the_probe_check_sees_a_probe(tmp_path):
    module = tmp_path / "m.py"
    module.write_text("def f(spec, loaded, other, key):\n"
                      "    a = getattr(spec, 'kv_sample', None)\n"
                      "    b = getattr(loaded.config.output, 'cost', None)\n"
                      "    c = getattr(other, 'x', None)\n"  # not a config: not the rule's
                      "    d = getattr(spec, key)\n"  # a name chosen as the program runs: a loop over fields
                      "    return a, b, c, d\n")
    assert [p.split(" ", 1)[1] for p in config_probes(module)] == [
        "getattr(spec, 'kv_sample')", "getattr(loaded.config.output, 'cost')"]


@pytest.mark.parametrize("module, function, slice_name", [
    ("pipeline.planning", "plan_input", "InputSource"),
    ("pipeline.planning", "plan_run", "PlanningConfig"),
    ("pipeline.routing", "route_schemas", "RoutingConfig"),
    ("pipeline.dataflow", "build_spec", "ActorConfig"),
])
def test_planning_routing_and_the_spec_take_their_slice_not_the_loaded_config(module, function, slice_name):
    import importlib

    first = next(iter(inspect.signature(getattr(importlib.import_module(module), function)).parameters.values()))
    assert first.annotation == slice_name


def test_the_slices_are_frozen_and_read_the_job(tmp_path):
    from pipeline.stage_config import PlanningConfig, RoutingConfig

    loaded = load_config(write_config(tmp_path, **{"input.limit": 7, "output.checkpoint_rows": 3}))
    planning, routing = PlanningConfig.of(loaded), RoutingConfig.of(loaded)
    assert (planning.source.uri, planning.source.limit, planning.source.checkpoint_rows) == (loaded.input_uri, 7, 3)
    assert planning.output_hash == loaded.output_hash and planning.output_uri == loaded.output_uri
    assert routing.contract.hash == loaded.contract.hash and routing.model_path == loaded.model_path
    with pytest.raises(dataclasses.FrozenInstanceError):
        planning.output_hash = "another"  # type: ignore[misc]


def test_the_actors_slice_is_frozen_and_the_spec_reads_the_job_through_it(tmp_path):
    from pipeline.dataflow import build_spec
    from pipeline.stage_config import ActorConfig

    loaded = load_config(write_config(tmp_path, **{"workers.batch_size": 3, "model.max_tokens": 77,
                                                   "output.min_confidence": 0.25, "input.window_overlap": 0.2}))
    job = ActorConfig.of(loaded)
    spec = build_spec(job, "r")
    assert (spec.run_id, spec.model_path, spec.contract.hash) == ("r", loaded.model_path, loaded.contract.hash)
    assert spec.sequences_in_flight == 3 * loaded.config.workers.batches_in_flight and spec.max_tokens == 77
    assert spec.min_confidence == 0.25 and spec.windows.overlap == 0.2
    assert spec.backend == loaded.config.schema_policy.backends[0]  # no routes: the policy's first backend
    with pytest.raises(dataclasses.FrozenInstanceError):
        job.prompt = "another {document}"  # type: ignore[misc]
