"""Name and version → Pydantic model. Models register themselves with `@register`."""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import TypeVar

from pydantic import BaseModel

M = TypeVar("M", bound=type[BaseModel])


class SchemaNotFoundError(LookupError):
    """No model is registered or importable under the given reference."""


_REGISTRY: dict[tuple[str, str], type[BaseModel]] = {}


def register(name: str, version: str) -> Callable[[M], M]:
    """Class decorator: record a model under (name, version) and stamp both on the class."""

    def decorate(model: M) -> M:
        key = (name, version)
        existing = _REGISTRY.get(key)
        if existing is not None and existing.__qualname__ != model.__qualname__:
            raise ValueError(f"schema {name}@{version} is already registered to {existing.__qualname__}")
        model.__schema_name__ = name  # type: ignore[attr-defined]
        model.__schema_version__ = version  # type: ignore[attr-defined]
        _REGISTRY[key] = model
        return model

    return decorate


def registered() -> dict[tuple[str, str], type[BaseModel]]:
    return dict(_REGISTRY)


def lookup(name: str, version: str) -> type[BaseModel]:
    try:
        return _REGISTRY[(name, version)]
    except KeyError:
        known = ", ".join(f"{n}@{v}" for n, v in sorted(_REGISTRY)) or "none"
        raise SchemaNotFoundError(f"no schema registered as {name}@{version} (registered: {known})") from None


def schema_name_version(model: type[BaseModel]) -> tuple[str, str]:
    """A registered model's (name, version); an unregistered one is named after its class, version '0'."""
    name = getattr(model, "__schema_name__", None) or model.__name__
    version = getattr(model, "__schema_version__", None) or "0"
    return name, version


def _where(exc: BaseException) -> str:
    """ ' (file, line N)' of the innermost frame of `exc`'s traceback, or ''."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    return f" ({tb.tb_frame.f_code.co_filename}, line {tb.tb_lineno})" if tb is not None else ""


def _from_job_folder(module_name: str, search_path: Path | None) -> ModuleType | None:
    """The module from the job's own folder, when that folder has it, imported under a private root package.

    A job folder may name its package anything, `schemas/` included: imported by its plain name it would
    meet our own `schemas` package, already loaded, and fail with "No module named 'schemas.receipt'". Under
    `_extract_job_<hash of the folder>` it cannot collide, and relative imports inside it work."""
    if search_path is None:
        return None
    base = Path(search_path).joinpath(*module_name.split("."))
    candidate = base.with_suffix(".py") if base.with_suffix(".py").is_file() else base / "__init__.py"
    if not candidate.is_file():
        return None
    try:  # the very file its plain name imports (a job beside our own schemas/): one module, one registration
        spec = importlib.util.find_spec(module_name)
    except (ImportError, ValueError):
        spec = None
    if spec is not None and spec.origin and Path(spec.origin).resolve() == candidate.resolve():
        return None
    folder = str(Path(search_path).resolve())
    root = f"_extract_job_{hashlib.sha256(folder.encode()).hexdigest()[:12]}"
    if root not in sys.modules:
        package = ModuleType(root)
        package.__path__ = [folder]
        sys.modules[root] = package
    return importlib.import_module(f"{root}.{module_name}")


def import_model(ref: str, search_path: Path | None = None) -> type[BaseModel]:
    """Resolve `package.module:Model`, with `search_path` first on sys.path (as a Ray working_dir would be)."""
    module_name, sep, attr = ref.partition(":")
    if not sep or not module_name or not attr:
        raise SchemaNotFoundError(f"schema {ref!r} is not of the form 'module:Model'")
    if search_path is not None and str(search_path) not in sys.path:
        sys.path.insert(0, str(search_path))
    try:
        module = _from_job_folder(module_name, search_path) or importlib.import_module(module_name)
    except ImportError as exc:
        raise SchemaNotFoundError(f"schema {ref!r}: cannot import module {module_name!r}: {exc}") from exc
    except SyntaxError as exc:
        raise SchemaNotFoundError(f"schema {ref!r}: module {module_name!r} has a syntax error: {exc.msg} "
                                  f"({exc.filename}, line {exc.lineno})") from exc
    except Exception as exc:  # the user's module raised while importing: one line, where and why
        raise SchemaNotFoundError(f"schema {ref!r}: importing module {module_name!r} raised "
                                  f"{type(exc).__name__}: {exc}{_where(exc)}") from exc
    obj = module
    for part in attr.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            raise SchemaNotFoundError(f"schema {ref!r}: module {module_name!r} has no attribute {attr!r}")
    if not (isinstance(obj, type) and issubclass(obj, BaseModel)):
        raise SchemaNotFoundError(f"schema {ref!r} is not a Pydantic model class")
    return obj
