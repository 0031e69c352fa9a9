"""The simulated engine (`model.path: simulated`): the engine contract (`workers.engine.contract`), no model.

It lets the real plan, actors, classify, staging and commit run at the scale of a nightly corpus on a machine
without a GPU: no torch, no vLLM, a few MB per actor.

- **Tokenizer.** A trivial one: a text is `ceil(characters / 4)` tokens (`CHARS_PER_TOKEN`), so the context check
  (`input_too_long`) and the prompt-token counts behave as with a real tokenizer of about that density. The first
  id of a prompt is a handle to its text, which `generate` reads back (the engine interface carries no document
  id, only token ids).
- **Latency.** Each request takes `ttft_s` plus `output tokens / tokens_per_s` (a per-sequence decode rate, as on
  a GPU), and up to `max_seqs` requests decode at once (default `workers.batch_size × batches_in_flight`, the
  sequences an actor keeps in flight), so requests of batches in flight overlap as under continuous batching;
  the rest wait for a slot. `tokens_per_s: 0` (the default) answers at once: the pipeline's own ceiling.
- **Outputs.** A record per document, by `answers` (below), the same for the same document on every rerun. A
  gold JSONL file (`outputs: FILE`) holds lines of `{"document": TEXT, "output": {...}}`, the few-shot examples'
  format, matched by the document text the prompt holds. A configurable share (`mix`) is instead `truncated`
  (finish_reason "length"), `invalid` (half not JSON, half JSON that breaks the schema) or `refused` (the engine
  refuses the request), chosen per document from its text's digest, so every path of classify runs and a rerun
  sees the same outcomes.
- **Answers** (`answers`). `mix` (the default, as before): the gold record where `outputs: FILE` has the
  document, else a record generated from the JSON Schema (which a job's validators that check values against the
  document refuse: `semantic_invalid`). `valid` (the default of `extract bench --simulate`): the gold record, else
  the job's few-shot example for that document, else a record made from the document (its strings and numbers
  drawn from the document's words, lines and numbers) that the job's schema and validators accept, a refused value
  set to null (`REPAIRS` rounds), then the all-null record; only when that is refused too, the schema-made record.
  A job without validators gets the schema-made record, as under `mix`. `gold`: the gold file's record, matched
  by document text (the engine sees no document id); a document it lacks is refused (`engine_error`, "not in the
  gold file"). The `mix` shares apply in every mode.
- **Log-probabilities.** When the run asks for them (`logprobs` in its sampling: `output.confidence`), each output
  comes as tokens of 4 characters with a log-probability each, drawn from the document's digest and `seed`, so
  `_confidence`, `output.min_confidence` and calibration run on the simulated engine, the same on every rerun.
- **Budget.** An output longer than the request's `max_tokens` (its `output_tokens`, else its characters / 4)
  stops there, cut off, with finish_reason "length", as a real engine's does: a small budget truncates.
"""

from __future__ import annotations

import hashlib
import heapq
import itertools
import json
import math
import random
import re
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from schemas.contract import RecordRejected
from schemas.examples import load_examples_file
from schemas.refs import SchemaGraph, graph_for
from workers.engine import REFUSED, Generation
from workers.engine.contract import Engine
from workers.engine.outputs import tell_hooks

if TYPE_CHECKING:
    from workers.spec import ExtractionSpec

CHARS_PER_TOKEN = 4
ANSWERS = ("mix", "valid", "gold")
REPAIRS = 3  # answers: valid: rounds of nulling the values a contract refused, before the all-null record
SENTINEL = "\x00simulated-document\x00"
HANDLES_KEPT = 1 << 16  # prompts tokenized and not yet generated (an input_too_long one never is): a bounded map

DEFAULTS: dict[str, Any] = {"tokens_per_s": 0.0, "ttft_s": 0.0, "max_seqs": None, "output_tokens": None,
                            "init_s": 0.0, "outputs": "schema", "seed": 0, "answers": "mix",
                            "mix": {"truncated": 0.0, "invalid": 0.0, "refused": 0.0}}


