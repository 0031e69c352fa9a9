"""The extractor's side of windows: a long document's window requests, and its one outcome from theirs.

`plan` cuts a document whose prompt does not fit into windows (workers.windows), each with its prompt.
`document_outcome` makes the document's one outcome from its windows' outcomes:
- a window the engine failed (`engine_error`) or whose schema it refused (`schema_unsupported`) fails the
  document, with that reason;
- a window whose output fails its checks (truncated, not JSON, refused by the schema or a validator against its
  own text) adds nothing; a `low_confidence` window counts with its record (the threshold is the document's);
- no window with a record: a dead letter with the first failing window's reason;
- else the windows' records are merged (workers.merge, with the document's defined terms), and the
  merged record is checked as any output is, against the whole schema and the whole document; it fails as a
  dead letter like any other.
Every window's output is kept in the document's raw output (a JSON list, one entry per window), rows and dead
letters alike; tokens are the windows' sums.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from schemas.contract import SchemaContract
from workers.classify import Outcome, _below, classify, dead_letter
from workers.engine import Generation
from workers.merge import DefinedTerms, WindowOutput, merge
from workers.outcome import DeadLetterReason
from workers.windows import MIN_WINDOW_TOKENS, Splitter, TooManyWindows, Window, WindowPolicy

FATAL_WINDOW = (DeadLetterReason.ENGINE_ERROR, DeadLetterReason.SCHEMA_UNSUPPORTED)


@dataclass
class WindowRequest:
    """One window's request: the window, its text, its prompt (chat and token ids)."""

    window: Window
    text: str
    chat: Any
    prompt: list[int]


def plan(text: str, render: Callable[[str], Any], token_ids: Callable[[Any], list[int]], room: int,
         policy: WindowPolicy, counter: Callable[[str], int] | None = None,
         tokens: Any = None, empty: int | None = None) -> list[WindowRequest] | Outcome:
    """The window requests of `text`, or an `input_too_long` dead letter. `render(document)` is the prompt of a
    document, `token_ids(prompt)` its tokens, `room` what max_model_len leaves beside max_tokens; `counter(piece)`,
    where given, is `count` below made more cheaply (`Engine.document_counter`); `tokens`, where given or made by
    the counter (`document(text)`), counts the pieces and tokenizes the windows' prompts from one encoding of the
    document (workers.document_tokens: the same answers); `empty`, where the caller keeps it, the tokens of
    `render("")`."""
    if tokens is None and counter is not None and hasattr(counter, "document"):
        tokens = counter.document(text)
    empty = len(token_ids(render(""))) if empty is None else empty
    budget = room - empty
    if budget < MIN_WINDOW_TOKENS:
        return dead_letter(DeadLetterReason.INPUT_TOO_LONG, f"the prompt without its document leaves {budget} "
                           f"tokens of max_model_len beside max_tokens, fewer than {MIN_WINDOW_TOKENS}: no window "
                           "can hold any of the document", characters=len(text), window_tokens=budget)
    if policy.window_tokens is not None:
        budget = min(budget, policy.window_tokens)
    prompts: dict[tuple[int, int], tuple[Any, list[int]]] = {}

    def window_ids(chat: Any, start: int, end: int) -> list[int]:
        ids = tokens.prompt_ids(chat, start, end) if tokens is not None else None
        return token_ids(chat) if ids is None else ids

    def fits(start: int, end: int) -> bool:
        chat = render(text[start:end])
        ids = window_ids(chat, start, end)
        prompts[(start, end)] = (chat, ids)
        return len(ids) <= room

    def count(piece: str) -> int:
        return max(0, len(token_ids(render(piece))) - empty)

    try:
        windows = Splitter(text, budget, policy, counter or count, fits,
                           tokens.count if tokens is not None else None).windows()
    except TooManyWindows as exc:
        return dead_letter(DeadLetterReason.INPUT_TOO_LONG, str(exc), characters=len(text),
                           max_windows=policy.max_windows, window_tokens=budget)
    requests = []
    for window in windows:
        chat, ids = prompts.get((window.start, window.end)) or (None, None)
        if ids is None:
            chat = render(text[window.start:window.end])
            ids = window_ids(chat, window.start, window.end)
        requests.append(WindowRequest(window, text[window.start:window.end], chat, ids))
    return requests


def max_characters(max_model_len: int, per_token: int | None, policy: WindowPolicy) -> int | None:
    """A document longer than this cannot fit `max_windows` windows at any tokenization: refused untokenized."""
    if not per_token:
        return None
    return policy.max_windows * min(max_model_len, policy.window_tokens or max_model_len) * per_token


