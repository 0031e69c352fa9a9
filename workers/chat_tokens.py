"""A chat prompt's token ids, with the part before its last message tokenized once.

Every document of a schema shares everything before its own message: the system message with the schema, the
few-shot examples (on the sample job, about 1,000 of a prompt's 1,200 tokens). Tokenizing it again for every
document (and for every piece a long document is measured in, `workers.windowed`) was most of the actor's `prompt`
stage. `ChatTokens` keeps that head's tokens and tokenizes only the rest.

The split is exact by construction: a tokenizer cuts its text at its special tokens (`<|im_start|>`) before it reads
anything else, so the text is split at the last special token before the last message, and that token is tokenized
with both halves (`head + S` and `S + tail`, the one `S` dropped from the head): whatever the token does to the text
beside it (a stripped space, a prefix space of the first piece only) happens on both sides as in the whole. It is
also checked: the first time a head is used, its document's ids are made both ways, and a head whose two answers
differ is tokenized whole from then on. What the prompt is made of, and its ids, do not change.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from workers.document_tokens import DocumentCounter

KEPT = 32  # heads kept (a job has one per schema; a retry's feedback prompt adds one per document retried)


class ChatTokens:
    """`ids(tokenizer, messages, template)`: what `tokenizer.apply_chat_template(messages, chat_template=template,
    tokenize=True, add_generation_prompt=True)` gives, the head before the last message tokenized once."""

    def __init__(self, kept: int = KEPT) -> None:
        self.kept = kept
        # (the tokenizer's id, the head's text) → (the tokenizer, where the split is, the head's ids) or (the
        # tokenizer, None): each entry holds its tokenizer, so no other one takes its id while the entry is kept
        self._heads: OrderedDict[tuple[int, str], tuple[Any, tuple[int, list[int]] | None]] = OrderedDict()
        self._specials: dict[int, tuple[Any, list[str]]] = {}
        self._lock = threading.Lock()  # the actor's batch threads share it (workers.batches_in_flight)

    def ids(self, tokenizer: Any, messages: list[dict[str, str]], template: str,
            segment: Callable[[str], list[int] | None] | None = None) -> list[int]:
        """`segment(text)`, where given: `_fast_encode(tokenizer, text)` of the text from the split on, made another
        way (`DocumentTokens`), or None to encode it here."""
        text = tokenizer.apply_chat_template(messages, chat_template=template, tokenize=False,
                                             add_generation_prompt=True)
        content = messages[-1].get("content") if messages else None
        at = text.rfind(content) if isinstance(content, str) and content else -1
        if at <= 0 or getattr(tokenizer, "split_special_tokens", False):  # special tokens read as text: no split
            return encode(tokenizer, text)
        key = (id(tokenizer), text[:at])
        with self._lock:
            entry = self._heads.get(key)
            if entry is not None:
                self._heads.move_to_end(key)
        if entry is None:
            return self._first(tokenizer, text, key)
        head = entry[1]
        return encode(tokenizer, text) if head is None else _joined(tokenizer, text, head, segment)

    def _first(self, tokenizer: Any, text: str, key: tuple[int, str]) -> list[int]:
        """A head seen for the first time: its tokens kept if the split gives this prompt's ids exactly."""
        whole = encode(tokenizer, text)
        head = self._head(tokenizer, text, len(key[1]))
        if head is not None and _split(tokenizer, text, head) != whole:
            head = None
        with self._lock:
            self._heads[key] = (tokenizer, head)
            while len(self._heads) > self.kept:
                self._heads.popitem(last=False)
        return whole

    def _head(self, tokenizer: Any, text: str, end: int) -> tuple[int, list[int]] | None:
        """(where the last special token before `end` starts, the ids of the text up to it, that token included)."""
        best, size = -1, 0
        for token in self._special_tokens(tokenizer):
            found = text.rfind(token, 0, end)
            if found > best:
                best, size = found, len(token)
        if best <= 0:
            return None
        ids = _fast_encode(tokenizer, text[:best + size])
        return (best, ids) if ids else None

    def _special_tokens(self, tokenizer: Any) -> list[str]:
        """The tokenizer's special tokens that are matched as written (not normalized, no space stripped)."""
        kept = self._specials.get(id(tokenizer))
        if kept is None or kept[0] is not tokenizer:
            decoder = getattr(tokenizer, "added_tokens_decoder", None) or {}
            found = [str(t) for t in decoder.values() if getattr(t, "special", False)
                     and not getattr(t, "normalized", True) and not getattr(t, "lstrip", False)
                     and not getattr(t, "rstrip", False) and not getattr(t, "single_word", False) and str(t)]
            if len(self._specials) >= 8:  # tokenizers seen (an actor has one; tests load several)
                self._specials.clear()
            kept = self._specials[id(tokenizer)] = (tokenizer, found)
        return kept[1]


