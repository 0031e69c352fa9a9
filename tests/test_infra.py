"""The deployment files name what the project really has: the image tag built by infra/Dockerfile,
entrypoints our CLI accepts, and job configs that load."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
import yaml

from pipeline.cli import parser
from pipeline.config import load_config
from tests.conftest import ROOT

INFRA = ROOT / "infra"


def built_image() -> str:
    match = re.search(r"docker build -f infra/Dockerfile -t (\S+) \.", (INFRA / "Dockerfile").read_text())
    assert match, "infra/Dockerfile does not say how it is built and tagged"
    return match.group(1)


def manifests() -> list[tuple[Path, dict]]:
    docs = []
    for path in sorted((INFRA / "k8s").glob("*.yaml")):
        docs += [(path, doc) for doc in yaml.safe_load_all(path.read_text()) if doc]
    return docs


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


def test_every_manifest_runs_the_project_image():
    kinds = {doc["kind"] for _, doc in manifests()}
    assert {"RayCluster", "RayJob", "CronJob"} <= kinds
    image = built_image()
    for path, doc in manifests():
        for container in containers(doc):
            assert container["image"] == image, f"{path.name}: {container['name']} runs {container['image']}"


@pytest.mark.parametrize("kind", ["RayJob", "CronJob"])
def test_entrypoints_are_commands_the_cli_accepts(kind):
    docs = [doc for _, doc in manifests() if doc["kind"] == kind]
    assert docs
    for doc in docs:
        if kind == "RayJob":
            check_extract_command(shlex.split(doc["spec"]["entrypoint"]))
        else:
            for container in containers(doc):
                check_extract_command(container["command"] + container.get("args", []))


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
