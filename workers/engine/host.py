"""Engine hosts: an engine that outlives the runs that use it (`EXTRACT_ENGINE_HOST=shared`).

By default each extraction actor starts its own engine: torch and vLLM imported, the model loaded, the schema
compiled. On a CPU machine that is some 25 s of every run, however few its documents. With
`EXTRACT_ENGINE_HOST=shared`, the actor instead attaches to an `EngineHost`: a named, detached Ray actor on the
actor's own node that holds one `EngineThread`. The next run with the same engine (the same `LLM(...)` arguments and
engine environment, on the same node; its sampling travels with each call) attaches to the same host, its model
loaded and its grammars compiled. It is what a user's many small runs want (a nightly backfill of small partitions, a
notebook's runs, a test suite), and what a long run does not need: one engine start is nothing beside hours.

- **Key.** The host's name is a digest of everything the engine is started with (`LLM(...)`'s arguments and the
  engine's environment) and of its node; a run that differs in any of it gets a host of its own. Sampling and the
  grammar-only bounds are not part of it: each call carries its run's own (`model.sampling`, `_confidence`'s
  log-probabilities, `schema_policy`'s bounds are per request in vLLM), so runs that differ only there share one.
- **Lifetime.** A host exits after `EXTRACT_ENGINE_HOST_IDLE_S` seconds (default 600) without a request, or when
  its engine fails for good (`EngineFatal`), so that the next run starts a fresh one. It dies with the cluster.
- **Failures.** A host whose engine fails to start answers the attaching actor with the one-line reason, which
  the actor raises as `EngineStartError`, as an engine of its own would. A host that dies mid-call had not
  answered, so the actor attaches to a new one and sends the call again; a second death, or an engine that fails
  inside its host, is `EngineFatal` in the actor, which then exits so that Ray restarts it and redoes its batches.
- **Tokens.** The actor tokenizes its own prompts with the model's tokenizer (one call per document would cross
  to the host otherwise); the live display counts each request's tokens when its call returns.
- **Not on an accelerator yet.** The host would have to hold the device that the actor pool now reserves: a
  run on a GPU node keeps an engine of its own (with a warning).
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import structlog

from workers.engine.contract import NO_BOUNDS, Engine, GrammarBounds
from workers.engine.errors import EngineFatal, EngineStartError, is_fatal
from workers.engine.imports import model_tokenizer
from workers.engine.outputs import Generation, tell_hooks

if TYPE_CHECKING:  # no vLLM import in an actor that attaches
    from workers.engine.vllm_engine import Sampling

log = structlog.get_logger("workers.engine")

NAMESPACE = "extract-engines"
MODE_ENV, IDLE_ENV = "EXTRACT_ENGINE_HOST", "EXTRACT_ENGINE_HOST_IDLE_S"
IDLE_SECONDS = 600.0
CONNECT_TRIES = 10
# The environment an engine reads at its start: part of the key, and passed on to the host's process.
ENGINE_ENV_PREFIXES = ("VLLM_", "EXTRACT_MASK_KERNEL", "EXTRACT_PENALTY_KERNEL", "MALLOC_", "OMP_", "TOKENIZERS_",
                       "XGRAMMAR_", "HF_")


def shared_mode() -> bool:
    """Whether this process's runs attach to shared engine hosts (`EXTRACT_ENGINE_HOST=shared`); `own` (the
    default) starts an engine in each actor."""
    mode = os.environ.get(MODE_ENV, "own").strip().lower() or "own"
    if mode not in ("own", "shared"):
        raise EngineStartError(f"{MODE_ENV}={mode!r}: use 'own' (an engine per actor) or 'shared'")
    return mode == "shared"


def engine_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k.startswith(ENGINE_ENV_PREFIXES)}


def host_name(llm_args: dict[str, Any], env: dict[str, str], node: str | None) -> str:
    """The host's actor name: a digest of what its engine is started with, and of its node."""
    text = json.dumps({"args": llm_args, "env": env, "node": node}, sort_keys=True, default=str)
    return "engine-" + hashlib.sha256(text.encode()).hexdigest()[:20]


