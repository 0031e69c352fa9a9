"""`Engine`: the one contract between an engine and what drives it (`workers.extractor.BatchExtractor`, the actor).

Every engine subclasses it, one per module: `VllmEngine` (`workers.engine.vllm_engine`: one vLLM `LLM`),
`EngineThread` (`workers.engine.thread`: one `VllmEngine` on a thread of its own), `HostedEngine`
(`workers.engine.host`: a shared host's engine, `EXTRACT_ENGINE_HOST=shared`) and `SimulatedEngine`
(`workers.simulated`: `model.path: simulated`). The extractor calls nothing else on an engine, and asks nothing
of it by probing (`getattr`, `hasattr`): what an engine cannot do has its answer here.

- abstract: `prompt_token_ids`, `warm`, `generate`;
- with a default an engine overrides where it can do more: `compile` (a grammar compiled while the engine is
  busy; by default `warm`'s request), `document_counter` (a long document's pieces counted without rendering
  each one's prompt; by default none), `use_sampling` (kept in `sampling_options` and
  `grammar_bounds`), `close` (nothing to stop);
- facts: `max_model_len`, `max_chars_per_token` (None: unknown, no text is refused untokenized), `init_seconds`,
  `tokenizer` (the model's, for the document's script density; None where the engine does not hold one here);
- hooks the actor sets for the live display: `on_request_done`, `on_tokens`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from workers.engine.outputs import Generation

# `model.sampling`'s extra `SamplingParams`, and the grammar-only string/array bounds (`use_sampling`).
GrammarBounds = tuple[int | str | None, int | str | None]
NO_BOUNDS: GrammarBounds = (None, None)


class Engine(ABC):
    """What `BatchExtractor` and `ExtractionActor` call on an engine (module docstring)."""

    max_model_len: int
    max_chars_per_token: int | None = None
    init_seconds: float = 0.0
    tokenizer: Any = None
    sampling_options: Mapping[str, Any] = MappingProxyType({})
    grammar_bounds: GrammarBounds = NO_BOUNDS
    on_request_done: Callable[[Any], None] | None = None
    on_tokens: Callable[[int], None] | None = None

    @abstractmethod
    def prompt_token_ids(self, prompt: Any) -> list[int]:
        """The prompt (a text, or a `workers.prompt.Chat`) as the token ids the engine is given."""

    @abstractmethod
    def warm(self, json_schema: dict[str, Any]) -> float:
        """Compile `json_schema`'s grammar before the first batch (a one-token request); the seconds it took. A
        schema the engine refuses raises, or comes back refused on its rows' requests."""

    @abstractmethod
    def generate(self, prompts: list[list[int]], json_schema: dict[str, Any] | None | Sequence[dict[str, Any] | None],
                 max_tokens: int, temperature: float, seeds: Sequence[int | None] | None = None) -> list[Generation]:
        """One `Generation` per prompt, in order: under one JSON Schema's grammar, one per prompt (a sequence), or
        free (None); `seeds`, one sampling seed per prompt (a resampling attempt)."""

    def document_counter(self, render: Callable[[str], Any]) -> Callable[[str], int] | None:
        """A document's tokens in the prompt `render(document)` makes, less the empty document's, counted as
        `prompt_token_ids` would count them but more cheaply (a long document's pieces, `workers.windowed`); None
        (by default): count with `prompt_token_ids`. One with a `document(text)` method (workers.document_tokens)
        also counts a document's pieces and tokenizes its windows' prompts from one encoding of it."""
        return None

    def compile(self, json_schema: dict[str, Any]) -> float | None:
        """Compile a grammar while the engine is busy decoding: the seconds, or None where it cannot now (the rows'
        own requests then compile it). Raises if the grammar is refused. This default is `warm`'s request, which
        queues behind the documents in flight; an engine that compiles without a request overrides it."""
        return self.warm(json_schema)

    def use_sampling(self, options: Mapping[str, Any], grammar_bounds: GrammarBounds = NO_BOUNDS) -> None:
        """Extra `SamplingParams` for every request (model.sampling: repetition_penalty, top_p, seed, stop,
        logprobs) and the grammar-only string/array bounds (schema_policy.max_string_length / max_array_items)."""
        self.sampling_options = dict(options)
        self.grammar_bounds = (grammar_bounds[0], grammar_bounds[1])

    def close(self) -> None:  # noqa: B027 - an engine with nothing to stop needs no override
        """Stop the engine and free what it holds; an engine with nothing of its own to stop does nothing."""