def _joined(tokenizer: Any, text: str, head: tuple[int, list[int]],
            segment: Callable[[str], list[int] | None] | None = None) -> list[int]:
    """The head's ids without its last (the special token), then those of the text from that token on."""
    joined = _split(tokenizer, text, head, segment)
    return encode(tokenizer, text) if joined is None else joined


def _split(tokenizer: Any, text: str, head: tuple[int, list[int]],
           segment: Callable[[str], list[int] | None] | None = None) -> list[int] | None:
    start, head_ids = head
    tail = segment(text[start:]) if segment is not None else None
    if tail is None:
        tail = _fast_encode(tokenizer, text[start:])
    if not tail or tail[0] != head_ids[-1]:  # the token both halves begin and end with is not one id
        return None
    return head_ids[:-1] + tail


def encode(tokenizer: Any, text: str) -> list[int]:
    """The text's ids as `apply_chat_template(tokenize=True)` makes them from its rendered text."""
    ids = tokenizer(text, add_special_tokens=False)
    return list(ids["input_ids"] if isinstance(ids, dict) or hasattr(ids, "input_ids") else ids)


def _fast_encode(tokenizer: Any, text: str) -> list[int]:
    """`encode`, by the Rust tokenizer behind a fast one directly where nothing would truncate or pad the text (what
    the wrapper's call adds is a tenth of a millisecond of Python; the split's first use checks the two agree). Its
    `encode_batch_fast` (tokenizers 0.20 on) of the one text where it has one: the same ids without the offsets,
    a fifth less CPU on the sample's text, spent on the calling thread as `encode`'s is."""
    backend = getattr(tokenizer, "_tokenizer", None)
    if backend is None or getattr(backend, "truncation", True) is not None or getattr(backend, "padding", True) \
            is not None or not hasattr(backend, "encode"):
        return encode(tokenizer, text)
    if hasattr(backend, "encode_batch_fast"):
        return list(backend.encode_batch_fast([text], add_special_tokens=False)[0].ids)
    return list(backend.encode(text, add_special_tokens=False).ids)


chat_tokens = ChatTokens()  # one per process: the engine's tokenizer is one


# ---------------------------------------------------------------- a document's tokens in its prompt, counted alone

# A long document is measured in pieces (workers.windowed): each piece's tokens as a window's document, that is
# its prompt's ids less the empty document's. Made as a prompt is (the chat template rendered, the text after the
# last special token encoded), that is a template rendering and a head lookup per piece, a fifth of the planning of
# a 20,000-character document. Where the prompt's text is its document written as it is between two texts that do
# not change with it, the piece is encoded between them alone: the same count.
SENTINEL = "\ue000document\ue001"  # private-use characters: written by no document
PROBES = ("x", "  Two words.\n\n", "\n\t{document} <b> \"quoted\" \\n é 中文 \u00a0\n \n", " ")
_counters: OrderedDict[tuple[int, str | None, str], tuple[Any, tuple[str, str, int] | None]] = OrderedDict()
_counters_lock = threading.Lock()


