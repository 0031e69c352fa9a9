"""infra/k8s/ as a cluster would take it, without a cluster: every RayJob and RayCluster (the nightly template
included) against KubeRay v1.7.0's published CRDs, and every core object against Kubernetes 1.34's schemas.
Unknown fields are errors, as under `kubectl apply`'s default strict field validation.

The Kubernetes schemas come from a PyPI package and are kept in tests/fixtures/kubernetes. KubeRay's CRDs are
not in this repository (what is taken from another project's repository is not committed here): they are read
from $EXTRACT_KUBERAY_CRDS or ../shared/kuberay/v1.7.0 beside the project, checked against the sha256s in
tests/fixtures/kuberay/README.md, and the RayJob/RayCluster checks skip, saying so, where they are absent."""

from __future__ import annotations

import copy
import hashlib
import json
import os
import re
from pathlib import Path

import jsonschema
import pytest
import referencing
import yaml

from tests.conftest import ROOT

K8S = ROOT / "infra" / "k8s"
FIXTURES = ROOT / "tests" / "fixtures"
KUBERAY_VERSION = "v1.7.0"
KUBERAY = Path(os.environ.get("EXTRACT_KUBERAY_CRDS") or ROOT.parent / "shared" / "kuberay" / KUBERAY_VERSION)
CRD_SHA256 = {"ray.io_rayjobs.yaml": "01a5cf3b17c1769fda44af7e82debcd98722f0c27b9ab84d084681c6649121f5",
              "ray.io_rayclusters.yaml": "c44704442eef0c6721ad40c1d66782c8bd3fdab9d3344306a5820910a679baa1"}
NO_CRDS = (f"KubeRay {KUBERAY_VERSION}'s CRDs are not at {KUBERAY} (set EXTRACT_KUBERAY_CRDS to the folder holding "
           "ray.io_rayjobs.yaml and ray.io_rayclusters.yaml; tests/fixtures/kuberay/README.md says where from)")


def have_crds() -> bool:
    return all((KUBERAY / name).is_file() for name in CRD_SHA256)
KUBERNETES = FIXTURES / "kubernetes" / "v1.34.0-local-strict"
CORE_SCHEMAS = {("v1", "ConfigMap"): "configmap-v1.json", ("batch/v1", "CronJob"): "cronjob-batch-v1.json",
                ("rbac.authorization.k8s.io/v1", "Role"): "role-rbac-v1.json",
                ("rbac.authorization.k8s.io/v1", "RoleBinding"): "rolebinding-rbac-v1.json",
                ("v1", "Secret"): "secret-v1.json", ("v1", "ServiceAccount"): "serviceaccount-v1.json"}
NIGHT = "2026-11-30"


def manifest_files() -> list[Path]:
    return sorted(K8S.glob("*.yaml")) + sorted((K8S / "examples").glob("*.yaml"))


def objects() -> list[tuple[str, dict]]:
    """(where, object) for every object of infra/k8s, and the RayJob templates its ConfigMaps carry."""
    found = []
    for path in manifest_files():
        for n, doc in enumerate(d for d in yaml.safe_load_all(path.read_text()) if d):
            where = f"{path.relative_to(ROOT)}#{n}"
            found.append((where, doc))
            if doc["kind"] == "ConfigMap":
                for key, text in doc["data"].items():
                    found.append((f"{where}:{key}", yaml.safe_load(text.replace("__DATE__", NIGHT))))
    return found


def as_the_api_server_checks(schema):
    """A CRD's structural schema as the API server applies it to what `kubectl apply` sends: unknown fields refused
    (the server prunes them, and kubectl's strict field validation, the default, refuses them; objects that keep
    unknown fields say so and stay open), and a required field with a default satisfied by the default (the server
    defaults before it validates)."""
    if isinstance(schema, dict):
        schema = {k: as_the_api_server_checks(v) for k, v in schema.items()}
        if ("properties" in schema and "additionalProperties" not in schema
                and not schema.get("x-kubernetes-preserve-unknown-fields")):
            schema["additionalProperties"] = False
        if "required" in schema:
            schema["required"] = [name for name in schema["required"]
                                  if "default" not in schema.get("properties", {}).get(name, {})]
        return schema
    if isinstance(schema, list):
        return [as_the_api_server_checks(v) for v in schema]
    return schema


