"""A long document's pieces and windows tokenized from one encoding of the whole document.

Planning a long document's windows (workers.windows) counts each of its pieces, then tokenizes each window's prompt
to check that it fits (a window too long is shortened and tokenized again); with the fit check of the whole
document before it, that was about 3.5 times the document's text through the tokenizer (`prompt`, the actor's
largest stage on a 20,000-character document). Here the document is encoded once, with its tokens' offsets, and a
piece's or a window's tokens are that encoding's tokens between two cuts, with only the text before the first cut
and after the last one encoded apart.

Why that is the same: a byte-level BPE tokenizer of the GPT-2 kind (no normalizer; pre-tokenizer `ByteLevel` with
its regex `'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+`, no prefix space; a
`BPE` model without dropout) first cuts its text at its added tokens, then cuts each part into words by that regex
scanned left to right, then encodes each word on its own. A cut is a space (` `) right after a letter, digit or
printable ASCII character other than the space: no alternative of the regex matches across it (only ` ?...` opens
with a space, and nothing after a non-space character is one), every alternative that reads the space where it
stops would stop there at the end of the text too, and the regex looks at nothing behind where it starts. So any
text's words end at each of its cuts whatever comes before or after them: the words of `text[c:d]` between two
cuts are the same in every text that writes it, and so are its tokens. A text is used this way only when it writes
none of the tokenizer's added tokens, and when none of them holds a space (so none can be found across a cut);
other tokenizers, and a document writing an added token, are tokenized as before. The first windows of each prompt
shape are also made both ways and compared (`VERIFIED`); a difference turns this off for that prompt shape.
"""

from __future__ import annotations

import json
import re
import threading
from bisect import bisect_left
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from itertools import accumulate
from typing import Any

Encode = Callable[[Any, str], list[int]]  # (tokenizer, text) → its ids
# (tokenizer, prompt, segment) → the prompt's ids
ChatIds = Callable[[Any, Any, Callable[[str], list[int] | None] | None], list[int] | None]

BYTE_LEVEL = {"type": "ByteLevel", "add_prefix_space": False, "use_regex": True}
_WIDE = re.compile(r"[^\x00-\x7f]")
VERIFIED = 4  # a prompt shape's first answers made both ways (the first long document's own prompt, whole, and more)

# id → (tokenizer, (its added tokens, each id's bytes) or None)
_tokenizers: dict[int, tuple[Any, tuple[tuple[str, ...], list[int]] | None]] = {}
_answers: dict[Any, int] = {}  # a counter's key → answers checked so far, -1 once one differed
_lock = threading.Lock()


def added_tokens(tokenizer: Any) -> tuple[str, ...] | None:
    """The texts of the tokenizer's added tokens where its encodings can be cut (module docstring), else None."""
    found = _cut_info(tokenizer)
    return None if found is None else found[0]


def _cut_info(tokenizer: Any) -> tuple[tuple[str, ...], list[int]] | None:
    """(the added tokens' texts, the bytes of the text each id stands for) where the encodings can be cut."""
    with _lock:
        kept = _tokenizers.get(id(tokenizer))
    if kept is None or kept[0] is not tokenizer:
        kept = (tokenizer, _cuttable(tokenizer))
        with _lock:
            if len(_tokenizers) >= 8:  # tokenizers seen (an actor has one; tests load several)
                _tokenizers.clear()
            _tokenizers[id(tokenizer)] = kept
    return kept[1]


