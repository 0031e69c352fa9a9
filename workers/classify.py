"""Each document's outcome: a row, or a dead letter with its reason.

Read:                text that cannot be decoded (invalid UTF-8) → `invalid_input`.
Before generation:   empty or null text → `empty_input`; prompt + output budget past the context → `input_too_long`
                     (a text too long to fit at any tokenization is refused untokenized: `check_input`).
After generation, in this order:
  0. the engine refused the request, or ended it with an error before its first token → `schema_unsupported`
     under a grammar (it is the grammar: a feature the backend refuses, a failed compile); ended with an
     error after tokens were made (the grammar had compiled: e.g. XGrammar rejecting a sampled token), or
     without a grammar → `engine_error`;
  1. `finish_reason == "length"` → `truncated` (the grammar was cut off, whatever the text looks like);
  2. not parseable → `invalid_json`;
  3. fails the contract → `semantic_invalid` (Pydantic, validators included) or `schema_violation` (JSON Schema);
  4. a validator that crashed instead of answering → `validator_error` (any exception, `SystemExit` and
     `KeyboardInterrupt` included; only `workers.engine.EngineFatal` and `MemoryError` go up), and
     a schema pattern that ran past its time budget → `validator_timeout`;
  5. a value its Arrow column cannot hold → `type_overflow` past the type's range (an integer past int64), else
     `semantic_invalid`, naming the field: rows are typed here, on the actor (`check_types`), not only on the
     driver, where one value would fail the whole table (a per-row-schema job stores each record as JSON
     text, and has nothing to type);
  6. otherwise a row.
A batch whose generation raised → every document in it is `engine_error`.
A document its actor's process died on twice (a crash, an OOM kill) → `actor_crash` (workers.crashes).
Per-row schemas add `schema_invalid` (not JSON, not a JSON Schema, or over a `schemas.limits` bound)
and `schema_unsupported` (no structured-output backend compiles it, under `on_unsupported: dead_letter`).

Unconstrained generation (`model.constrained: false`, a baseline) is read the way a hand-written loop
reads free text: the outermost {...} is taken out of any prose or code fence around it, then checked.
"""

from __future__ import annotations

import dataclasses
import json
import re
import traceback
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from schemas.arrow import FieldTypeError, check_record
from schemas.contract import RecordRejected, SchemaContract
from schemas.grounding.unsure import unsure_free
from schemas.patterns import PatternBudgetExceeded
from schemas.repeats import cut_output
from schemas.spans import record_spans
from workers.calibrator import Calibrator
from workers.confidence import leaf_confidence, row_confidence
from workers.engine import REFUSED, EngineFatal, Generation
from workers.outcome import DEAD_LETTER_REASONS, DeadLetterReason, Internal

__all__ = ["DEAD_LETTER_REASONS", "INVALID_INPUT_COLUMN", "DeadLetterReason", "Outcome", "check_batch_types",
           "check_input", "check_types", "classify", "dead_letter", "error_json", "settle"]

INVALID_INPUT_COLUMN = Internal.INVALID_INPUT  # set by the reader on a row it could not decode: why, else null

JSON_BLOCK = re.compile(r"\{.*\}", re.DOTALL)


def json_candidate(text: str) -> str:
    """The outermost {...} of free text (prose or a code fence around it), else the text itself."""
    match = JSON_BLOCK.search(text)
    return match.group(0) if match else text


@dataclass
class Outcome:
    """One document's result. `record` is set for a row; `reason` and `error` for a dead letter."""

    record: dict[str, Any] | None = None
    reason: str | None = None
    error: dict[str, Any] | None = None
    raw_output: str | None = None
    finish_reason: str | None = None
    prompt_tokens: int | None = None
    output_tokens: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    confidence: dict[str, float] | None = None  # a row's leaves: path → confidence (workers.confidence)
    spans: dict[str, list[tuple[int, int]]] | None = None  # a row's leaves: path → where the document writes it

    @property
    def is_row(self) -> bool:
        return self.record is not None


def dead_letter(reason: str, message: str, **details: Any) -> Outcome:
    return Outcome(reason=reason, error={"message": message, **details})


