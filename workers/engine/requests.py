"""Requests into a vLLM `LLMEngine` and their outputs back: the one way both engines (`VllmEngine` and
`EngineThread`) drive vLLM, so both refuse the same way and count tokens the same way.

- A request the engine will not add (a schema feature its grammar backend refuses) is refused alone: its
  output is a `Refused`, and the others go on. An add that fails because the engine is gone raises
  `EngineFatal`.
- Requests stream their tokens (`RequestOutputKind.DELTA`): each `step()` returns what every request made
  in it, so the tokens are counted from the first step, not when a request finishes; the deltas of a request
  are merged into one `RequestOutput` as it finishes.
"""

from __future__ import annotations

import contextlib
import itertools
import time
from collections.abc import Callable, Iterable
from typing import Any

from workers.engine.errors import EngineFatal, is_fatal
from workers.engine.outputs import Refused

_ids = itertools.count()


def add_requests(engine: Any, prompts: list[list[int]], params: list[Any],
                 on_refused: Callable[[int, Refused], None]) -> dict[str, int]:
    """Add one request per prompt to `engine` (a vLLM `LLMEngine`); returns request id → prompt index of those
    it took. Each refused one is handed to `on_refused(index, Refused)`."""
    from vllm.inputs import TokensPrompt
    from vllm.sampling_params import RequestOutputKind

    added: dict[str, int] = {}
    for index, (ids, request_params) in enumerate(zip(prompts, params, strict=True)):
        request_params.output_kind = RequestOutputKind.DELTA
        request_id = f"x{next(_ids)}"
        try:
            engine.add_request(request_id, TokensPrompt(prompt_token_ids=ids), request_params)
        except Exception as exc:  # e.g. a grammar the backend refuses: this request only
            if is_fatal(exc):
                raise EngineFatal(f"the engine failed to take a request: {type(exc).__name__}: {exc}") from exc
            on_refused(index, Refused(f"{type(exc).__name__}: {exc}"))
            continue
        added[request_id] = index
    return added


def step(engine: Any) -> list[Any]:
    """One engine step's outputs. A step that raises leaves the engine in no known state: per-request failures
    come back as finish_reason "error", so a raise means the engine itself broke (its core died, memory ran
    out), and it is `EngineFatal`."""
    try:
        return engine.step()
    except Exception as exc:
        raise EngineFatal(f"the engine failed a step: {type(exc).__name__}: {exc}") from exc


# A step that returns no output within IDLE_STEP_S did no model work: its requests wait for their grammars, which
# vLLM compiles on threads of its own (a schema's first compile takes seconds). Stepping again at once spins the
# stepping thread through vLLM's scheduler a few thousand times a second, on the cores the compile needs (the
# sample's schema compiled 30% slower beside a spinning Python thread: docs/performance.md). So the loops that
# step (`EngineThread._serve`, `run_to_completion`) wait before the next step: IDLE_WAIT_MIN_S at first, doubling
# up to IDLE_WAIT_MAX_S while the steps stay idle; a step that makes tokens or takes time ends the waiting.
IDLE_STEP_S = 0.002
IDLE_WAIT_MIN_S = 0.001
IDLE_WAIT_MAX_S = 0.008


class IdleSteps:
    """`step(engine)` that also keeps `wait`: the seconds to wait before the next step (0 after a busy step)."""

    def __init__(self) -> None:
        self.wait = 0.0

    def step(self, engine: Any) -> list[Any]:
        started = time.perf_counter()
        outputs = step(engine)
        if outputs or time.perf_counter() - started > IDLE_STEP_S:
            self.wait = 0.0
        else:
            self.wait = min(max(2 * self.wait, IDLE_WAIT_MIN_S), IDLE_WAIT_MAX_S)
        return outputs


class Deltas:
    """The streamed outputs of requests in flight, merged per request until each finishes."""

    def __init__(self) -> None:
        self._partial: dict[str, Any] = {}

    def collect(self, outputs: Iterable[Any]) -> tuple[int, list[Any]]:
        """(tokens the step made, the requests it finished, each as one merged `RequestOutput`)."""
        tokens = 0
        finished = []
        for output in outputs:
            tokens += sum(len(c.token_ids) for c in output.outputs)
            merged = self._partial.get(output.request_id)
            if merged is None:
                merged = output
            else:
                merged.add(output, aggregate=True)
            if output.finished:
                self._partial.pop(output.request_id, None)
                finished.append(merged)
            else:
                self._partial[output.request_id] = merged
        return tokens, finished

    def forget(self, request_ids: Iterable[str]) -> None:
        for request_id in request_ids:
            self._partial.pop(request_id, None)


def run_to_completion(engine: Any, prompts: list[list[int]], params: list[Any]) -> list[Any]:
    """Run `prompts` to completion on an engine nobody else is stepping; outputs in prompt order (a `Refused`
    for each request the engine would not take)."""
    outputs: list[Any] = [None] * len(prompts)

    def refuse(index: int, refused: Refused) -> None:
        outputs[index] = refused

    pending = add_requests(engine, prompts, params, refuse)
    deltas, idle = Deltas(), IdleSteps()
    try:
        while pending:
            if idle.wait:
                time.sleep(idle.wait)
            for output in deltas.collect(idle.step(engine))[1]:
                index = pending.pop(output.request_id, None)
                if index is not None:
                    outputs[index] = output
    finally:
        if pending:  # a step failed: nothing is left running in the engine for a later call to meet
            with contextlib.suppress(Exception):  # a dead engine cannot abort, and has nothing running
                engine.abort_request(list(pending))
    return outputs