def _cuttable(tokenizer: Any) -> tuple[tuple[str, ...], list[int]] | None:
    backend = getattr(tokenizer, "_tokenizer", None)
    if backend is None or getattr(tokenizer, "split_special_tokens", False) or not hasattr(backend, "encode"):
        return None
    try:
        if backend.truncation is not None or backend.padding is not None or backend.normalizer is not None:
            return None
        pre = json.loads(backend.pre_tokenizer.__getstate__())
        model = backend.model
        added = tuple(str(getattr(t, "content", t)) for t in backend.get_added_tokens_decoder().values())
    except Exception:  # noqa: BLE001 - not a `tokenizers` tokenizer as expected: tokenized as before
        return None
    if not isinstance(pre, dict) or any(pre.get(k) != v for k, v in BYTE_LEVEL.items()):
        return None
    if type(model).__name__ != "BPE" or getattr(model, "dropout", None) is not None:
        return None
    if any(not t or any(ch.isspace() for ch in t) for t in added):
        return None
    # each id's bytes (a byte-level token writes one byte per character of its text, an added token its own text),
    # filled in as ids are met (`_bytes_of`): reading the whole vocabulary at once cost the first long document 27 ms
    lengths = [-1] * backend.get_vocab_size(with_added_tokens=True)
    probe = "Total: 12,345.67 \u20ac \u00e9t\u00e9 \u4e2d\u6587 \U0001f600\n\n  x" + (added[0] if added else "")
    ids = backend.encode_batch_fast([probe], add_special_tokens=False)[0].ids if hasattr(backend, "encode_batch_fast") \
        else backend.encode(probe, add_special_tokens=False).ids
    got = _bytes_of(tokenizer, ids, lengths, added)
    if got is None or sum(got) != len(probe.encode()):
        return None
    return added, lengths


def _bytes_of(tokenizer: Any, ids: list[int], lengths: list[int], added: tuple[str, ...]) -> list[int] | None:
    """Each id's bytes (`lengths`, filled in here for ids not met before); None for an id the tokenizer lacks."""
    try:
        got = list(map(lengths.__getitem__, ids))
        if got and min(got) < 0:
            backend = tokenizer._tokenizer
            for i in set(ids):
                if lengths[i] < 0:
                    token = backend.id_to_token(i)
                    if token is None:
                        return None
                    lengths[i] = len(token.encode()) if token in added else len(token)
            got = list(map(lengths.__getitem__, ids))
    except IndexError:
        return None
    return got


def _after_cut(ch: str) -> bool:
    """Whether a space after `ch` is a cut: `ch` is no white space in any regex's sense."""
    return "!" <= ch <= "~" or ch.isalnum()


class DocumentCounter:
    """`count(document)`: `len(_fast_encode(head + document + tail)) - empty`, at least 0 (the document's tokens in
    its prompt, `workers.chat_tokens.document_counter`); `document(text)`: a `DocumentTokens` of `text`, or None
    where its tokens cannot be cut."""

    def __init__(self, tokenizer: Any, head: str, tail: str, empty: int, key: Any, encode: Encode, chat_ids: ChatIds,
                 lock: AbstractContextManager[Any] | None = None) -> None:
        self.tokenizer, self.head, self.tail, self.empty, self.key = tokenizer, head, tail, empty, key
        self.encode, self.chat_ids = encode, chat_ids  # workers.chat_tokens: `_fast_encode`, `prompt_ids`
        self.lock = lock if lock is not None else nullcontext()

    def locked(self, lock: AbstractContextManager[Any]) -> DocumentCounter:
        """This counter taking `lock` around each use of the tokenizer (workers.engine.thread)."""
        return DocumentCounter(self.tokenizer, self.head, self.tail, self.empty, self.key, self.encode,
                               self.chat_ids, lock)

    def __call__(self, document: str) -> int:
        with self.lock:
            return self.plain(document)

    def plain(self, document: str) -> int:
        return max(0, len(self.encode(self.tokenizer, self.head + document + self.tail)) - self.empty)

    def document(self, text: str) -> DocumentTokens | None:
        added = added_tokens(self.tokenizer)
        if added is None or _answers.get(self.key, 0) < 0 or any(t in text for t in added):
            return None
        return DocumentTokens(self, text)