def check_input(text: str | None, prompt_tokens: int | None, max_tokens: int, max_model_len: int,
                max_chars: int | None = None) -> Outcome | None:
    """A dead letter for a document that must not reach the engine, else None. Before tokenizing (`prompt_tokens`
    None), a text longer than `max_chars` (max_model_len × the tokenizer's longest token in characters) is
    `input_too_long` at once: it has more tokens than the context holds, and tokenizing it whole would take
    memory in proportion (about 180 MiB per MB of text)."""
    if text is None or not text or text.isspace():  # (not `text.strip()`: no copy of a huge text)
        return dead_letter(DeadLetterReason.EMPTY_INPUT, "the document text is empty or null")
    if prompt_tokens is None and max_chars is not None and len(text) > max_chars:
        return Outcome(
            reason=DeadLetterReason.INPUT_TOO_LONG,
            error={
                "message": f"the document has {len(text)} characters, more than max_model_len {max_model_len} "
                f"tokens can hold ({max_chars} characters at the tokenizer's longest token); not tokenized",
                "characters": len(text),
                "max_characters": max_chars,
                "max_tokens": max_tokens,
                "max_model_len": max_model_len,
            },
        )
    if prompt_tokens is not None and prompt_tokens + max_tokens > max_model_len:
        return Outcome(
            reason=DeadLetterReason.INPUT_TOO_LONG,
            error={
                "message": f"prompt of {prompt_tokens} tokens + max_tokens {max_tokens} "
                f"exceeds max_model_len {max_model_len}",
                "prompt_tokens": prompt_tokens,
                "max_tokens": max_tokens,
                "max_model_len": max_model_len,
            },
            prompt_tokens=prompt_tokens,
        )
    return None


def classify(generation: Generation, contract: SchemaContract, context: dict[str, Any],
             constrained: bool = True, repeated_items: str = "keep", min_confidence: float | None = None,
             calibrator: Calibrator | None = None, free: Sequence[re.Pattern[str]] = ()) -> Outcome:
    """`repeated_items="cut"` (schema_policy.repeated_items): lists end before their first repeated item
    (`schemas.repeats`) when the output passes its checks so; else it is checked as decoded. `free`: the leaf
    paths of nullable fields grounding left free for this document; such a leaf the model was not sure of is
    null (`schemas.grounding.unsure`)."""
    outcome = Outcome(
        raw_output=generation.text,
        finish_reason=generation.finish_reason,
        prompt_tokens=generation.prompt_tokens,
        output_tokens=generation.output_tokens,
    )
    if generation.finish_reason in (REFUSED, "error"):
        return _refused(outcome, generation, constrained)
    if generation.finish_reason == "length":
        outcome.reason = DeadLetterReason.TRUNCATED
        outcome.error = {"message": f"output hit the token limit after {generation.output_tokens} tokens"}
        return outcome
    text = generation.text if constrained else json_candidate(generation.text)
    try:
        outcome.record = _check(contract, _sure(text, generation, free), context, repeated_items)
        if constrained or generation.whole_json:
            outcome.confidence = row_confidence(text, generation.token_pieces, generation.token_logprobs,
                                                outcome.record)
        outcome.spans = record_spans(outcome.record, context.get("document"))
        if calibrator is not None and outcome.confidence:  # output.calibration: reads the row and its spans
            outcome.confidence = calibrator.row(outcome.confidence, outcome.record, outcome.spans,
                                                context.get("document"))
        if min_confidence is not None and outcome.confidence:
            _below(outcome, min_confidence)
    except RecordRejected as rejected:
        outcome.reason = rejected.reason
        outcome.error = {"message": rejected.errors[0]["msg"] if rejected.errors else rejected.reason,
                         "errors": rejected.errors}
    except PatternBudgetExceeded as exc:
        outcome.reason = DeadLetterReason.VALIDATOR_TIMEOUT
        outcome.error = {"message": str(exc)}
    except BaseException as exc:  # a user's validator may raise anything; it must not kill the batch
        if isinstance(exc, EngineFatal | MemoryError):  # the engine's (or the process's) end, not the record's
            raise
        outcome.reason = DeadLetterReason.VALIDATOR_ERROR
        outcome.error = {
            "message": f"{type(exc).__name__}: {exc}",
            "traceback": traceback.format_exception_only(type(exc), exc)[-1].strip(),
        }
    return outcome


def _sure(text: str, generation: Generation, free: Sequence[re.Pattern[str]]) -> str:
    """The output with a free field's value null where the model was unsure of it (`unsure_free`)."""
    if not free or not generation.token_pieces:
        return text
    confidence = leaf_confidence(text, generation.token_pieces, generation.token_logprobs)
    return unsure_free(text, confidence, free)[0]


