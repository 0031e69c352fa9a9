"""The loops that step vLLM, between steps (`IdleSteps`): after a step that did no model work (its requests wait for
their grammars) `EngineThread._serve` waits for a caller's job, and `run_to_completion` sleeps, a little longer
each time, instead of stepping again at once; a step that makes tokens, or takes time, ends the waiting. No vLLM:
a stand-in engine and a recording job queue."""

from __future__ import annotations

import queue
import time
from types import SimpleNamespace

import pytest

from workers.engine import requests
from workers.engine.requests import IDLE_STEP_S, IDLE_WAIT_MAX_S, IDLE_WAIT_MIN_S, run_to_completion
from workers.engine.thread import EngineThread


def _thread(waits: list[float], rounds: int) -> EngineThread:
    """An EngineThread without an engine, whose `_take_jobs` records the wait it is given and ends the loop after
    `rounds` calls."""
    thread = EngineThread.__new__(EngineThread)
    thread.on_tokens = None
    thread.on_request_done = None

    def take(engine, owner, idle_wait=0.0):
        waits.append(idle_wait)
        return len(waits) < rounds

    thread._take_jobs = take
    return thread


class _Clock:
    """`workers.engine.requests`' `time` in these tests: its clock moves only when the stand-in engine takes time
    (or the loop sleeps), so a busy machine pausing the test between two looks is not a step that "took time"
    (IDLE_STEP_S is 2 ms: any pause of the process was one)."""

    def __init__(self) -> None:
        self.now = 0.0

    def perf_counter(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture(autouse=True)
def clock(monkeypatch) -> _Clock:
    fake = _Clock()
    monkeypatch.setattr(requests, "time", fake)
    return fake


class _Engine:
    """Steps as scripted: "empty" returns nothing at once, "slow" returns nothing after IDLE_STEP_S (a prefill
    chunk), "tokens" returns one streamed token of a request that is not finished, "done" its last token."""

    def __init__(self, script: list[str]) -> None:
        self.script = list(script)

    def step(self):
        kind = self.script.pop(0) if self.script else "empty"
        if kind == "slow":
            requests.time.sleep(IDLE_STEP_S * 2)  # the test's clock (`clock`)
            return []
        if kind in ("tokens", "done"):
            return [_Output(finished=kind == "done")]
        return []


class _Output(SimpleNamespace):
    """A streamed `RequestOutput` of request "x": one token."""

    def __init__(self, finished: bool) -> None:
        super().__init__(request_id="x", outputs=[SimpleNamespace(token_ids=[7])], finished=finished)

    def add(self, other: _Output, aggregate: bool) -> None:
        self.finished = other.finished


def test_steps_that_do_nothing_wait_for_a_job_longer_each_time_up_to_the_cap():
    waits: list[float] = []
    thread = _thread(waits, rounds=7)
    thread._serve(_Engine(["empty"] * 6), {"x": (None, 0)})
    assert waits[0] == 0.0  # the first look at the queue, before any step
    assert waits[1:] == [IDLE_WAIT_MIN_S, 2 * IDLE_WAIT_MIN_S, 4 * IDLE_WAIT_MIN_S, IDLE_WAIT_MAX_S,
                         IDLE_WAIT_MAX_S, IDLE_WAIT_MAX_S]


def test_a_step_that_makes_tokens_or_takes_time_ends_the_waiting():
    waits: list[float] = []
    thread = _thread(waits, rounds=6)
    thread._serve(_Engine(["empty", "empty", "tokens", "empty", "slow"]), {"x": (None, 0)})
    assert waits == [0.0, IDLE_WAIT_MIN_S, 2 * IDLE_WAIT_MIN_S, 0.0, IDLE_WAIT_MIN_S, 0.0]


class _Queue:
    """A job queue that records how each `get` was asked for, and holds `items`."""

    def __init__(self, items: list) -> None:
        self.items = list(items)
        self.asked: list[str] = []

    def _next(self):
        if not self.items:
            raise queue.Empty
        return self.items.pop(0)

    def get(self, block: bool = True, timeout: float | None = None):
        self.asked.append(f"wait {timeout}" if timeout is not None else "block")
        return self._next()

    def get_nowait(self):
        self.asked.append("now")
        return self._next()


def test_take_jobs_waits_only_when_told_and_takes_the_rest_without_waiting():
    thread = EngineThread.__new__(EngineThread)
    added: list = []
    thread._add = lambda engine, job, owner: added.append(job)
    thread._jobs = _Queue(["a", "b"])
    assert thread._take_jobs(None, {"x": (None, 0)}, idle_wait=0.004) is True
    # It waited for the first job; once one came, the next were taken as they were, then it went back to stepping.
    assert thread._jobs.asked == ["wait 0.004", "now", "now"] and added == ["a", "b"]
    thread._jobs = _Queue([])
    assert thread._take_jobs(None, {"x": (None, 0)}) is True
    assert thread._jobs.asked == ["now"]  # requests in flight, the last step busy: no waiting at all


def test_run_to_completion_sleeps_after_idle_steps_and_not_after_busy_ones(monkeypatch):
    monkeypatch.setattr(requests, "add_requests", lambda engine, prompts, params, refuse: {"x": 0})
    slept: list[float] = []
    monkeypatch.setattr(requests.time, "sleep", slept.append)  # the test's clock's (`clock`)
    outputs = run_to_completion(_Engine(["empty", "empty", "tokens", "empty", "done"]), [[1]], [None])
    assert [o.request_id for o in outputs] == ["x"]
    # No sleep before the first step, nor after the step that made tokens.
    assert slept == [IDLE_WAIT_MIN_S, 2 * IDLE_WAIT_MIN_S, IDLE_WAIT_MIN_S]


def test_callers_tokenize_one_at_a_time():
    """vLLM's tokenizer deep-copies itself for a caller that finds every copy in use (0.1 s each): an actor's
    batches, each on a thread of its own, tokenize one at a time instead, so its first batches make no copies."""
    import threading

    inside, most = [0], [0]
    lock = threading.Lock()

    class Tokenizing:
        def prompt_token_ids(self, prompt):
            with lock:
                inside[0] += 1
                most[0] = max(most[0], inside[0])
            time.sleep(0.01)
            with lock:
                inside[0] -= 1
            return [len(prompt)]

    thread = EngineThread.__new__(EngineThread)
    thread._engine = Tokenizing()
    thread._tokenizing = threading.Lock()
    got: list = []
    callers = [threading.Thread(target=lambda n=n: got.append(thread.prompt_token_ids("x" * n))) for n in range(1, 5)]
    for caller in callers:
        caller.start()
    for caller in callers:
        caller.join()
    assert sorted(got) == [[1], [2], [3], [4]] and most[0] == 1
