"""`EngineThread`: one vLLM engine driven by one thread of its own, shared by callers on other threads."""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import structlog

from workers.engine.contract import NO_BOUNDS, Engine, GrammarBounds
from workers.engine.errors import EngineFatal, EngineStartError, explain_start_failure
from workers.engine.outputs import Generation, Refused, generations
from workers.engine.requests import Deltas, IdleSteps, add_requests
from workers.engine.vllm_engine import Sampling, VllmEngine

# How often a caller waiting on its outputs looks whether the engine core (a child process, with V1
# multiprocessing) has died: vLLM leaves `step()` waiting forever then, so the caller is what notices. The look
# is a flag read; at 5 s, a crashed core cost its run 5 s before the actor exited to be restarted.
DEATH_CHECK_S = 1.0

log = structlog.get_logger("workers.engine")


class _Job:
    """One caller's prompts in the engine thread: filled in as its requests finish."""

    def __init__(self, prompts: list[list[int]], params: list[Any]) -> None:
        self.prompts = prompts
        self.params = params
        self.outputs: list[Any] = [None] * len(prompts)
        self.left = len(prompts)
        self.done = threading.Event()
        self.error: BaseException | None = None

    def fail(self, error: BaseException) -> None:
        self.error = error
        self.done.set()


class _OneAtATime:
    """A tokenizer whose `encode` takes the engine thread's tokenizing lock (see `EngineThread._tokenizing`)."""

    def __init__(self, tokenizer: Any, lock: Any) -> None:
        self._tokenizer, self._lock = tokenizer, lock

    def encode(self, text: str, **kwargs: Any) -> list[int]:
        with self._lock:
            return list(self._tokenizer.encode(text, **kwargs))


