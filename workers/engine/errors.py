"""How an engine fails: at start (`EngineStartError`, one line) or for good (`EngineFatal`), and which
exceptions mean the engine is gone (`is_fatal`, by type: `workers.vllm_compat.fatal_types`)."""

from __future__ import annotations


class EngineStartError(RuntimeError):
    """The engine could not start. The message is one line: the cause and the key to change."""


class EngineFatal(RuntimeError):
    """The engine itself failed (its core or thread died, out of memory, a device error): no request in it can
    finish. Callers must not dead-letter their documents for it; the actor exits so that Ray restarts it and
    redoes its batches on a fresh engine."""


def is_fatal(exc: BaseException) -> bool:
    """Whether `exc` (or what caused it) means the engine is gone, as opposed to one request or one batch being
    refused. Decided by type, as Ray Data LLM does: ours (`EngineFatal`), vLLM's `EngineDeadError`, and
    running out of memory or losing the device (`MemoryError`, torch's `OutOfMemoryError`/`AcceleratorError`)."""
    from workers.vllm_compat import fatal_types

    fatal = (EngineFatal, *fatal_types())
    return any(isinstance(e, fatal) for e in (exc, exc.__cause__, exc.__context__) if e is not None)


def explain_start_failure(exc: BaseException) -> str:
    """One line for an engine that failed to start: the cause, and the key to change."""
    from workers.memory import KvBudgetError
    from workers.vllm_compat import VllmCompatError

    if isinstance(exc, EngineStartError | KvBudgetError | VllmCompatError):
        return str(exc)
    text = str(exc).strip()
    first = text.splitlines()[0] if text else type(exc).__name__
    if "memory" in text and ("kv cache" in text.lower() or "KV cache" in text):
        return (f"vLLM could not reserve the KV cache: {first} — set model.engine_kwargs.kv_cache_memory_bytes "
                "lower, or lower model.max_model_len")
    if isinstance(exc, TypeError) and "unexpected keyword argument" in text:
        return f"model.engine_kwargs: vLLM does not accept it: {first}"
    if is_fatal(exc):
        return f"the engine ran out of memory or lost its device while starting: {first}"
    return (f"{type(exc).__name__}: {first} (check model.path and model.engine_kwargs; run with -v for the "
            "engine's own log)")


def start_failure_in(exc: BaseException) -> str | None:
    """The one-line reason of an `EngineStartError` raised in an actor, found in what Ray hands the driver
    (an `ActorDiedError` or task error whose text holds the actor's traceback), or None."""
    marker = f"{EngineStartError.__name__}: "
    seen: set[int] = set()
    error: BaseException | None = exc
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        text = str(error)
        if isinstance(error, EngineStartError):
            return text
        at = text.rfind(marker)
        if at >= 0:
            return text[at + len(marker):].splitlines()[0].strip()
        error = error.__cause__ or error.__context__
    return None