def load_yaml(path: Path):
    return yaml.load(path.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))  # 1.4 MB CRDs


def crd_validators() -> dict[tuple[str, str], jsonschema.protocols.Validator]:
    validators: dict[tuple[str, str], jsonschema.protocols.Validator] = {}
    if not have_crds():
        return validators
    for name in ("ray.io_rayjobs.yaml", "ray.io_rayclusters.yaml"):
        crd = load_yaml(KUBERAY / name)
        group, kind = crd["spec"]["group"], crd["spec"]["names"]["kind"]
        for version in crd["spec"]["versions"]:
            if version["served"]:
                schema = as_the_api_server_checks(version["schema"]["openAPIV3Schema"])
                validators[(f"{group}/{version['name']}", kind)] = jsonschema.Draft202012Validator(schema)
    return validators


def core_validators() -> dict[tuple[str, str], jsonschema.protocols.Validator]:
    definitions = json.loads((KUBERNETES / "_definitions.json").read_text())
    registry = referencing.Registry().with_resource(definitions["$id"],
                                                    referencing.Resource.from_contents(definitions))
    return {key: jsonschema.Draft202012Validator(json.loads((KUBERNETES / name).read_text()), registry=registry)
            for key, name in CORE_SCHEMAS.items()}


@pytest.fixture(scope="module")
def validators():
    return {**crd_validators(), **core_validators()}