def settings_of(spec: ExtractionSpec) -> dict[str, Any]:
    """The simulated engine's settings: `model.simulated`, which pipeline.config puts in `engine_kwargs`."""
    given = dict((spec.engine_kwargs or {}).get("simulated") or {})
    settings = {**DEFAULTS, **{k: v for k, v in given.items() if v is not None}}
    settings["mix"] = {**DEFAULTS["mix"], **(given.get("mix") or {})}
    return settings


def start_simulated(spec: ExtractionSpec) -> SimulatedEngine:
    return SimulatedEngine(spec, settings_of(spec))


def count_tokens(text: str) -> int:
    return max(1, math.ceil(len(text) / CHARS_PER_TOKEN))


class SimulatedEngine(Engine):
    """The engine contract (`workers.engine.contract.Engine`) without a model: prompt_token_ids, use_sampling, warm,
    compile, generate, close; max_model_len, max_chars_per_token, init_seconds; on_request_done and on_tokens."""

    def __init__(self, spec: ExtractionSpec, settings: dict[str, Any]) -> None:
        started = time.perf_counter()
        self.spec = spec
        self.settings = settings
        self.tokens_per_s = float(settings["tokens_per_s"] or 0)
        self.ttft_s = float(settings["ttft_s"] or 0)
        self.max_seqs = int(settings["max_seqs"] or spec.sequences_in_flight or 1)
        self.output_tokens = settings["output_tokens"]
        self.max_model_len = int(spec.max_model_len)
        self.max_chars_per_token = CHARS_PER_TOKEN
        self.on_request_done: Callable[[Any], None] | None = None
        self.on_tokens: Callable[[int], None] | None = None
        self.mix = _thresholds(settings["mix"])
        self.answers = str(settings["answers"] or "mix")
        if self.answers not in ANSWERS:
            raise ValueError(f"model.simulated.answers: one of {', '.join(ANSWERS)} (got {self.answers!r})")
        self.gold = _load_gold(settings["outputs"]) if settings["outputs"] not in (None, "schema") else {}
        if self.answers == "gold" and not self.gold:
            raise ValueError("model.simulated.answers: gold needs model.simulated.outputs, a gold JSONL file")
        self.seed = int(settings["seed"] or 0)
        self.examples = _examples(spec) if self.answers == "valid" else {}
        self.sampling_options: dict[str, Any] = {}
        self._records: dict[str, str] = {}  # schema text → a record generated from it (varied per document below)
        self._prompts: OrderedDict[int, str] = OrderedDict()
        self._handles = itertools.count(1)
        self._lock = threading.Lock()
        self._prefix, self._suffix = _document_frame(spec)
        self._scheduler = _Scheduler(self) if self.tokens_per_s > 0 or self.ttft_s > 0 else None
        if settings["init_s"]:
            time.sleep(float(settings["init_s"]))
        self.init_seconds = time.perf_counter() - started

    # -- the engine interface -------------------------------------------------------------------------

    def prompt_token_ids(self, prompt: Any) -> list[int]:
        text = prompt if isinstance(prompt, str) else (prompt.messages[-1].get("content") or "")
        with self._lock:
            handle = next(self._handles)
            self._prompts[handle] = text
            if len(self._prompts) > HANDLES_KEPT:
                self._prompts.popitem(last=False)
        whole = text if isinstance(prompt, str) else "".join(m.get("content") or "" for m in prompt.messages)
        return [handle] + [0] * (count_tokens(whole) - 1)

    def use_sampling(self, options: dict[str, Any], grammar_bounds: Any = (None, None)) -> None:
        """The run's sampling: with `logprobs` in it (output.confidence), outputs carry their tokens' log-probs."""
        self.sampling_options = dict(options)

    def warm(self, json_schema: dict[str, Any]) -> float:
        return 0.0

    def compile(self, json_schema: dict[str, Any]) -> float | None:
        return 0.0

    def close(self) -> None:
        if self._scheduler is not None:
            self._scheduler.stop()

    def generate(self, prompts: list[list[int]], json_schema: dict[str, Any] | None | Sequence[dict[str, Any] | None],
                 max_tokens: int, temperature: float, seeds: Sequence[int | None] | None = None) -> list[Generation]:
        if not prompts:
            return []
        schemas = list(json_schema) if isinstance(json_schema, list | tuple) else [json_schema] * len(prompts)
        answers = [self.answer(ids, schema, max_tokens) for ids, schema in zip(prompts, schemas, strict=True)]
        if self._scheduler is None:
            for generation in answers:
                self._done(generation)
            return answers
        return self._scheduler.run(answers)

    # -- outputs ---------------------------------------------------------------------------------------

    def document(self, ids: list[int]) -> str:
        """The document a prompt holds (the text of its handle, less the template around the document)."""
        with self._lock:
            text = self._prompts.pop(ids[0], None) if ids else None
        if text is None:
            return ""
        if self._prefix is not None and text.startswith(self._prefix) and text.endswith(self._suffix):
            return text[len(self._prefix):len(text) - len(self._suffix)]
        return text

    def answer(self, ids: list[int], json_schema: dict[str, Any] | None, max_tokens: int) -> Generation:
        document = self.document(ids)
        digest = _digest(document)
        draw = int.from_bytes(digest[:8], "big") / 2.0 ** 64
        kind = next((name for name, upto in self.mix if draw < upto), "row")
        if kind == "refused":
            return Generation("", REFUSED, len(ids), 0, "the simulated engine refused it (model.simulated.mix)")
        text = self._text(document, digest, json_schema)
        if text is None:
            return Generation("", REFUSED, len(ids), 0, "the simulated engine's document is not in the gold file "
                              "(model.simulated.answers: gold)")
        tokens = int(self.output_tokens or count_tokens(text))
        if kind == "truncated":
            return self._scored(text[:max(1, len(text) // 2)], "length", len(ids), max_tokens, digest)
        if tokens > max_tokens:  # as a real engine: an output longer than the budget stops at it, cut off
            return self._scored(text[:max_tokens * CHARS_PER_TOKEN], "length", len(ids), max_tokens, digest)
        if kind == "invalid":
            broken = text[:-1] if digest[8] % 2 else "[]"  # not JSON; or JSON that is not the schema's object
            return self._scored(broken, "stop", len(ids), tokens, digest)
        return self._scored(text, "stop", len(ids), tokens, digest)

    def _text(self, document: str, digest: bytes, json_schema: dict[str, Any] | None) -> str | None:
        """The output's JSON text under `answers` (module docstring); None: a gold run's document without gold."""
        if digest in self.gold:
            return self.gold[digest]
        if self.answers == "gold":
            return None
        if self.answers == "valid":
            return self.examples.get(digest) or self._valid(document, digest, json_schema)
        return self._generated(json_schema, digest)

    def _rng(self, digest: bytes, salt: bytes = b"") -> random.Random:
        """The document's draws: today's records for seed 0 and no salt, others for another seed."""
        if not self.seed and not salt:
            return random.Random(digest)
        return random.Random(digest + self.seed.to_bytes(8, "big", signed=True) + salt)

    def _generated(self, json_schema: dict[str, Any] | None, digest: bytes) -> str:
        schema = json_schema if json_schema is not None else self.spec.contract.json_schema
        if schema is None:
            return "{}"
        return json.dumps(record_for(schema, self._rng(digest)), ensure_ascii=False, separators=(",", ":"))

    def _valid(self, document: str, digest: bytes, json_schema: dict[str, Any] | None) -> str:
        """A record made from the document that the job's schema and validators accept: its strings and numbers
        drawn from the document's own words, lines and numbers; a value the contract refuses is left null (or an
        item dropped), up to `REPAIRS` times; then every nullable field null; last, the schema-made record.
        A job without validators gets the schema-made record, as under `mix` (it passes the schema)."""
        contract = self.spec.contract
        schema = json_schema if json_schema is not None else contract.json_schema
        if schema is None or contract.model is None:
            return self._generated(json_schema, digest)
        record = record_for(schema, self._rng(digest, b"valid"), pools=Pools.of(document))
        for _ in range(REPAIRS):
            text = json.dumps(record, ensure_ascii=False, separators=(",", ":"))
            try:
                contract.check(text, {"document": document})
                return text
            except RecordRejected as rejected:
                if not _drop(record, [e.get("loc") or [] for e in rejected.errors]):
                    break
            except Exception:  # noqa: BLE001 - a validator's own error: the all-null record below
                break
        nulls = json.dumps(record_for(schema, self._rng(digest), nulls=True), ensure_ascii=False,
                           separators=(",", ":"))
        try:
            contract.check(nulls, {"document": document})
            return nulls
        except Exception:  # noqa: BLE001 - refused too: the schema's record (a dead letter, as under mix)
            return self._generated(json_schema, digest)

    def _scored(self, text: str, finish: str, prompt_tokens: int, output_tokens: int, digest: bytes) -> Generation:
        """A generation, with its tokens and their log-probabilities when the run asks for them."""
        if "logprobs" not in self.sampling_options:
            return Generation(text, finish, prompt_tokens, output_tokens, whole_json=True)
        pieces, logprobs = token_logprobs(text, self._rng(digest, b"logprobs"))
        return Generation(text, finish, prompt_tokens, output_tokens, token_pieces=pieces, token_logprobs=logprobs,
                          whole_json=True)

    def _done(self, generation: Generation) -> None:
        tell_hooks(self, generation)


class _Scheduler:
    """Requests decode together, up to `max_seqs` at once, each for ttft + tokens / tokens_per_s; one thread."""

    def __init__(self, engine: SimulatedEngine) -> None:
        self.engine = engine
        self.cond = threading.Condition()
        self.waiting: deque[tuple[float, list[Any], int]] = deque()  # (duration, its call's slots, its index)
        self.running: list[tuple[float, int, list[Any], int]] = []  # heap of (finish time, seq, slots, index)
        self.seq = itertools.count()
        self.stopped = False
        self.thread = threading.Thread(target=self._loop, name="simulated-engine", daemon=True)
        self.thread.start()

    def run(self, answers: list[Generation]) -> list[Generation]:
        e = self.engine
        call: list[Any] = [len(answers), threading.Event()]
        with self.cond:
            for i, g in enumerate(answers):
                work = g.output_tokens / e.tokens_per_s if e.tokens_per_s > 0 else 0.0
                self.waiting.append((e.ttft_s + work, call, i))
            self.cond.notify()
        call[1].wait()
        for g in answers:
            e._done(g)
        return answers

    def stop(self) -> None:
        with self.cond:
            self.stopped = True
            self.cond.notify()

    def _loop(self) -> None:
        limit = self.engine.max_seqs
        with self.cond:
            while not self.stopped:
                now = time.monotonic()
                while self.waiting and len(self.running) < limit:
                    duration, call, i = self.waiting.popleft()
                    heapq.heappush(self.running, (now + duration, next(self.seq), call, i))
                while self.running and self.running[0][0] <= now:
                    _, _, call, _ = heapq.heappop(self.running)
                    call[0] -= 1
                    if call[0] == 0:
                        call[1].set()
                if self.running and len(self.running) >= limit or not self.waiting:
                    timeout = self.running[0][0] - now if self.running else None
                    if timeout is None or timeout > 0:
                        self.cond.wait(timeout)


def _thresholds(mix: dict[str, Any]) -> list[tuple[str, float]]:
    """Cumulative thresholds of the mix, in a fixed order: a document's draw below one takes that kind."""
    out, upto = [], 0.0
    for name in ("truncated", "invalid", "refused"):
        share = float(mix.get(name) or 0)
        if share < 0:
            raise ValueError(f"model.simulated.mix.{name}: a share is at least 0 (got {share})")
        upto += share
        out.append((name, upto))
    if upto > 1:
        raise ValueError(f"model.simulated.mix: the shares add up to {upto:g}, more than 1")
    return out


def _digest(document: str) -> bytes:
    return hashlib.blake2b(document.encode("utf-8", "surrogatepass"), digest_size=16).digest()


def _load_gold(path: str) -> dict[bytes, str]:
    """A gold JSONL file in the few-shot examples' format (read by `schemas.examples`), keyed by the document's
    digest."""
    return {_digest(e.document): json.dumps(e.output, ensure_ascii=False, separators=(",", ":"))
            for e in load_examples_file(Path(path))}


def _examples(spec: ExtractionSpec) -> dict[bytes, str]:
    """The job's few-shot examples (document, compact output), keyed by the document's digest."""
    return {_digest(document): output for document, output in (spec.examples or ())}


def token_logprobs(text: str, rng: random.Random) -> tuple[tuple[str, ...], tuple[float, ...]]:
    """`text` as tokens of `CHARS_PER_TOKEN` characters, each with a log-probability drawn from `rng`: most tokens
    near certain (as a model's are on text it copies), some unsure, a few guessed."""
    pieces = tuple(text[i:i + CHARS_PER_TOKEN] for i in range(0, len(text), CHARS_PER_TOKEN))
    logprobs = []
    for _ in pieces:
        u = rng.random()
        if u < 0.9:
            logprobs.append(-rng.uniform(0.0, 0.002))
        elif u < 0.98:
            logprobs.append(-rng.uniform(0.005, 0.1))
        else:
            logprobs.append(-rng.uniform(0.3, 2.0))
    return pieces, tuple(round(v, 6) for v in logprobs)


def _document_frame(spec: ExtractionSpec) -> tuple[str | None, str]:
    """The text around the document in the prompt's last message, for the job's schema (None: not known)."""
    contract = spec.contract
    if contract.per_row:
        return None, ""
    try:
        from workers.prompt import prompt_for

        schema = contract.json_schema
        chat = prompt_for(spec.prompt, SENTINEL, schema, json.dumps(schema, ensure_ascii=False))
        text = chat if isinstance(chat, str) else chat.messages[-1].get("content") or ""
    except Exception:  # noqa: BLE001 - without the frame, the whole message stands for the document
        return None, ""
    if text.count(SENTINEL) != 1:
        return None, ""
    prefix, suffix = text.split(SENTINEL)
    return prefix, suffix


# -- records from a JSON Schema ----------------------------------------------------------------------

NUMBER = re.compile(r"(?<![\w.])\d[\d,]*(?:\.\d+)?(?![\w.])")
WORD = re.compile(r"[^\s|:;,()]+(?: [^\s|:;,()]+)?")


@dataclass(frozen=True)
class Pools:
    """A document's values for `answers: valid`: its lines, its words (and pairs of words), its numbers."""

    lines: tuple[str, ...]
    words: tuple[str, ...]
    numbers: tuple[float, ...]

    @classmethod
    def of(cls, document: str) -> Pools:
        lines = tuple(line.strip() for line in document.splitlines() if line.strip())
        numbers = tuple(float(n.replace(",", "")) for n in NUMBER.findall(document))
        return cls(lines, tuple(WORD.findall(document)), numbers)

    def text(self, rng: random.Random, high: int | None) -> str | None:
        fits = [t for t in (self.words if rng.random() < 0.5 else self.lines) if high is None or len(t) <= high]
        return rng.choice(fits) if fits else None

    def number(self, rng: random.Random, low: float, high: float | None) -> float | None:
        fits = [n for n in self.numbers if n >= low and (high is None or n <= high)]
        return rng.choice(fits) if fits else None


def _drop(record: Any, locations: list[list[str]]) -> bool:
    """Null each refused value (or drop a refused list item); False where an error names no value."""
    if not locations or any(not loc for loc in locations):
        return False
    for loc in sorted(locations, key=lambda path: [int(p) if p.isdigit() else -1 for p in path], reverse=True):
        node = record
        for part in loc[:-1]:
            node = node[int(part)] if isinstance(node, list) else node.get(part) if isinstance(node, dict) else None
        last = loc[-1]
        if isinstance(node, list) and last.isdigit() and int(last) < len(node):
            node.pop(int(last))
        elif isinstance(node, dict) and node.get(last) is not None:
            node[last] = None
        else:
            return False
    return True


WORDS = ("alpha", "bravo", "cedar", "delta", "ember", "fjord", "grove", "harbor", "iris", "juniper")


def record_for(schema: dict[str, Any], rng: random.Random, root: dict[str, Any] | None = None, depth: int = 0,
               nulls: bool = False, pools: Pools | None = None) -> Any:
    """A value valid under `schema` for the keywords an extraction schema uses (types, required properties, enum,
    const, numeric and length bounds, formats date/date-time, references, anyOf/oneOf, arrays); deterministic
    for `rng`. `nulls`: null wherever the schema allows it (and the fewest items a list may have). `pools`: plain
    strings and numbers drawn from a document's values where one fits."""
    root = root if root is not None else schema
    if not isinstance(schema, dict) or depth > 12:
        return None
    if SchemaGraph.refers(schema):  # recursion is cut by depth, so a recursive schema still gets nested values
        return record_for(graph_for(root).expand(schema).node or {}, rng, root, depth + 1, nulls, pools)
    if "const" in schema:
        return schema["const"]
    if schema.get("enum"):
        return None if nulls and None in schema["enum"] else rng.choice(schema["enum"])
    for key in ("anyOf", "oneOf", "allOf"):
        alternatives = schema.get(key) or []
        if nulls and key != "allOf" and any(isinstance(o, dict) and o.get("type") == "null" for o in alternatives):
            return None
        options = [o for o in alternatives if not (isinstance(o, dict) and o.get("type") == "null")]
        if pools is not None and len(options) < len(alternatives) and options and options[0].get("format"):
            return None  # a formatted value (a date) the document may write otherwise: null, where allowed
        if options:
            return record_for(options[0], rng, root, depth + 1, nulls, pools)
    kind = schema.get("type", "object" if "properties" in schema else "string")
    if isinstance(kind, list):
        kind = "null" if nulls and "null" in kind else next((k for k in kind if k != "null"), "null")
    if kind == "object":
        return {name: record_for(sub, rng, root, depth + 1, nulls, pools)
                for name, sub in (schema.get("properties") or {}).items()}
    if kind == "array":
        n = int(schema.get("minItems", 0)) if nulls else max(int(schema.get("minItems", 1)),
                                                              min(2, int(schema.get("maxItems", 2))))
        return [record_for(schema.get("items") or {}, rng, root, depth + 1, nulls, pools) for _ in range(n)]
    drawn = _from_pools(kind, schema, rng, pools) if pools is not None else None
    return drawn if drawn is not None else _scalar(kind, schema, rng)


def _from_pools(kind: str, schema: dict[str, Any], rng: random.Random, pools: Pools) -> Any:
    """A plain string or number the document writes, within the schema's bounds; None where none fits."""
    if kind == "string" and not schema.get("format") and not schema.get("pattern"):
        text = pools.text(rng, schema.get("maxLength"))
        return text if text is not None and len(text) >= int(schema.get("minLength", 0)) else None
    if kind == "number":
        return pools.number(rng, float(schema.get("minimum", float("-inf"))), schema.get("maximum"))
    return None


def _scalar(kind: str, schema: dict[str, Any], rng: random.Random) -> Any:
    if kind == "integer":
        low = int(schema.get("minimum", schema.get("exclusiveMinimum", -1) + 1))
        high = int(schema.get("maximum", schema.get("exclusiveMaximum", low + 1001) - 1))
        return rng.randint(low, max(low, high))
    if kind == "number":
        low = float(schema.get("minimum", 0))
        return round(rng.uniform(low, float(schema.get("maximum", low + 1000))), 2)
    if kind == "boolean":
        return rng.random() < 0.5
    if kind == "null":
        return None
    fmt = schema.get("format")
    if fmt in ("date", "date-time"):
        day = f"2026-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"
        return day if fmt == "date" else f"{day}T12:00:00Z"
    text = " ".join(rng.choice(WORDS) for _ in range(2)).ljust(int(schema.get("minLength", 0)), "x")
    high = schema.get("maxLength")
    return text[:int(high)] if high is not None else text