class EngineHost:
    """The Ray actor that holds one `EngineThread` for every run that attaches to it (a threaded actor: each
    caller's `generate` waits on a thread of its own while the engine thread serves them all)."""

    def __init__(self, llm_args: dict[str, Any], idle_s: float) -> None:
        from workers import logs
        from workers.engine.thread import EngineThread
        from workers.memory import keep_trimmed, release_free_memory

        logs.configure()
        self.error: str | None = None
        self.engine: Any = None
        self.in_flight = 0
        self.last_used = time.monotonic()
        self.lock = threading.Lock()
        started = time.perf_counter()
        try:
            self.engine = EngineThread(**llm_args)
        except EngineStartError as exc:
            self.error = str(exc)  # answered to the actor that attaches (`info`), which raises it
        self.init_seconds = time.perf_counter() - started
        release_free_memory()
        keep_trimmed()
        threading.Thread(target=self._exit_when_idle, args=(idle_s,), name="engine-host-idle", daemon=True).start()

    def info(self) -> dict[str, Any]:
        """What an attaching actor needs of the engine. With no run in flight, the prefix cache is emptied first, so
        a run does not start from the last run's cached prompts. (A warm host's rows can still differ from a fresh
        engine's in a field or two: measured, cause not found; docs/operations.md.)"""
        engine = self.engine
        with self.lock:
            self.last_used = time.monotonic()
            if engine is not None and self.in_flight == 0:
                engine.reset_prefix_cache()
        return {"error": self.error, "pid": os.getpid(), "init_seconds": self.init_seconds,
                "in_flight": self.in_flight,
                "max_model_len": engine.max_model_len if engine is not None else None,
                "max_chars_per_token": engine.max_chars_per_token if engine is not None else None}

    def compile(self, json_schema: dict[str, Any]) -> float | None:
        return self._call(lambda: self.engine.compile(json_schema))

    def warm(self, json_schema: dict[str, Any], using: Sampling) -> float:
        return self._call(lambda: self.engine.warm(json_schema, using))

    def generate(self, prompts: list[list[int]], json_schema: Any, max_tokens: int, temperature: float,
                 seeds: Sequence[int | None] | None, using: Sampling) -> list[Generation]:
        """The caller's requests under its own sampling and grammar bounds (`using`)."""
        return self._call(lambda: self.engine.generate(prompts, json_schema, max_tokens, temperature, seeds, using))

    def _call(self, call: Any) -> Any:
        if self.engine is None:
            raise EngineFatal(f"the engine host has no engine: {self.error}")
        with self.lock:
            self.in_flight += 1
            self.last_used = time.monotonic()
        try:
            return call()
        except BaseException as exc:
            if is_fatal(exc):
                self._exit_soon("its engine failed")  # the next run must find a fresh host under this name
            raise
        finally:
            with self.lock:
                self.in_flight -= 1
                self.last_used = time.monotonic()

    def _exit_when_idle(self, idle_s: float) -> None:
        while True:
            time.sleep(min(5.0, max(idle_s / 4, 0.1)))
            with self.lock:
                idle = self.in_flight == 0 and time.monotonic() - self.last_used >= idle_s
            if idle or (self.engine is None and time.monotonic() - self.last_used >= 5.0):
                self._exit_soon(f"idle for {idle_s:g} s" if idle else "its engine did not start", delay=0.0)
                return

    def _exit_soon(self, why: str, delay: float = 0.5) -> None:
        def leave() -> None:
            time.sleep(delay)  # the failing call's answer goes out first
            log.info("engine_host.exit", pid=os.getpid(), why=why)
            try:
                if self.engine is not None:
                    self.engine.close()
            finally:
                os._exit(0)

        threading.Thread(target=leave, name="engine-host-exit", daemon=True).start()