class DocumentTokens:
    """One document's pieces counted (`count`) and its windows' prompts tokenized (`prompt_ids`) from one encoding
    of `head + document + tail` (module docstring): the same answers as `DocumentCounter.plain` and
    `workers.engine.vllm_engine.chat_token_ids` (None where that has no chat template to render)."""

    def __init__(self, counter: DocumentCounter, document: str) -> None:
        self.counter, self.text = counter, document
        self._ids: list[int] = []
        self._starts: list[int] | None = None  # where each token of the encoding starts (bytes), then its end
        self._wide: tuple[list[int], list[int]] | None = None  # the non-ASCII characters: where, bytes before them

    def count(self, start: int, end: int) -> int:
        """`counter(text[start:end])`."""
        counter = self.counter
        with counter.lock:
            found = self._middle(start, end)
            if found is None:
                return counter.plain(self.text[start:end])
            c, d, i, j = found
            tokens = len(counter.encode(counter.tokenizer, counter.head + self.text[start:c])) + j - i + \
                len(counter.encode(counter.tokenizer, self.text[d:end] + counter.tail))
            answer = max(0, tokens - counter.empty)
            if _answers.get(counter.key, 0) < VERIFIED:
                answer = self._checked(answer, counter.plain(self.text[start:end]))
            return answer

    def prompt_ids(self, chat: Any, start: int, end: int) -> list[int] | None:
        """`chat_token_ids(tokenizer, chat)` of `chat`, the prompt of `text[start:end]`; None where the prompt has
        no chat template (the caller tokenizes it)."""
        counter = self.counter
        with counter.lock:
            ids = counter.chat_ids(counter.tokenizer, chat, lambda s: self._segment(s, start, end))
            if ids is not None and _answers.get(counter.key, 0) < VERIFIED:
                ids = self._checked(ids, counter.chat_ids(counter.tokenizer, chat, None))
            return ids

    def _segment(self, segment: str, start: int, end: int) -> list[int] | None:
        """`_fast_encode(segment)` where `segment` ends with `text[start:end] + tail`, else None."""
        tail = self.counter.tail
        before = len(segment) - len(tail) - (end - start)
        if before < 0 or not segment.endswith(tail) or not segment.startswith(self.text[start:end], before):
            return None
        found = self._middle(start, end)
        if found is None:
            return None
        c, d, i, j = found
        tokenizer, encode = self.counter.tokenizer, self.counter.encode
        return encode(tokenizer, segment[:before] + self.text[start:c]) + self._ids[i:j] + \
            encode(tokenizer, self.text[d:end] + tail)

    def _middle(self, start: int, end: int) -> tuple[int, int, int, int] | None:
        """(c, d, i, j): the first and the last cut in `text[start:end]` (start < c <= d < end) and the tokens of
        the whole document's encoding from c to d (`_ids[i:j]`); None without a cut."""
        text = self.text
        c = text.find(" ", start + 1, end)
        while c >= 0 and not _after_cut(text[c - 1]):
            c = text.find(" ", c + 1, end)
        if c < 0:
            return None
        d = text.rfind(" ", c, end)
        while d > c and not _after_cut(text[d - 1]):
            d = text.rfind(" ", c, d)
        starts = self._encoded()
        at_c, at_d = self._byte(c), self._byte(d)
        i, j = bisect_left(starts, at_c), bisect_left(starts, at_d)
        if j >= len(self._ids) or starts[i] != at_c or starts[j] != at_d:
            return None  # no token starts at a cut (not a tokenizer of this kind after all): encoded whole
        return c, d, i, j

    def _encoded(self) -> list[int]:
        """Where each token of `head + text + tail`'s encoding starts, in bytes (and the encoding's end)."""
        if self._starts is None:
            counter = self.counter
            whole = counter.head + self.text + counter.tail
            self._ids = counter.encode(counter.tokenizer, whole)
            info = _cut_info(counter.tokenizer)
            got = _bytes_of(counter.tokenizer, self._ids, info[1], info[0]) if info is not None else None
            starts = list(accumulate(got, initial=0)) if got is not None else [-1]
            # the tokens' bytes are the text's, or no token is taken as starting anywhere
            self._starts = starts if starts[-1] == len(whole.encode()) else [-1] * (len(self._ids) + 1)
        return self._starts

    def _byte(self, at: int) -> int:
        """Where `text[at]` is in the bytes of `head + text + tail`."""
        if self._wide is None:
            text = self.text
            where = [] if text.isascii() else [m.start() for m in _WIDE.finditer(text)]
            before, extra = [], len(self.counter.head.encode())
            for position in where:
                before.append(extra)
                extra += len(text[position].encode()) - 1
            self._wide = (where, before + [extra])
        where, before = self._wide
        k = bisect_left(where, at)  # the non-ASCII characters before `at`
        return at + (before[k] if k < len(where) else before[-1])

    def _checked(self, answer: Any, plain: Any) -> Any:
        """The plain answer; counted as checked where the two agree, else this prompt shape cut no more."""
        key = self.counter.key
        with _lock:
            seen = _answers.get(key, 0)
            if seen >= 0:
                _answers[key] = seen + 1 if answer == plain else -1
            if len(_answers) > 64:
                _answers.pop(next(iter(_answers)))
        return plain
