"""`BatchExtractor`: one batch of documents in, one outcome per document out, in the same order.

It is the actor's whole job apart from owning the engine, so it takes the engine as an argument: a
`workers.engine.contract.Engine`, whose methods are all it calls.

A job has one schema, or one per row (`input.schema_column`). Per-row schemas are resolved
(`schemas.row_schema`, as the driver's routing does), bounded (`schemas.limits`) and compiled once per
actor: each distinct schema is warmed the first time it appears, and its contract is cached by the
column's value.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections.abc import Sequence
from datetime import datetime, timezone
from typing import Any

import pyarrow as pa
import structlog

from schemas.arrow import RecordLayout
from schemas.bounds import DENSITY_KEY, TOKENS_PER_CHAR
from schemas.contract import SchemaContract
from schemas.grounding import ground
from schemas.grounding.elsewhere import silence_elsewhere
from schemas.grounding.unsure import free_fields
from schemas.row_schema import RowSchemaError, row_contract
from workers.calibrator import Calibrator
from workers.classify import (
    INVALID_INPUT_COLUMN,
    Outcome,
    check_batch_types,
    check_input,
    check_types,
    classify,
    dead_letter,
    error_json,
    settle,
)
from workers.compiling import compile_in_engine
from workers.engine import is_fatal
from workers.engine.contract import Engine
from workers.outcome import OUTCOME_FIELDS, Col, DeadLetterReason, Internal, Kind, typed_column
from workers.prompt import Chat, feedback_text, prompt_for, with_feedback
from workers.spec import ExtractionSpec
from workers.stages import TimedCalibrator, timed
from workers.windowed import Requests, max_characters, plan
from workers.windows import WINDOWS, WindowPolicy

log = structlog.get_logger(__name__)

class SchemaUnusable(Exception):
    """A row's schema cannot be used: the row becomes a dead letter with `reason`."""

    def __init__(self, reason: DeadLetterReason, message: str, schema_hash: str | None = None) -> None:
        super().__init__(message)
        self.reason = reason
        self.schema_hash = schema_hash