def document_counter(tokenizer: Any, render: Any) -> Any:
    """`count(document)`: `len(ids(render(document))) - len(ids(render("")))` (at least 0), `ids` being
    `workers.engine.vllm_engine.chat_token_ids` on `tokenizer` (`ChatTokens.ids` under a chat template), without
    rendering the chat template again; None where that is not safe (no chat template, special tokens read as text,
    a template that does not write the document as it is, a count that differs from the prompt's own on the
    probes). Checked once per prompt shape (its text with a placeholder document, its template)."""
    rendered = _rendered(tokenizer, render(SENTINEL))
    if rendered is None or rendered[1].count(SENTINEL) != 1 or getattr(tokenizer, "split_special_tokens", False):
        return None
    key = (id(tokenizer), rendered[0], rendered[1])
    with _counters_lock:
        entry = _counters.get(key)
        if entry is not None and entry[0] is tokenizer:
            _counters.move_to_end(key)
    if entry is None or entry[0] is not tokenizer:
        entry = (tokenizer, _checked(tokenizer, render, rendered[1]))
        with _counters_lock:
            _counters[key] = entry
            while len(_counters) > KEPT:
                _counters.popitem(last=False)
    parts = entry[1]
    if parts is None:
        return None
    head, tail, empty = parts
    return DocumentCounter(tokenizer, head, tail, empty, key, _fast_encode, prompt_ids)


def prompt_ids(tokenizer: Any, prompt: Any, segment: Callable[[str], list[int] | None] | None = None
               ) -> list[int] | None:
    """`workers.engine.vllm_engine.chat_token_ids(tokenizer, prompt)` where the prompt has a chat template (the
    text from the split on made by `segment`, where given: `ChatTokens.ids`); None without one."""
    found = _messages(tokenizer, prompt)
    if found is None:
        return None
    messages, template = found
    return chat_tokens.ids(tokenizer, messages, template, segment)


def _messages(tokenizer: Any, prompt: Any) -> tuple[list[dict[str, str]], str] | None:
    """(the messages, the chat template) `chat_token_ids` renders a prompt with; None without a chat template."""
    if isinstance(prompt, str):
        messages, template = [{"role": "user", "content": prompt}], None
    else:
        messages, template = list(prompt.messages), prompt.chat_template
    template = template or getattr(tokenizer, "chat_template", None)
    return (messages, template) if template else None


def _rendered(tokenizer: Any, prompt: Any) -> tuple[str, str] | None:
    """(the template, the prompt's text) as `chat_token_ids` renders it; None without a chat template."""
    found = _messages(tokenizer, prompt)
    if found is None:
        return None
    messages, template = found
    return template, tokenizer.apply_chat_template(messages, chat_template=template, tokenize=False,
                                                   add_generation_prompt=True)


def _own_count(tokenizer: Any, prompt: Any) -> int:
    """The prompt's ids as `workers.engine.vllm_engine.chat_token_ids` makes them (with a chat template), counted."""
    messages, template = _messages(tokenizer, prompt) or ([], "")
    return len(chat_tokens.ids(tokenizer, messages, template))


def _checked(tokenizer: Any, render: Any, text: str) -> tuple[str, str, int] | None:
    """(the text from the last special token before the document, the text after it, the empty document's count
    of that) where the probes are written as they are and counted as their prompts' own ids count them."""
    before, after = text.split(SENTINEL)
    for probe in PROBES:
        found = _rendered(tokenizer, render(probe))
        if found is None or found[1] != before + probe + after:
            return None
    start = chat_tokens._head(tokenizer, before, len(before))
    if start is None:
        return None
    head = before[start[0]:]
    empty = len(_fast_encode(tokenizer, head + after))
    reference = _own_count(tokenizer, render(""))
    for probe in PROBES:
        own = max(0, _own_count(tokenizer, render(probe)) - reference)
        if own != max(0, len(_fast_encode(tokenizer, head + probe + after)) - empty):
            return None
    return head, after, empty