def _refused(outcome: Outcome, generation: Generation, constrained: bool) -> Outcome:
    """The engine would not take the request, or ended it with an error. Under a grammar, before any token, that is
    the grammar (a schema feature the backend refuses, or a failed compile): this schema, not this document. After
    tokens the grammar had compiled, so it is the engine's fault on this request."""
    grammar = constrained and (generation.finish_reason == REFUSED or generation.output_tokens == 0)
    outcome.reason = DeadLetterReason.SCHEMA_UNSUPPORTED if grammar else DeadLetterReason.ENGINE_ERROR
    message = generation.error or f"the engine ended the request: {generation.finish_reason}"
    if not grammar and generation.output_tokens:
        message = (f"the engine ended this request with an error after {generation.output_tokens} tokens "
                   "(vLLM finish_reason 'error'; the grammar had compiled)")
    outcome.error = {"message": message}
    return outcome


def _below(outcome: Outcome, min_confidence: float) -> None:
    """A row whose least confident leaf is under `min_confidence` becomes a `low_confidence` dead letter that keeps
    the record, its confidence and spans, so a person or `extract retry` can take it up."""
    path, lowest = min(outcome.confidence.items(), key=lambda item: item[1])  # type: ignore[union-attr]
    if lowest >= min_confidence:
        return
    outcome.error = {"message": f"the least confident value, {path}, is at {lowest:.3f}, under output.min_confidence "
                                f"{min_confidence}", "field": path, "confidence": lowest, "record": outcome.record,
                     "confidences": outcome.confidence, "spans": outcome.spans}
    outcome.reason = DeadLetterReason.LOW_CONFIDENCE
    outcome.record = None


def _check(contract: SchemaContract, text: str, context: dict[str, Any], repeated_items: str) -> dict[str, Any]:
    cut = cut_output(text) if repeated_items == "cut" else None
    if cut is not None:
        try:
            return contract.check(cut[0], context)
        except RecordRejected:
            pass  # the cut never makes a dead letter: the output as decoded decides
    return contract.check(text, context)


def check_types(outcome: Outcome, contract: SchemaContract) -> Outcome:
    """`outcome`, or for a row with a value its column cannot hold, a dead letter naming the field (the raw output
    and token counts kept): `type_overflow` past the type's range, else `semantic_invalid`."""
    if outcome.record is None:
        return outcome
    try:
        check_record(contract.layout, outcome.record)
    except FieldTypeError as exc:  # past the type's range: type_overflow; of a kind it cannot take: semantic_invalid
        outcome.record = None
        outcome.reason = DeadLetterReason.TYPE_OVERFLOW if exc.overflow else DeadLetterReason.SEMANTIC_INVALID
        outcome.error = {"message": str(exc), "field": exc.field,
                         "errors": [{"loc": [exc.field], "msg": str(exc), "type": outcome.reason}]}
    return outcome


def check_batch_types(outcomes: list[Outcome], contract: SchemaContract) -> list[Outcome]:
    """`check_types` of each outcome, the batch's rows typed together, once: a value fails the batch's typing exactly
    when it fails its own row's (each value goes through its field's converter into an array of the field's type),
    so only then is each row typed alone, to find which ones."""
    rows = [o.record for o in outcomes if o.record is not None]
    if not rows:
        return outcomes
    try:
        contract.layout.convert_rows(rows)
    except Exception:  # noqa: BLE001 - some row's value does not fit: each row is checked on its own
        return [check_types(o, contract) for o in outcomes]
    return outcomes


def settle(attempts: list[Outcome]) -> Outcome:
    """One outcome from a document's attempts (`model.retry`), in order: the first row, else the last attempt's
    dead letter, its error naming how many attempts ran and each one's reason."""
    if not attempts:
        raise ValueError("no attempt to settle")
    for outcome in attempts:
        if outcome.is_row:
            return outcome
    last = attempts[-1]
    if len(attempts) > 1:
        error = dict(last.error or {})
        error["message"] = f"after {len(attempts)} attempts: {error.get('message') or last.reason}"
        error["attempts"] = len(attempts)
        error["attempt_reasons"] = [o.reason for o in attempts]
        return dataclasses.replace(last, error=error, extra=dict(last.extra))
    return last


def error_json(error: dict[str, Any] | None) -> str | None:
    return None if error is None else json.dumps(error, ensure_ascii=False, default=str)