class BatchExtractor:
    def __init__(self, engine: Engine, spec: ExtractionSpec, max_model_len: int) -> None:
        self.engine = engine
        self.spec = spec  # the batch's columns (id, text); each stage below reads its own part of the rest
        self.decode = spec.decode
        self.schemas = spec.schema
        self.prompt = spec.prompt
        self.max_model_len = max_model_len
        # A text past this many characters cannot fit the context whatever its tokens: refused untokenized.
        per_token = engine.max_chars_per_token
        self.max_chars = max_model_len * per_token if isinstance(per_token, int) and per_token > 0 else None
        # input.long_documents: windows: a document too long for one prompt is read in windows (workers.windows)
        self.windows = self.prompt.windows or WindowPolicy() if self.prompt.long_documents == WINDOWS else None
        if self.windows is not None and self.max_chars is not None:
            self.max_chars = max_characters(max_model_len, per_token, self.windows)
        sampling = spec.engine
        if sampling.sampling or sampling.grammar_bounds != (None, None):  # model.sampling, schema_policy bounds
            engine.use_sampling(sampling.sampling, sampling.grammar_bounds)
        self.backend = sampling.backend
        self._calibrator = TimedCalibrator(Calibrator.from_json(self.decode.calibration)) if self.decode.calibration \
            else None
        self._local = threading.local()  # per calling thread: batches may run concurrently (batches_in_flight)
        self._lock = threading.Lock()  # guards the schema caches
        self._serving = False  # set by the first batch: from then on the engine is busy
        self.on_windows: Any = None  # called with a long document's window count as its requests are planned
        self._key_locks: dict[str, threading.Lock] = {}  # one per schema key: a slow compile holds only its own rows
        self.compile_seconds: dict[str, float] = {}  # schema hash → warm-up seconds, for each schema compiled here
        self._contracts: dict[str, SchemaContract | SchemaUnusable] = {}
        self._schema_text: dict[str, str] = {}
        self._empty_prompt: dict[str, int] = {}  # schema hash → tokens of its prompt without a document
        self._counters: dict[str, Any] = {}  # schema hash → the engine's document counter of its prompt
        if not self.schemas.contract.per_row:
            self._contracts[""] = self.schemas.contract

    # -- schemas -------------------------------------------------------------------------------------

    def prepare(self) -> None:
        """Before the first batch: warm the job's schema, or for per-row schemas the engine's grammar backend
        (vLLM creates it with the first grammar it sees), so that later schemas can compile directly."""
        if not self.decode.constrained:
            return
        if self.schemas.contract.per_row:
            self.engine.warm({"type": "object"})
        else:
            self.warm(self.schemas.contract)

    def warm(self, contract: SchemaContract) -> None:
        """Compile `contract`'s grammar now (once per actor; `workers.compiling.compile_in_engine`: a warm-up
        request before the first batch, then beside the busy engine); a schema the engine rejects is unusable."""
        if contract.hash in self.compile_seconds or not self.decode.constrained:
            return
        if contract.hash in self.schemas.unsupported:
            return
        with timed("grammar_compile"):
            seconds = compile_in_engine(self.engine, contract.json_schema, self._serving)
        if seconds is not None:
            with self._lock:
                self.compile_seconds[contract.hash] = seconds

    def on_stage(self, hook: Any) -> None:
        """Call `hook(stage)` as this thread's batches reach each stage (tokenizing, generating, checking); None:
        stop. The actor records it for a document it runs alone (workers.crashes), to say where a crash was."""
        self._local.on_stage = hook

    def _stage(self, stage: str) -> None:
        hook = getattr(self._local, "on_stage", None)
        if hook is not None:
            hook(stage)

    @property
    def last_generation(self) -> tuple[float, float] | None:
        """This thread's last batch: when its generation started and ended (Unix seconds), or None."""
        return getattr(self._local, "generation", None)

    def contract_for(self, value: Any) -> SchemaContract:
        """The contract of a row: the job's, or its own schema (JSON text, or a key into the schema table)."""
        key = "" if not self.schemas.contract.per_row else ("" if value is None else str(value))
        cached = self._contracts.get(key)
        if cached is None:
            with self._lock:
                key_lock = self._key_locks.setdefault(key, threading.Lock())
            with key_lock:  # one thread resolves and compiles a new schema; others wanting it wait for it
                cached = self._contracts.get(key)
                if cached is None:
                    cached = self._load(key)
                    with self._lock:
                        self._contracts[key] = cached
        if isinstance(cached, SchemaUnusable):
            raise cached
        if cached.hash in self.schemas.unsupported:  # no backend compiles it (dead-letter policy)
            raise SchemaUnusable(DeadLetterReason.SCHEMA_UNSUPPORTED, self.schemas.unsupported[cached.hash],
                                 cached.hash)
        return cached

    def _load(self, key: str) -> SchemaContract | SchemaUnusable:
        try:
            contract = self._resolve(key)
            self.warm(contract)
        except SchemaUnusable as exc:
            return exc
        except Exception as exc:  # noqa: BLE001 - the engine refused the grammar: this schema only
            return SchemaUnusable(DeadLetterReason.SCHEMA_UNSUPPORTED, f"the {self.backend} backend cannot "
                                  f"compile this schema: {type(exc).__name__}: {exc}")
        return contract

    def _resolve(self, key: str) -> SchemaContract:
        try:
            return row_contract(key, self.schemas.schema_table, self.schemas.schema_limits, self.schemas.schema_column)
        except RowSchemaError as exc:
            raise SchemaUnusable(DeadLetterReason.SCHEMA_INVALID, str(exc)) from None

    def _schema_json(self, contract: SchemaContract) -> str:
        if contract.hash not in self._schema_text:
            self._schema_text[contract.hash] = json.dumps(contract.json_schema, ensure_ascii=False)
        return self._schema_text[contract.hash]

    # -- documents -----------------------------------------------------------------------------------

    def outcomes(self, ids: Sequence[Any], texts: Sequence[str | None],
                 schemas: Sequence[Any] | None = None) -> list[Outcome]:
        self._serving = True
        batch = Requests()  # the requests: one per document that fits, one per window of a long one
        results = [self._prepare(i, ids[i], text, schemas[i] if schemas is not None else None, batch)
                   for i, text in enumerate(texts)]
        self._local.generation = None
        if batch.prompts:
            started = time.time()
            settled = self._attempts(batch.ids, batch.texts, batch.chats, batch.prompts, batch.contracts,
                                     batch.document)
            for i, outcome in batch.documents(settled, texts, ids, self.decode.min_confidence):
                if outcome.is_row and not self.schemas.contract.per_row and outcome.extra.get("windows", 1) > 1:
                    outcome = check_types(outcome, batch.contract_of(i))
                results[i] = outcome
            self._local.generation = (started, time.time())

        done = [o for o in results if o is not None]
        if len(done) != len(texts):
            raise RuntimeError("internal error: a document has no outcome")
        return done

    def _prepare(self, i: int, doc_id: Any, text: str | None, schema: Any, batch: Requests) -> Outcome | None:
        """Document `i`'s outcome when it is decided before generation, else None with its requests in `batch`."""
        try:
            contract = self.contract_for(schema)
        except SchemaUnusable as exc:
            unusable = dead_letter(exc.reason, str(exc))
            unusable.extra["schema_hash"] = exc.schema_hash
            return unusable
        early = check_input(text, None, self.decode.max_tokens, self.max_model_len, self.max_chars)
        if early is None:
            assert text is not None
            with timed("prompt"):
                chat = prompt_for(self.prompt, text, contract.json_schema, self._schema_json(contract))
                self._stage("tokenizing")
                tokens = self._document_tokens(text, contract)
                token_ids = tokens.prompt_ids(chat, 0, len(text)) if tokens is not None else None
                if token_ids is None:
                    token_ids = self.engine.prompt_token_ids(chat)
            early = check_input(text, len(token_ids), self.decode.max_tokens, self.max_model_len)
            if early is None and not self._over_window(len(token_ids), contract):
                batch.add(i, doc_id, text, chat, token_ids, contract)
            elif early is None or self.windows is not None and early.reason == DeadLetterReason.INPUT_TOO_LONG:
                with timed("prompt"):  # a long document's windows: its pieces counted, each window's prompt made
                    early = self._windowed(i, doc_id, text, contract, batch, tokens)
        if early is not None:
            early.extra["schema_hash"] = contract.hash
        return early

    def _over_window(self, prompt_tokens: int, contract: SchemaContract) -> bool:
        """Whether a prompt that fits holds more document tokens than a set `input.window_tokens`."""
        if self.windows is None or self.windows.window_tokens is None:
            return False
        return prompt_tokens - self._empty_tokens(contract) > self.windows.window_tokens

    def _empty_tokens(self, contract: SchemaContract) -> int:
        """The tokens of the contract's prompt without a document (once per schema)."""
        if contract.hash not in self._empty_prompt:
            empty = prompt_for(self.prompt, "", contract.json_schema, self._schema_json(contract))
            self._empty_prompt[contract.hash] = len(self.engine.prompt_token_ids(empty))
        return self._empty_prompt[contract.hash]

    def _counter(self, contract: SchemaContract) -> Any:
        """The engine's `document_counter` of the contract's prompt (once per schema: it depends on the prompt's
        shape and the engine's tokenizer only)."""
        if contract.hash not in self._counters:
            self._counters[contract.hash] = self.engine.document_counter(self._render(contract))
        return self._counters[contract.hash]

    def _render(self, contract: SchemaContract) -> Any:
        """`render(document)`: the prompt of a document under `contract`."""
        schema_json = self._schema_json(contract)

        def render(document: str) -> Any:
            return prompt_for(self.prompt, document, contract.json_schema, schema_json)

        return render

    def _document_tokens(self, text: str, contract: SchemaContract) -> Any:
        """For a document likely to be read in windows (over twice as many characters as the context leaves
        tokens), its tokens from one encoding (workers.document_tokens): its own prompt's ids, its pieces' counts
        and its windows' prompts alike; else None (its prompt is tokenized as any)."""
        if self.windows is None or len(text) <= 2 * (self.max_model_len - self.decode.max_tokens):
            return None
        counter = self._counter(contract)
        return counter.document(text) if hasattr(counter, "document") else None

    def _windowed(self, i: int, doc_id: Any, text: str, contract: SchemaContract, batch: Requests,
                  tokens: Any = None) -> Outcome | None:
        """A document too long for one prompt, as window requests in `batch` (None), or `input_too_long`."""
        planned = plan(text, self._render(contract), self.engine.prompt_token_ids,
                       self.max_model_len - self.decode.max_tokens, self.windows, self._counter(contract), tokens,
                       self._empty_tokens(contract))
        if isinstance(planned, Outcome):
            return planned
        for request in planned:
            batch.add(i, doc_id, request.text, request.chat, request.prompt, contract, request.window)
        if self.on_windows is not None and len(planned) > 1:  # the live display counts the document once
            self.on_windows(len(planned))
        return None

    def _grammars(self, contracts: list[SchemaContract], texts: Sequence[str | None],
                  documents: Sequence[int]) -> tuple[list[dict[str, Any] | None], list[tuple[Any, ...]]]:
        """Each request's grammar, and its free fields' leaf patterns (schemas.grounding.unsure). A window's list
        whose items its document writes only in other windows is [] in it (schemas.grounding.elsewhere)."""
        grammars = [self._grammar(c, text) for c, text in zip(contracts, texts, strict=True)]
        with timed("grounding"):  # the grounded grammars' marks taken off, before the engine
            silence_elsewhere(grammars, documents)
            free = [free_fields(g)[1] if g is not None else () for g in grammars]
        return grammars, free

    def _generate(self, prompts: list[list[int]], contracts: list[SchemaContract], ids: Sequence[Any],
                  texts: Sequence[str | None], temperature: float, grammars: list[dict[str, Any] | None],
                  free: list[tuple[Any, ...]], seeds: list[int] | None = None) -> list[Outcome] | Exception:
        """One attempt: an outcome per prompt, or the (non-fatal) exception that failed the whole generation."""
        seeded = {"seeds": seeds} if seeds is not None else {}  # only a resampling attempt seeds each request
        try:
            self._stage("generating")
            generations = self.engine.generate(prompts, grammars, self.decode.max_tokens, temperature, **seeded)
            if len(generations) != len(prompts):
                raise RuntimeError(f"engine returned {len(generations)} outputs for {len(prompts)} prompts")
        except Exception as exc:
            if is_fatal(exc):  # the engine is gone: the batch is redone on a fresh one, not dead-lettered
                raise
            log.error("extract.engine_error", error=repr(exc), documents=len(prompts))
            return exc
        outcomes = []
        self._stage("checking the output (schema, validators)")
        for doc_id, text, generation, contract, unsure in zip(ids, texts, generations, contracts, free, strict=True):
            with timed("classify_validate"):
                outcome = classify(generation, contract, {"document": text, "document_id": doc_id},
                                   self.decode.constrained, self.decode.repeated_items, self.decode.min_confidence,
                                   self._calibrator, free=unsure)
            outcome.extra["schema_hash"] = contract.hash
            outcomes.append(outcome)
        if not self.schemas.contract.per_row:  # typed here: a value its column cannot hold is this row's fault
            with timed("classify_validate"):
                outcomes = check_batch_types(outcomes, self.schemas.contract)
        return outcomes

    def _grammar(self, contract: SchemaContract, text: str | None) -> dict[str, Any] | None:
        """The schema this document's output is decoded under: none for free generation; with grounding, the
        contract's grounded fields narrowed to the values this document writes."""
        if not self.decode.constrained:
            return None
        with timed("grounding"):
            grounded = ground(contract.json_schema, text, self.decode.ground_numbers, self.decode.grounding,
                              self.decode.grounding_locale, self.decode.grounding_screens, mark_free=True)
            density = script_density(self.engine.tokenizer, text)
        return {**grounded, DENSITY_KEY: density} if density is not None else grounded

    def _attempts(self, ids: list[Any], texts: list[str | None], chats: list[str | Chat],
                  prompts: list[list[int]], contracts: list[SchemaContract],
                  documents: Sequence[int]) -> list[Outcome]:
        """Every document's outcome after up to `model.retry.attempts` attempts (one outcome each, in order).

        A document whose output is refused for a reason in `retry.on` is tried again, all such documents of
        the batch together: with the refused output and its errors as chat turns (`retry.feedback`), at
        `retry.temperature` (above 0, seeded per document and attempt). It stops at its first row, at the
        last attempt, when the longer prompt no longer fits the context, or when the next attempt could only
        repeat the last (temperature 0 and the same prompt as before). A generation that fails on a later
        attempt keeps each document's outcome so far."""
        grammars, free = self._grammars(contracts, texts, documents)
        first = self._generate(prompts, contracts, ids, texts, self.decode.temperature, grammars, free)
        if isinstance(first, Exception):
            failed = []
            for contract in contracts:
                outcome = dead_letter(DeadLetterReason.ENGINE_ERROR, f"{type(first).__name__}: {first}")
                outcome.extra["schema_hash"] = contract.hash
                failed.append(outcome)
            return failed
        policy = self.decode.retry
        history: list[list[Outcome]] = [[o] for o in first]
        last_prompt = list(prompts)
        open_ = set(range(len(prompts)))  # documents that may get another attempt
        for attempt in range(2, policy.attempts + 1):
            again, again_prompts = self._again(open_, history, chats, prompts, last_prompt)
            if not again:
                break
            seeds = [retry_seed(policy.seed, ids[j], attempt) for j in again] if policy.temperature > 0 else None
            outcomes = self._generate(again_prompts, [contracts[j] for j in again], [ids[j] for j in again],
                                      [texts[j] for j in again], policy.temperature, [grammars[j] for j in again],
                                      [free[j] for j in again], seeds)
            if isinstance(outcomes, Exception):
                break  # each document keeps the outcome of its last attempt that ran
            for j, token_ids, outcome in zip(again, again_prompts, outcomes, strict=True):
                history[j].append(outcome)
                last_prompt[j] = token_ids
            log.debug("extract.retry", attempt=attempt, documents=len(again),
                      rows=sum(o.is_row for o in outcomes))
        return [settle(h) for h in history]

    def _again(self, open_: set[int], history: list[list[Outcome]], chats: list[str | Chat],
               prompts: list[list[int]], last_prompt: list[list[int]]) -> tuple[list[int], list[list[int]]]:
        """The documents of `open_` to try again, and each one's prompt; those that stop leave `open_`."""
        policy = self.decode.retry
        again, again_prompts = [], []
        for j in sorted(open_):
            last = history[j][-1]
            if last.is_row or last.reason not in policy.on:
                open_.discard(j)
                continue
            if policy.feedback:
                with timed("prompt"):
                    token_ids = self.engine.prompt_token_ids(
                        with_feedback(chats[j], last.raw_output or "", feedback_text(last.reason, last.error)))
            else:
                token_ids = prompts[j]
            repeats = policy.temperature == 0 and token_ids == last_prompt[j]
            if repeats or len(token_ids) + self.decode.max_tokens > self.max_model_len:
                open_.discard(j)
                continue
            again.append(j)
            again_prompts.append(token_ids)
        return again, again_prompts

    def __call__(self, batch: pa.Table) -> pa.Table:
        """Outcomes for a batch; every input column but the text and schema (the id, the unit) passes through."""
        column = self.schemas.schema_column
        outcomes = self.outcomes(batch.column(self.spec.id_column).to_pylist(),
                                 batch.column(self.spec.text_column).to_pylist(),
                                 batch.column(column).to_pylist() if column else None)
        if INVALID_INPUT_COLUMN in batch.column_names:  # rows the reader could not decode (their text is null)
            for i, why in enumerate(batch.column(INVALID_INPUT_COLUMN).to_pylist()):
                if why is not None:
                    outcomes[i] = dead_letter(DeadLetterReason.INVALID_INPUT, why)
        return self.table(batch, outcomes)

    def table(self, batch: pa.Table, outcomes: list[Outcome]) -> pa.Table:
        """The outcome table of `batch`: its passthrough columns (all but the text and schema), `outcomes` beside."""
        column = self.schemas.schema_column
        drop = [self.spec.text_column] + ([column] if column else [])
        drop += [c for c in (BACKEND_COLUMN, INVALID_INPUT_COLUMN) if c in batch.column_names]
        with timed("staging"):
            return outcome_table(batch.drop_columns(drop), outcomes, self.schemas.contract.layout)