class EngineThread(Engine):
    """One vLLM engine driven by one thread of its own, shared by callers on other threads.

    Each caller's `generate` adds its requests to the running engine and waits for its own outputs. The
    thread keeps stepping while any request is unfinished, so a batch that arrives joins the sequences
    already decoding (continuous batching across Ray Data batches) instead of waiting for the engine to
    drain; with several batches in flight per actor the engine's queue never empties between them.

    Everything that touches the engine, its construction included, runs on this one thread. vLLM's CPU
    backend binds its OpenMP threads to cores from the thread that built the engine: Ray Data calls an
    actor's UDF on a thread of its own, and there the same 30 documents took 21.9 s instead of 17.0 s.
    """

    def __init__(self, **llm_args: Any) -> None:
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._ready = threading.Event()
        self._startup_error: BaseException | None = None
        self._failure: str | None = None  # why the engine thread stopped, once it has
        self._engine: VllmEngine | None = None
        # One caller tokenizes at a time. vLLM's tokenizer is a pool of deep copies: a call that finds every copy
        # borrowed makes one more and keeps it (0.1 s of CPU for the bundled model's), so an actor's four batches
        # tokenizing at once made three copies while its first batches waited. A prompt takes about a millisecond.
        self._tokenizing = threading.Lock()
        self.on_request_done: Callable[[Any], None] | None = None  # called on the engine thread per finished request
        self.on_tokens: Callable[[int], None] | None = None  # called on the engine thread per step: tokens it made
        self._thread = threading.Thread(target=self._run, args=(llm_args,), name="vllm-engine", daemon=True)
        self._thread.start()
        self._ready.wait()
        if self._startup_error is not None:
            raise EngineStartError(explain_start_failure(self._startup_error)) from self._startup_error
        assert self._engine is not None
        self.init_seconds = self._engine.init_seconds
        self.max_model_len = self._engine.max_model_len
        self.max_chars_per_token = self._engine.max_chars_per_token

    # -- the caller's side ---------------------------------------------------------------------------

    @property
    def tokenizer(self) -> Any:
        """The engine's tokenizer, one caller at a time (the document's script density, `Engine.tokenizer`)."""
        assert self._engine is not None
        return _OneAtATime(self._engine.tokenizer, self._tokenizing)

    def prompt_token_ids(self, prompt: Any) -> list[int]:
        assert self._engine is not None
        with self._tokenizing:
            return self._engine.prompt_token_ids(prompt)

    def document_counter(self, render: Any) -> Any:
        """The engine's counter, one caller at a time (as `prompt_token_ids`)."""
        assert self._engine is not None
        with self._tokenizing:
            count = self._engine.document_counter(render)
        if count is None:
            return None
        if hasattr(count, "locked"):  # workers.document_tokens.DocumentCounter: its document's tokens too
            return count.locked(self._tokenizing)

        def one_at_a_time(document: str) -> int:
            with self._tokenizing:
                return count(document)

        return one_at_a_time

    def use_sampling(self, options: Mapping[str, Any], grammar_bounds: GrammarBounds = NO_BOUNDS) -> None:
        """The run's sampling, kept by the engine that builds each request's `SamplingParams`."""
        assert self._engine is not None
        self._engine.use_sampling(options, grammar_bounds)

    def warm(self, json_schema: dict[str, Any], using: Sampling | None = None) -> float:
        """Compile `json_schema`'s grammar with a one-token request; returns the seconds it took."""
        started = time.perf_counter()
        self.generate([self.prompt_token_ids("{}")], json_schema, 1, 0.0, using=using)
        return time.perf_counter() - started

    def compile(self, json_schema: dict[str, Any]) -> float | None:
        """As `VllmEngine.compile`, on the calling thread: the engine thread keeps decoding meanwhile."""
        assert self._engine is not None
        return self._engine.compile(json_schema)

    def generate(self, prompts: list[list[int]], json_schema: dict[str, Any] | None | Sequence[dict[str, Any] | None],
                 max_tokens: int, temperature: float, seeds: Sequence[int | None] | None = None,
                 using: Sampling | None = None) -> list[Generation]:
        """As `VllmEngine.generate`; safe to call from several threads at once. A request the engine refuses
        comes back as a `Generation` with finish_reason "refused"; the others in the call go on. `using`: this
        call's sampling and grammar bounds instead of `use_sampling`'s (a shared host's callers each have theirs)."""
        if not prompts:
            return []
        assert self._engine is not None
        if not self._thread.is_alive():
            raise EngineFatal(f"the engine thread has stopped: {self._failure or 'closed'}")
        job = _Job(prompts, self._engine.sampling_for(len(prompts), json_schema, max_tokens, temperature, seeds, using))
        self._jobs.put(job)
        while not job.done.wait(DEATH_CHECK_S):
            self._engine.wake_if_core_died()
            if not self._thread.is_alive() and not job.done.is_set():  # closed or crashed after we looked
                raise EngineFatal(f"the engine thread has stopped: {self._failure or 'closed'}")
        if job.error is not None:
            raise job.error
        return generations(prompts, job.outputs)

    def reset_prefix_cache(self) -> None:
        """Forget cached prompt prefixes. Only while no request runs (the caller makes sure of it): a shared host
        (`workers.engine.host`) does it as a run attaches, so that its outputs are those of a fresh engine."""
        assert self._engine is not None
        self._engine.reset_prefix_cache()

    def close(self) -> None:
        if self._thread.is_alive():
            self._jobs.put(None)
            self._thread.join(timeout=60)

    # -- the engine thread ---------------------------------------------------------------------------

    def _run(self, llm_args: dict[str, Any]) -> None:
        try:
            self._engine = VllmEngine(**llm_args)
        except BaseException as exc:  # noqa: BLE001 - handed to the constructor's caller
            self._startup_error = exc
            return
        finally:
            self._ready.set()
        owner: dict[str, tuple[_Job, int]] = {}  # request id → its job, its position
        try:
            self._serve(self._engine.llm.llm_engine, owner)
        except BaseException as exc:  # noqa: BLE001 - a bug here must not leave callers waiting forever
            self._failure = f"{type(exc).__name__}: {exc}"
            log.error("engine.thread_failed", error=repr(exc), requests=len(owner))
            fatal = exc if isinstance(exc, EngineFatal) else EngineFatal(self._failure)
            self._abort_all(owner, fatal)

    def _serve(self, engine: Any, owner: dict[str, tuple[_Job, int]]) -> None:
        """Step while any request is unfinished; between steps, add whatever callers sent (wait when idle). After
        a step that did no model work (`IdleSteps`) the wait before the next is spent waiting for a caller's job."""
        deltas, idle = Deltas(), IdleSteps()
        while True:
            if not self._take_jobs(engine, owner, idle.wait):
                return
            if not owner:
                continue
            tokens, finished = deltas.collect(idle.step(engine))
            self._tokens_made(tokens)
            for output in finished:
                entry = owner.pop(output.request_id, None)
                if entry is None:
                    continue
                job, index = entry
                job.outputs[index] = output
                job.left -= 1
                if job.left == 0:
                    job.done.set()
                self._request_done(output)

    def _take_jobs(self, engine: Any, owner: dict[str, tuple[_Job, int]], idle_wait: float = 0.0) -> bool:
        """Add the jobs that arrived (waiting for one when nothing runs, or up to `idle_wait` s when the last step
        did nothing); False once the engine is closed."""
        while True:
            try:
                if not owner:
                    job = self._jobs.get()
                elif idle_wait > 0:
                    job = self._jobs.get(timeout=idle_wait)
                else:
                    job = self._jobs.get_nowait()
            except queue.Empty:
                return True
            idle_wait = 0.0  # a job came: take the others without waiting
            if job is None:
                self._abort_all(owner, RuntimeError("the engine was closed"))
                assert self._engine is not None
                self._engine.close()
                return False
            try:
                self._add(engine, job, owner)
            except EngineFatal as exc:
                job.fail(exc)
                raise

    def _tokens_made(self, tokens: int) -> None:
        """The optional per-step hook (the live display): the tokens this step made, counted from the streamed
        outputs, so they show before any request finishes."""
        hook = self.on_tokens
        if hook is not None and tokens:
            try:
                hook(tokens)
            except Exception:  # noqa: BLE001 - the display is best effort; serving must go on
                pass

    def _request_done(self, output: Any) -> None:
        """The optional per-request hook (the actor's live counts): it only adds to counters under a lock."""
        hook = self.on_request_done
        if hook is not None:
            try:
                hook(output)
            except Exception:  # noqa: BLE001 - the display is best effort; serving must go on
                pass

    def _add(self, engine: Any, job: _Job, owner: dict[str, tuple[_Job, int]]) -> None:
        def refuse(index: int, refused: Refused) -> None:
            job.outputs[index] = refused
            job.left -= 1

        for request_id, index in add_requests(engine, job.prompts, job.params, refuse).items():
            owner[request_id] = (job, index)
        if job.left == 0:  # every request was refused
            job.done.set()

    def _abort_all(self, owner: dict[str, tuple[_Job, int]], error: BaseException) -> None:
        for job in {id(j): j for j, _ in owner.values()}.values():
            job.fail(error)
        owner.clear()
