"""The deployment files name what the project really has: the image tag built by infra/Dockerfile,
entrypoints our CLI accepts, and job configs that load; and the nightly run holds no GPU between nights."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import yaml

from pipeline.cli.main import parser
from pipeline.config import load_config
from tests.conftest import ROOT

INFRA = ROOT / "infra"


def built_image() -> str:
    match = re.search(r"docker build -f infra/Dockerfile -t (\S+) \.", (INFRA / "Dockerfile").read_text())
    assert match, "infra/Dockerfile does not say how it is built and tagged"
    return match.group(1)


NIGHT = "2026-11-30"


def manifests() -> list[tuple[Path, dict]]:
    """Every Kubernetes object of infra/k8s, and the nightly RayJob template (from its ConfigMap, for NIGHT)."""
    docs = []
    for path in sorted((INFRA / "k8s").glob("*.yaml")):
        docs += [(path, doc) for doc in yaml.safe_load_all(path.read_text()) if doc]
    templates = [(path, yaml.safe_load(text.replace("__DATE__", NIGHT))) for path, doc in docs
                 if doc["kind"] == "ConfigMap" for text in doc["data"].values()]
    return docs + templates


def nightly() -> tuple[dict, dict]:
    """The nightly CronJob and the RayJob it creates."""
    (cron,) = [doc for path, doc in manifests() if doc["kind"] == "CronJob" and path.name == "nightly-cronjob.yaml"]
    (job,) = [doc for path, doc in manifests() if doc["kind"] == "RayJob" and path.name == "nightly-cronjob.yaml"]
    return cron, job


def containers(node) -> list[dict]:
    found = []
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "containers":
                found += value
            else:
                found += containers(value)
    elif isinstance(node, list):
        for item in node:
            found += containers(item)
    return found


def check_extract_command(argv: list[str]) -> None:
    assert argv[0] == "extract", argv
    args = parser().parse_args(argv[1:])  # exits (fails the test) on anything our CLI does not take
    config = ROOT / args.config  # the image's WORKDIR is the repository root
    assert config.is_file(), f"{args.config} is not in the repository"
    load_config(config)  # and it is a valid job config whose schema imports


def test_dockerfile_copies_what_the_entrypoints_need():
    text = (INFRA / "Dockerfile").read_text()
    for folder in ("pipeline", "schemas", "workers", "jobs"):
        assert f"COPY {folder} ./{folder}" in text
    assert "pip install" in text and ".[gpu]" in text


def test_every_ray_pod_runs_the_project_image():
    kinds = {doc["kind"] for _, doc in manifests()}
    assert {"RayCluster", "RayJob", "CronJob"} <= kinds
    image = built_image()
    for path, doc in manifests():
        if doc["kind"] in ("RayCluster", "RayJob"):
            for container in containers(doc):
                assert container["image"] == image, f"{path.name}: {container['name']} runs {container['image']}"


def test_the_nightly_cronjob_creates_a_rayjob_per_night_that_takes_its_cluster_down():
    cron, job = nightly()
    assert job["spec"]["shutdownAfterJobFinishes"] is True  # the GPUs go with the job
    assert "clusterSelector" not in job["spec"]  # its own cluster, not a long-lived one
    assert job["metadata"]["name"] == f"extract-invoices-{NIGHT}"  # a doubled night is refused as AlreadyExists
    argv = shlex.split(job["spec"]["entrypoint"])
    assert argv[1] == "backfill" and argv[argv.index("--start") + 1] == argv[argv.index("--end") + 1] == NIGHT
    (launcher,) = containers(cron)
    script = launcher["command"][-1]
    assert "kubectl create" in script and "date -u -d yesterday" in script and "__DATE__" in script
    assert re.fullmatch(r"[\w./-]+:[\w.-]+", launcher["image"]) and not launcher["image"].endswith(":latest")
    assert cron["spec"]["concurrencyPolicy"] == "Forbid" and cron["spec"]["timeZone"] == "Etc/UTC"
    role = next(doc for _, doc in manifests() if doc["kind"] == "Role")
    assert role["rules"] == [{"apiGroups": ["ray.io"], "resources": ["rayjobs"], "verbs": ["create", "get"]}]


def test_the_long_lived_cluster_holds_no_idle_gpu():
    (cluster,) = [doc for _, doc in manifests() if doc["kind"] == "RayCluster"]
    assert cluster["spec"]["enableInTreeAutoscaling"] is True
    for group in cluster["spec"]["workerGroupSpecs"]:
        assert group["minReplicas"] == 0 == group["replicas"]


def test_entrypoints_are_commands_the_cli_accepts():
    docs = [doc for _, doc in manifests() if doc["kind"] == "RayJob"]
    assert len(docs) == 2  # rayjob.yaml and the nightly template
    for doc in docs:
        check_extract_command(shlex.split(doc["spec"]["entrypoint"]))


def test_ray_version_matches_the_installed_ray():
    import ray

    for _, doc in manifests():
        if doc["kind"] == "RayCluster":
            assert doc["spec"]["rayVersion"] == ray.__version__
        if doc["kind"] == "RayJob":
            assert doc["spec"]["rayClusterSpec"]["rayVersion"] == ray.__version__


def test_cron_line_runs_yesterdays_backfill():
    lines = [line for line in (INFRA / "cron" / "nightly.cron").read_text().splitlines()
             if line.strip() and not line.startswith("#") and "=" not in line.split()[0]]
    assert len(lines) == 1
    fields = lines[0].split(None, 5)
    assert len(fields) == 6 and all(re.fullmatch(r"[\d*/,-]+", f) for f in fields[:5])
    command = fields[5].split("&&", 1)[1].split(">>")[0]
    argv = shlex.split(command)
    argv[0] = Path(argv[0]).name
    check_extract_command(argv)
    assert argv[1:2] == ["backfill"] and "yesterday" in argv
