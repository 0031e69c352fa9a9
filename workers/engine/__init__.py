"""The engine adapter: one vLLM `LLM`, generating under a JSON Schema grammar (XGrammar backend).

The rest of the project talks to an engine through one contract, `contract.Engine` (an ABC every engine subclasses,
one per module: `VllmEngine`, `EngineThread`, `host.HostedEngine`, `workers.simulated.SimulatedEngine`). vLLM is
imported only under `workers/` (`tests/unit/test_architecture.py` checks it), and its internals only in
`workers.vllm_compat` (`tests/unit/test_vllm_door.py` checks it by module prefix).

- `contract`: `Engine`, what the extractor and the actor call on an engine;
- `errors`: how an engine fails (`EngineStartError`, `EngineFatal`, `is_fatal` by type);
- `args`: the `LLM(...)` arguments (our defaults, then the job's `engine_kwargs`);
- `cpu`: the patches for vLLM's CPU backend, applied before a CPU engine starts;
- `outputs`: `Generation`s from vLLM's outputs, and a request's structured-output parameters;
- `requests`: adding requests and collecting their streamed outputs, shared by both engines;
- `vllm_engine`: `VllmEngine`; `thread`: `EngineThread`, one engine on a thread of its own.
"""

from workers.engine.args import (
    PROMPT_LOOKUP,
    engine_arguments,
    has_accelerator,
    speculates,
    speculation_method,
    unknown_engine_kwargs,
)
from workers.engine.contract import Engine
from workers.engine.cpu import _cache_drafter_kernel, _guard_kernel_scan, _shield_kernel_rebind, cpu_patches
from workers.engine.errors import (
    EngineFatal,
    EngineStartError,
    explain_start_failure,
    is_fatal,
    start_failure_in,
)
from workers.engine.outputs import (
    ERROR_MESSAGE,
    REFUSED,
    Generation,
    Refused,
    generations,
    grammar_spec,
    longest_token_chars,
    structured_params,
)
from workers.engine.thread import EngineThread
from workers.engine.vllm_engine import VllmEngine

__all__ = [
    "ERROR_MESSAGE", "PROMPT_LOOKUP", "REFUSED", "Engine", "EngineFatal", "EngineStartError", "EngineThread",
    "Generation",
    "Refused", "VllmEngine", "_cache_drafter_kernel", "_guard_kernel_scan", "_shield_kernel_rebind", "cpu_patches",
    "engine_arguments", "explain_start_failure", "generations", "grammar_spec", "has_accelerator", "is_fatal",
    "longest_token_chars", "speculates", "speculation_method", "start_failure_in", "structured_params",
    "unknown_engine_kwargs",
]