def retry_seed(base: int, document_id: Any, attempt: int) -> int:
    """The sampling seed of a document's `attempt` (model.retry.temperature > 0): the same on every rerun and
    whatever batch the document lands in, different per document and attempt."""
    digest = hashlib.sha256(json.dumps([base, str(document_id), attempt]).encode()).digest()
    return int.from_bytes(digest[:4], "big") & 0x7FFFFFFF


BACKEND_COLUMN = Internal.BACKEND  # which actor pool (structured-output backend) a row is routed to


def outcome_table(passthrough: pa.Table, outcomes: list[Outcome], layout: RecordLayout) -> pa.Table:
    """The outcomes beside `passthrough`: `OUTCOME_FIELDS`, then each row's record typed by the job's `layout`
    (`Col.TYPED`), as it is staged and committed."""
    now = datetime.now(timezone.utc)
    columns: dict[str, list[Any]] = {
        Col.KIND: [Kind.ROW.value if o.is_row else Kind.DEAD_LETTER.value for o in outcomes],
        Col.REASON: [None if o.reason is None else str(o.reason) for o in outcomes],
        Col.ERROR: [error_json(o.error) for o in outcomes],
        Col.RAW_OUTPUT: [o.raw_output for o in outcomes],
        Col.FINISH_REASON: [o.finish_reason for o in outcomes],
        Col.PROMPT_TOKENS: [o.prompt_tokens for o in outcomes],
        Col.OUTPUT_TOKENS: [o.output_tokens for o in outcomes],
        Col.SCHEMA_HASH: [o.extra.get("schema_hash") for o in outcomes],
        Col.EXTRACTED_AT: [now] * len(outcomes),
        Col.CONFIDENCE: [list(o.confidence.items()) if o.is_row and o.confidence is not None else None
                         for o in outcomes],
        Col.SPANS: [[(path, [{"start": s, "end": e} for s, e in places]) for path, places in o.spans.items()]
                    if o.is_row and o.spans is not None else None for o in outcomes],
        Col.WINDOWS: [o.extra.get("windows") for o in outcomes],
        Col.WINDOW_OF: [list(o.extra["window_of"].items()) if o.is_row and "window_of" in o.extra else None
                        for o in outcomes],
    }
    table = passthrough.combine_chunks()
    for f in OUTCOME_FIELDS:
        table = table.append_column(f, pa.array(columns[f.name], type=f.type))
    typed = typed_column(layout, [o.record if o.is_row else None for o in outcomes])
    return table.append_column(pa.field(Col.TYPED, typed.type), typed)


def script_density(tokenizer: Any, text: str | None, sample: int = 1000) -> float | None:
    """The document's tokens per character under the model's own tokenizer (its first `sample` characters), where
    it is over the bounds' English figure (`schemas.bounds.TOKENS_PER_CHAR`: a Chinese document), else None."""
    if tokenizer is None or not text:  # an engine without a tokenizer here (`Engine.tokenizer`): no density
        return None
    part = text[:sample]
    density = len(tokenizer.encode(part, add_special_tokens=False)) / max(1, len(part))
    return round(density, 3) if density > TOKENS_PER_CHAR else None