def document_outcome(document: str, document_id: Any, windows: list[Window], outcomes: list[Outcome],
                     contract: SchemaContract, min_confidence: float | None) -> Outcome:
    """The document's one outcome from its windows' (module docstring)."""
    raw = json.dumps([{"window": w.index, "start": w.start, "end": w.end, "reason": o.reason,
                       "output": o.raw_output} for w, o in zip(windows, outcomes, strict=True)],
                     ensure_ascii=False)
    tokens = {"prompt_tokens": sum(o.prompt_tokens or 0 for o in outcomes),
              "output_tokens": sum(o.output_tokens or 0 for o in outcomes)}
    fatal = next(((w, o) for w, o in zip(windows, outcomes, strict=True) if o.reason in FATAL_WINDOW), None)
    if fatal is not None:
        return _failed(fatal[1].reason, fatal[0], fatal[1], len(windows), raw, tokens)
    usable = [_usable(w, o) for w, o in zip(windows, outcomes, strict=True)]
    outputs = [u for u in usable if u is not None]
    if not outputs:
        return _failed(outcomes[0].reason, windows[0], outcomes[0], len(windows), raw, tokens)
    merged = merge(outputs, DefinedTerms(document))
    generation = Generation(text=json.dumps(merged.record, ensure_ascii=False), finish_reason="stop", **tokens)
    outcome = classify(generation, contract, {"document": document, "document_id": document_id}, constrained=False,
                       repeated_items="keep")
    outcome.raw_output = raw
    outcome.extra["windows"] = len(windows)
    if outcome.is_row:
        outcome.confidence = merged.confidence or None
        outcome.spans = merged.spans
        outcome.extra["window_of"] = merged.windows
        if min_confidence is not None and outcome.confidence:
            _below(outcome, min_confidence)
    else:
        outcome.error = {**(outcome.error or {}), "windows": len(windows), "merged_record": merged.record}
    return outcome


def _usable(window: Window, outcome: Outcome) -> WindowOutput | None:
    """A window's record with its confidence and spans; a `low_confidence` window's from its error."""
    if outcome.is_row:
        return WindowOutput(window, outcome.record or {}, dict(outcome.confidence or {}), dict(outcome.spans or {}))
    if outcome.reason == DeadLetterReason.LOW_CONFIDENCE and outcome.error:
        error = outcome.error
        return WindowOutput(window, error.get("record") or {}, dict(error.get("confidences") or {}),
                            dict(error.get("spans") or {}))
    return None


def _failed(reason: str | None, window: Window, outcome: Outcome, count: int, raw: str,
            tokens: dict[str, int]) -> Outcome:
    message = (outcome.error or {}).get("message") or reason
    failed = dead_letter(reason or DeadLetterReason.ENGINE_ERROR,
                         f"window {window.index + 1} of {count} (characters {window.start}-{window.end}): {message}",
                         windows=count, window=window.index, errors=(outcome.error or {}).get("errors"))
    failed.raw_output = raw
    failed.finish_reason = outcome.finish_reason
    failed.prompt_tokens, failed.output_tokens = tokens["prompt_tokens"], tokens["output_tokens"]
    failed.extra["windows"] = count
    return failed


class Requests:
    """A batch's requests, in order: one per document that fits its prompt, one per window of a long one (a
    document's windows together, so they reach the engine together and share its prefix cache)."""

    def __init__(self) -> None:
        self.document: list[int] = []  # the batch index of each request's document
        self.ids: list[Any] = []
        self.texts: list[str] = []
        self.chats: list[Any] = []
        self.prompts: list[list[int]] = []
        self.contracts: list[SchemaContract] = []
        self.windows: list[Window | None] = []

    def add(self, document: int, doc_id: Any, text: str, chat: Any, prompt: list[int], contract: SchemaContract,
            window: Window | None = None) -> None:
        self.document.append(document)
        self.ids.append(doc_id)
        self.texts.append(text)
        self.chats.append(chat)
        self.prompts.append(prompt)
        self.contracts.append(contract)
        self.windows.append(window)

    def contract_of(self, document: int) -> SchemaContract:
        return self.contracts[self.document.index(document)]

    def documents(self, settled: list[Outcome], texts: Any, ids: Any,
                  min_confidence: float | None) -> list[tuple[int, Outcome]]:
        """(document index, its one outcome) from the requests' outcomes (`settled`, one per request)."""
        groups: dict[int, list[int]] = {}
        for request, document in enumerate(self.document):
            groups.setdefault(document, []).append(request)
        out = []
        for document, requests in groups.items():
            if self.windows[requests[0]] is None:
                outcome = settled[requests[0]]
                outcome.extra.setdefault("windows", 1)
            else:
                windows = [self.windows[r] for r in requests]
                outcome = document_outcome(texts[document], ids[document], windows,  # type: ignore[arg-type]
                                           [settled[r] for r in requests], self.contracts[requests[0]],
                                           min_confidence)
                outcome.extra["schema_hash"] = self.contracts[requests[0]].hash
            out.append((document, outcome))
        return out