def errors(validators, doc: dict) -> list[str]:
    validator = validators.get((doc.get("apiVersion"), doc.get("kind")))
    if validator is None and doc.get("apiVersion", "").startswith("ray.io/") and not have_crds():
        pytest.skip(NO_CRDS)
    assert validator is not None, f"no schema here for {doc.get('apiVersion')} {doc.get('kind')}"
    return [f"/{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(doc)]


def test_the_crds_are_the_named_kuberay_release():
    assert KUBERAY_VERSION in (FIXTURES / "kuberay" / "README.md").read_text()
    if not have_crds():
        pytest.skip(NO_CRDS)
    for name, digest in CRD_SHA256.items():
        assert hashlib.sha256((KUBERAY / name).read_bytes()).hexdigest() == digest, name
        crd = load_yaml(KUBERAY / name)
        assert crd["kind"] == "CustomResourceDefinition" and crd["spec"]["group"] == "ray.io"


@pytest.mark.parametrize(("where", "doc"), objects(), ids=[w for w, _ in objects()])
def test_every_manifest_validates(validators, where: str, doc: dict):
    assert errors(validators, doc) == [], where


def test_the_kinds_checked_are_the_ones_used():
    kinds = {(doc["apiVersion"], doc["kind"]) for _, doc in objects()}
    assert {("ray.io/v1", "RayJob"), ("ray.io/v1", "RayCluster"), ("batch/v1", "CronJob"),
            ("v1", "Secret")} <= kinds
    assert kinds <= set(CORE_SCHEMAS) | {("ray.io/v1", "RayJob"), ("ray.io/v1", "RayCluster")}


def test_the_core_kinds_validation_refuses_what_a_cluster_would(validators):
    """A misspelt field in the CronJob is caught by Kubernetes' own schema (this needs no KubeRay CRDs)."""
    (cron,) = [doc for _, doc in objects() if doc["kind"] == "CronJob"]
    bad = copy.deepcopy(cron)
    bad["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["imagePullPolicy "] = "Always"
    assert errors(validators, bad)
    wrong = copy.deepcopy(cron)
    wrong["spec"]["jobTemplate"]["spec"]["ttlSecondsAfterFinished"] = "300"
    assert any("ttlSecondsAfterFinished" in e for e in errors(validators, wrong))


def test_the_validation_refuses_what_a_cluster_would(validators):
    """A misspelt field, a wrong type and a missing required field are each caught in the RayJob by its CRD."""
    (job,) = [doc for where, doc in objects() if where.startswith("infra/k8s/rayjob.yaml")]
    typo = copy.deepcopy(job)
    typo["spec"]["shutdownAfterJobFinish"] = typo["spec"].pop("shutdownAfterJobFinishes")
    assert any("shutdownAfterJobFinish" in e for e in errors(validators, typo))
    wrong = copy.deepcopy(job)
    wrong["spec"]["ttlSecondsAfterFinished"] = "300"
    assert any("ttlSecondsAfterFinished" in e for e in errors(validators, wrong))
    no_image = copy.deepcopy(job)
    del no_image["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]["containers"][0]["name"]
    assert any("'name' is a required property" in e for e in errors(validators, no_image))


def pods(doc) -> list[dict]:
    """Every pod spec under `doc` (RayJob, RayCluster, CronJob)."""
    found = []
    if isinstance(doc, dict):
        if "containers" in doc:
            found.append(doc)
        for value in doc.values():
            found += pods(value)
    elif isinstance(doc, list):
        for item in doc:
            found += pods(item)
    return found


def test_every_container_requests_what_it_is_limited_to():
    """Limits without requests crash KubeRay 1.1.0's operator; a request is also what the scheduler places by."""
    seen = 0
    for where, doc in objects():
        for pod in pods(doc):
            for container in pod["containers"] + pod.get("initContainers", []):
                resources = container.get("resources", {})
                assert resources.get("requests") and resources.get("limits"), f"{where}: {container['name']}"
                assert set(resources["requests"]) == set(resources["limits"]), f"{where}: {container['name']}"
                seen += 1
    assert seen >= 7


def test_finished_clusters_go_within_minutes():
    jobs = [(where, doc) for where, doc in objects() if doc["kind"] == "RayJob"]
    assert len(jobs) == 2
    for where, doc in jobs:
        assert doc["spec"]["shutdownAfterJobFinishes"] is True, where
        assert 0 < doc["spec"]["ttlSecondsAfterFinished"] <= 600, where


def test_images_are_pinned_and_say_where_they_come_from():
    project = re.search(r"-t (\S+) \.", (ROOT / "infra" / "Dockerfile").read_text()).group(1)
    for path in manifest_files():
        lines = path.read_text().splitlines()
        for n, line in enumerate(lines):
            match = re.match(r"\s*(?:- )?image: (\S+)", line)
            if not match or match.group(1) == project:
                continue
            image = match.group(1)
            assert re.fullmatch(r"[a-z0-9.-]+\.[a-z]+/[\w./-]+:v?\d+\.\d+\.\d+", image), f"{path.name}: {image}"
            assert lines[n - 1].strip().startswith("#"), f"{path.name}: say where {image} comes from"
    assert "bitnami/" not in "".join(p.read_text() for p in manifest_files())


def test_the_secret_the_pods_read_has_a_documented_example():
    refs = {ref["secretRef"]["name"] for _, doc in objects() for pod in pods(doc)
            for container in pod["containers"] for ref in container.get("envFrom", []) if "secretRef" in ref}
    assert refs == {"extract-aws"}
    examples = [doc for where, doc in objects() if where.startswith("infra/k8s/examples/") and doc["kind"] == "Secret"]
    assert [doc["metadata"]["name"] for doc in examples] == ["extract-aws"]
    assert {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"} <= set(examples[0]["stringData"])
    assert all(not p.name.startswith("secret") for p in K8S.glob("*.yaml"))  # `kubectl apply -f infra/k8s/` skips it
