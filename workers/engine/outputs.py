"""What an engine hands back: `Generation`s, made from vLLM's `RequestOutput`s; and what a request carries
(its structured-output parameters)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import structlog

from schemas.patterns import with_ascii_patterns

log = structlog.get_logger("workers.engine")


@dataclass(frozen=True)
class Generation:
    text: str
    finish_reason: str | None  # vLLM's ("stop", "length", "error"), or "refused": the engine would not take it
    prompt_tokens: int
    output_tokens: int
    error: str | None = None  # why a request was refused or failed (finish_reason "refused" or "error")
    # With SamplingParams.logprobs (output.confidence): each sampled token's text and log-probability.
    token_pieces: tuple[str, ...] = ()
    token_logprobs: tuple[float, ...] = ()
    # The text is the output's JSON and nothing around it, as under a grammar, though the run is unconstrained (the
    # simulated engine's records): its tokens score its leaves as a constrained output's do (workers.classify).
    whole_json: bool = False


REFUSED = "refused"
ERROR_MESSAGE = ("the engine ended this request with an error (vLLM finish_reason 'error'; under a grammar, "
                 "the grammar failed to compile)")


@dataclass(frozen=True)
class Refused:
    """A request the engine would not add (e.g. a JSON Schema feature its grammar backend refuses)."""

    message: str


def generations(prompts: list[list[int]], outputs: list[Any]) -> list[Generation]:
    """vLLM `RequestOutput`s (one completion each) as `Generation`s, in prompt order."""
    result = []
    for ids, o in zip(prompts, outputs, strict=True):
        if isinstance(o, Refused):
            result.append(Generation("", REFUSED, len(ids), 0, o.message))
            continue
        c = o.outputs[0]
        pieces, logprobs = _sampled(c)
        result.append(Generation(text=c.text, finish_reason=c.finish_reason, prompt_tokens=len(ids),
                                 output_tokens=len(c.token_ids),
                                 error=ERROR_MESSAGE if c.finish_reason == "error" else None,
                                 token_pieces=pieces, token_logprobs=logprobs))
    return result


def _sampled(completion: Any) -> tuple[tuple[str, ...], tuple[float, ...]]:
    """Each sampled token's decoded text and log-probability, where the request asked for them (else empty)."""
    entries = getattr(completion, "logprobs", None)
    if not entries:
        return (), ()
    pieces, logprobs = [], []
    for token_id, entry in zip(completion.token_ids, entries, strict=False):
        chosen = entry.get(token_id) if entry else None
        if chosen is None:
            return (), ()
        pieces.append(chosen.decoded_token or "")
        logprobs.append(float(chosen.logprob))
    return tuple(pieces), tuple(logprobs)


def structured_params(json_schema: dict[str, Any], backend: str) -> Any:
    """A request's `StructuredOutputsParams`: the JSON Schema, or, where grounding gave a long document's field
    a substring grammar (schemas.substring), the whole schema as XGrammar EBNF with that field's rules; a
    backend other than XGrammar gets the field as a plain string instead. On XGrammar, a schema that writes a
    long enum twice (`schemas.cheap_grammar.repeated_enums`: a long document's window) is sent as EBNF too, and
    every EBNF with each rule written once (`shared_rules`): the same language, compiled faster."""
    from vllm.sampling_params import StructuredOutputsParams

    from schemas.cheap_grammar import repeated_enums, shared_rules
    from schemas.substring import has_substring, to_ebnf, without_substrings

    if has_substring(json_schema):
        if backend == "xgrammar":
            try:  # patterns in ASCII, as `grammar_spec` writes them: XGrammar misreads raw non-ASCII classes
                return StructuredOutputsParams(grammar=shared_rules(to_ebnf(with_ascii_patterns(json_schema))))
            except Exception as exc:  # noqa: BLE001 - a narrowing of the grammar only: decode the field as a string
                log.warning("engine.substring_grammar_failed", error=f"{type(exc).__name__}: {exc}",
                            action="the field decodes as a plain string")
        json_schema = without_substrings(json_schema)
    if backend == "xgrammar" and repeated_enums(json_schema):
        try:
            return StructuredOutputsParams(grammar=shared_rules(to_ebnf(with_ascii_patterns(json_schema))))
        except Exception as exc:  # noqa: BLE001 - the same grammar, only slower to compile: send the schema
            log.warning("engine.cheap_grammar_failed", error=f"{type(exc).__name__}: {exc}",
                        action="the schema is sent as JSON Schema")
    return StructuredOutputsParams(json=grammar_spec(json_schema))


def grammar_spec(json_schema: dict[str, Any]) -> str:
    """The schema text a request carries. vLLM caches compiled grammars under it, so `VllmEngine.compile`
    must produce the very same text for a request to find its grammar ready. Patterns are written in ASCII
    (`schemas.patterns.with_ascii_patterns`): the same meaning, read right by XGrammar."""
    return json.dumps(with_ascii_patterns(json_schema))


def longest_token_chars(tokenizer: Any) -> int | None:
    """The most characters of text one token of `tokenizer` can stand for, from its whole vocabulary (None if it
    cannot be read). A text of more than `n` × this characters has more than `n` tokens, so it can be refused
    without tokenizing it. Each token counts as the longer of its vocabulary string and its decoded text: a
    byte-level token's string has one character per byte, a SentencePiece token's its `▁`; either is at least
    the characters of text it covers. Special tokens are included (a text may spell one), which only loosens
    the bound."""
    try:
        ids = [[i] for i in range(len(tokenizer))]
        decoded = tokenizer.batch_decode(ids, skip_special_tokens=False)
        pieces = tokenizer.convert_ids_to_tokens(list(range(len(tokenizer))))
        longest = max(max((len(t) for t in decoded), default=0),
                      max((len(p) for p in pieces if isinstance(p, str)), default=0))
    except Exception as exc:  # noqa: BLE001 - a tokenizer without a readable vocabulary: documents are tokenized
        log.warning("engine.no_token_bound", error=f"{type(exc).__name__}: {exc}")
        return None
    return max(1, longest)


class _Output:
    """What the actor's per-request hook reads of a finished request (`outputs[0].token_ids`), as vLLM's."""

    __slots__ = ("outputs",)

    def __init__(self, tokens: int) -> None:
        self.outputs = (_Completion(tokens),)


class _Completion:
    __slots__ = ("token_ids",)

    def __init__(self, tokens: int) -> None:
        self.token_ids = range(tokens)


def tell_hooks(engine: Any, generation: Generation) -> None:
    """An engine's `on_tokens` and `on_request_done` hooks (the live display), for a request that finished as
    `generation`: for the engines that do not see vLLM's step outputs (the simulated one, a shared host's client)."""
    for hook, value in ((engine.on_tokens, generation.output_tokens),
                        (engine.on_request_done, _Output(generation.output_tokens))):
        if hook is not None:
            try:
                hook(value)
            except Exception:  # noqa: BLE001 - the display is best effort, as in EngineThread
                pass
