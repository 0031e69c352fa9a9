#!/usr/bin/env bash
# Where torch's CPU build comes from. Prints the extra pip arguments that install TORCH_SPEC with PYTHON's pip:
# nothing when the indexes pip is configured with already have it (pip.conf / PIP_* mirrors, local wheel folders,
# or the build already installed), else `--extra-index-url` and PyTorch's own CPU wheel index. PyPI has no `+cpu`
# builds, so with a stock pip configuration the fallback is what finds it. TORCH_CPU_INDEX_URL overrides that
# index (a mirror of it, say). Only the configured indexes are asked here; the fallback is named, never probed.
#
#   infra/torch-index.sh PYTHON TORCH_SPEC      e.g.  infra/torch-index.sh .venv/bin/python torch==2.13.0+cpu
set -euo pipefail

PY=$1
SPEC=$2
DEFAULT_TORCH_CPU_INDEX_URL=https://download.pytorch.org/whl/cpu
INDEX=${TORCH_CPU_INDEX_URL:-$DEFAULT_TORCH_CPU_INDEX_URL}

# A dry run resolves the one requirement against the configured indexes and installs nothing; with --no-deps it
# asks for torch alone. "No matching distribution" is its answer when they lack the build.
if "$PY" -m pip --disable-pip-version-check install --dry-run --no-deps --quiet "$SPEC" >/dev/null 2>&1; then
  echo "setup: $SPEC from the configured package indexes" >&2
else
  echo "setup: $SPEC is not on the configured package indexes; adding PyTorch's CPU wheel index $INDEX" \
       "(TORCH_CPU_INDEX_URL overrides it)" >&2
  printf '%s\n' --extra-index-url "$INDEX"
fi