class HostedEngine(Engine):
    """The engine contract in an extraction actor, served by the shared `EngineHost` of its engine. Its `tokenizer`
    is the model's, loaded here: it counts prompts (`prompt_token_ids`) and the document's script density."""

    def __init__(self, llm_args: dict[str, Any], sampling: dict[str, Any], bounds: Any) -> None:
        import ray

        started = time.perf_counter()
        node = ray.get_runtime_context().get_node_id()
        env = engine_env()
        self.name = host_name(llm_args, env, node)
        self.using: Sampling = (dict(sampling), tuple(bounds))  # sent with each call: the host has no run's own
        self.on_request_done: Any = None
        self.on_tokens: Any = None
        self.tokenizer = model_tokenizer(llm_args["model"])
        self._start = (llm_args, env, node)
        info = self._connect()
        self.max_model_len = int(info["max_model_len"])
        self.max_chars_per_token = info["max_chars_per_token"]
        self.init_seconds = time.perf_counter() - started  # what this actor waited for: the host's start, or nothing
        log.info("engine_host.attached", host=self.name, host_pid=info["pid"],
                 seconds=round(self.init_seconds, 2), host_init_s=round(info["init_seconds"], 2))

    def prompt_token_ids(self, prompt: Any) -> list[int]:
        from workers.engine.vllm_engine import chat_token_ids  # no vLLM import: only the chat template

        return chat_token_ids(self.tokenizer, prompt)

    def document_counter(self, render: Any) -> Any:
        from workers.chat_tokens import document_counter

        return document_counter(self.tokenizer, render)

    def use_sampling(self, options: Any, grammar_bounds: GrammarBounds = NO_BOUNDS) -> None:
        """This run's sampling and grammar bounds, sent with each of its calls to the host."""
        self.using = (dict(options), tuple(grammar_bounds))

    def warm(self, json_schema: dict[str, Any]) -> float:
        return self._call("warm", json_schema, self.using)

    def compile(self, json_schema: dict[str, Any]) -> float | None:
        return self._call("compile", json_schema)

    def generate(self, prompts: list[list[int]], json_schema: Any, max_tokens: int, temperature: float,
                 seeds: Sequence[int | None] | None = None) -> list[Generation]:
        if not prompts:
            return []
        generations = self._call("generate", prompts, json_schema, max_tokens, temperature, seeds, self.using)
        for generation in generations:
            tell_hooks(self, generation)
        return generations

    def close(self) -> None:
        """The host outlives this actor: nothing to close."""

    def _connect(self) -> dict[str, Any]:
        """Attach to the host, starting it if there is none, and ask for its engine's facts. A host that has just
        died may hold its name a moment longer: a few tries, a second apart."""
        import ray
        from ray.exceptions import RayActorError

        for _ in range(CONNECT_TRIES):
            self.host = _attach(self.name, *self._start)
            try:
                info = ray.get(self.host.info.remote())
            except RayActorError:
                time.sleep(1.0)
                continue
            if info["error"]:
                ray.kill(self.host)  # a later run may have what this one lacked (memory, a fixed path)
                raise EngineStartError(info["error"])
            return info
        raise EngineFatal(f"the shared engine's host {self.name} could not be reached or started")

    def _call(self, method: str, *args: Any) -> Any:
        """`method(*args)` on the host. A host that died meanwhile (killed, its node's memory) had not answered,
        so nothing of the call was kept: it is sent once more to a new host. A second death is `EngineFatal`."""
        try:
            return self._ask(getattr(self.host, method).remote(*args))
        except HostDied as exc:
            log.warning("engine_host.lost", host=self.name, error=str(exc), action="a new host, the call again")
            self._connect()
            return self._ask(getattr(self.host, method).remote(*args))

    def _ask(self, ref: Any) -> Any:
        import ray
        from ray.exceptions import RayActorError, RayTaskError

        try:
            return ray.get(ref)
        except RayTaskError as exc:
            cause = getattr(exc, "cause", None)
            if cause is None:
                raise
            if is_fatal(cause):
                raise EngineFatal(f"the shared engine failed: {type(cause).__name__}: {cause}") from exc
            raise cause from exc
        except RayActorError as exc:
            raise HostDied(f"the shared engine's host {self.name} died: {type(exc).__name__}") from exc


class HostDied(EngineFatal):
    """The host's process is gone (as opposed to its engine failing inside it)."""


def _attach(name: str, llm_args: dict[str, Any], env: dict[str, str], node: str | None) -> Any:
    """The host named `name`, started on this node if there is none (another actor may start it at the same time:
    `get_if_exists` gives both the same one)."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    idle_s = float(os.environ.get(IDLE_ENV) or IDLE_SECONDS)
    remote = ray.remote(EngineHost).options(
        name=name, namespace=NAMESPACE, lifetime="detached", get_if_exists=True, num_cpus=0, max_restarts=0,
        max_concurrency=256, runtime_env={"env_vars": env},
        scheduling_strategy=NodeAffinitySchedulingStrategy(node, soft=False) if node else "DEFAULT")
    return remote.remote(llm_args, idle_s)
