"""Long documents read in windows (`input.long_documents: windows`): a document whose prompt does not fit the
context is cut into windows that do, each one a request of its own under the same schema.

Where a window may end: at a paragraph (a blank line), else at a sentence (pysbd, a rule-based sentence splitter
for 22 languages; workers.sentence_split gives its sentences without its cost that grows with the square of a
paragraph's length), else, for a sentence longer than a window, at a space (or anywhere, for text without one).
A window holds as many whole pieces as its token budget takes:

    budget = min(window_tokens, max_model_len − max_tokens − the prompt's own tokens (template, examples))

and the next window starts with the last pieces of the one before, up to `overlap` × budget tokens, so a value
written across the cut is whole in one of them. A piece's tokens are counted as the engine counts a prompt (its
prompt less the empty document's), and each window's own prompt is counted again before it is sent: one that
still does not fit loses its last pieces until it does (`SHRINK_STEPS`).

Windows are offsets into the document (`Window.start`, `Window.end`): a window's spans are moved by its start to
be offsets into the whole document (workers.merge). Counting stops once a document needs more than `max_windows`
windows (it is then `input_too_long`), so a huge document is never tokenized whole; one longer than
`max_windows` windows at the tokenizer's longest token is refused before any counting at all.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

WINDOWS = "windows"
DEAD_LETTER = "dead_letter"
LONG_DOCUMENTS = (WINDOWS, DEAD_LETTER)
DEFAULT_OVERLAP = 0.1  # of a window's budget, in tokens
# 64 windows of 8,192 tokens at the bundled tokenizer's longest token (81 characters) is 42 MB of text: a
# 150 MB document (or the 51 MB poison document of the tests) is refused before it is tokenized.
DEFAULT_MAX_WINDOWS = 64
MIN_WINDOW_TOKENS = 32  # below this a window holds no useful text: the prompt itself is too long
# A window whose prompt is over max_model_len loses its last piece, checked again, up to this many times, then half
# its pieces at a time. Its pieces' counts apart miss about a token a paragraph (a tokenizer's `\n\n` before a
# word is two tokens, one at the end of a text): halving at once made 55 windows of the multilingual job's eight
# 20,000-character documents, 41 of them halved, where 4-5 each hold them.
SHRINK_STEPS = 3

_PARAGRAPH = re.compile(r"\n[ \t\r\f\v]*\n\s*")
_SPACE = re.compile(r"\s+")
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af]")


@dataclass(frozen=True)
class Window:
    """One window of a document: `text[start:end]`, its index and how many windows the document has."""

    index: int
    start: int
    end: int


@dataclass(frozen=True)
class WindowPolicy:
    """`input.window_tokens` (None: as many as fit), `input.window_overlap`, `input.max_windows`."""

    window_tokens: int | None = None
    overlap: float = DEFAULT_OVERLAP
    max_windows: int = DEFAULT_MAX_WINDOWS


class TooManyWindows(Exception):
    """The document needs more than `max_windows` windows (or its prompt leaves no room for any text)."""


def paragraphs(text: str, start: int = 0, end: int | None = None) -> list[tuple[int, int]]:
    """`text[start:end]` as contiguous paragraph spans, each with the blank lines after it."""
    end = len(text) if end is None else end
    cuts = [m.end() for m in _PARAGRAPH.finditer(text, start, end) if m.end() < end]
    bounds = [start, *cuts, end]
    return [(a, b) for a, b in zip(bounds, bounds[1:], strict=False) if b > a]


def sentences(text: str, start: int, end: int) -> list[tuple[int, int]]:
    """`text[start:end]` as contiguous sentence spans (pysbd; Chinese, Japanese or Korean rules where the text is
    mostly in those scripts)."""
    from workers.sentence_split import segmenter

    piece = text[start:end]
    cjk = len(_CJK.findall(piece[:2000])) > len(piece[:2000]) // 4
    spans, cursor = [], start
    for sentence in segmenter("zh" if cjk else "en").segment(piece):
        found = text.find(sentence, cursor, end) if sentence else -1
        if found < 0:
            continue
        if found > cursor and spans:  # text the splitter left out (spaces) goes with the sentence before
            spans[-1] = (spans[-1][0], found)
        spans.append((cursor if not spans else found, found + len(sentence)))
        cursor = found + len(sentence)
    if not spans:
        return [(start, end)]
    spans[-1] = (spans[-1][0], end)
    return spans


def hard_cuts(text: str, start: int, end: int, chars: int) -> list[tuple[int, int]]:
    """`text[start:end]` in pieces of at most `chars` characters, cut after a space where there is one."""
    out = []
    while end - start > chars:
        cut = start + chars
        spaces = [m.end() for m in _SPACE.finditer(text, start + chars // 2, cut)]
        cut = spaces[-1] if spaces else cut
        out.append((start, cut))
        start = cut
    out.append((start, end))
    return out


class Splitter:
    """Cuts one document into windows; `count(text)` is the tokens of `text` as a window's document (its prompt
    less the prompt of an empty document), `fits(start, end)` whether that window's whole prompt fits."""

    def __init__(self, text: str, budget: int, policy: WindowPolicy, count: Callable[[str], int],
                 fits: Callable[[int, int], bool], count_at: Callable[[int, int], int] | None = None) -> None:
        if budget < 1:
            raise TooManyWindows("a window of no tokens holds none of the document")
        self.text, self.budget, self.policy, self.count, self.fits = text, budget, policy, count, fits
        self.count_at = count_at  # `count(text[start:end])` from where the piece is (workers.document_tokens)
        self.overlap = int(budget * policy.overlap)
        self._counts: dict[str, int] = {}  # piece → its tokens: a piece the document writes again is not counted again

    def tokens(self, start: int, end: int) -> int:
        """`count(text[start:end])`, once per distinct piece of the document (a table's repeated lines, a footer
        on every page, a clause written again: `count` depends on the piece's text only)."""
        piece = self.text[start:end]
        found = self._counts.get(piece)
        if found is None:
            found = self._counts[piece] = self.count(piece) if self.count_at is None else self.count_at(start, end)
        return found

    def pieces(self, start: int, end: int, level: int = 0) -> list[tuple[int, int, int]]:
        """(start, end, tokens) of pieces of `text[start:end]` that each fit the budget: paragraphs, sentences,
        then cuts at spaces."""
        out = []
        spans = paragraphs(self.text, start, end) if level == 0 else sentences(self.text, start, end) \
            if level == 1 else hard_cuts(self.text, start, end, max(1, (end - start) // 2))
        if level < 2 and len(spans) == 1 and spans[0] == (start, end):
            return self.pieces(start, end, level + 1)
        for a, b in spans:
            tokens = self.tokens(a, b)
            fits = tokens <= self.budget or b - a <= 1
            out.extend([(a, b, tokens)] if fits else self.pieces(a, b, min(level + 1, 2)))
        return out

    def windows(self) -> list[Window]:
        """The windows, in order; `TooManyWindows` past `max_windows`."""
        found: list[Window] = []
        queue = self.pieces(0, len(self.text))
        first = 0
        while first < len(queue):
            last, tokens = first, queue[first][2]
            while last + 1 < len(queue) and tokens + queue[last + 1][2] <= self.budget:
                last += 1
                tokens += queue[last][2]
            start, end = queue[first][0], queue[last][1]
            shrunk = 0
            while last > first and not self.fits(start, end):  # pieces merged into more tokens than they count
                shrunk += 1  # apart (about one a paragraph): the last pieces dropped one at a time, then halved
                last = last - 1 if shrunk <= SHRINK_STEPS else first + (last - first) // 2
                end = queue[last][1]
            found.append(Window(len(found), start, end))
            if len(found) > self.policy.max_windows:
                raise TooManyWindows(f"the document needs more than input.max_windows {self.policy.max_windows} "
                                     f"windows of {self.budget} tokens")
            first = self._next(queue, first, last)
        return found

    def _next(self, queue: list[tuple[int, int, int]], first: int, last: int) -> int:
        """The first piece of the window after `queue[first..last]`: the last pieces of this one, up to the
        overlap's tokens, again (never this window's first piece, so every window moves on)."""
        if last + 1 >= len(queue):
            return len(queue)
        nxt, carried = last + 1, 0
        while nxt - 1 > first and carried + queue[nxt - 1][2] <= self.overlap:
            nxt -= 1
            carried += queue[nxt][2]
        return nxt


def window_policy(input_config: Any) -> WindowPolicy:
    """The `WindowPolicy` of a job's `input` (pipeline.config.InputConfig: window_tokens, window_overlap,
    max_windows)."""
    tokens = input_config.window_tokens
    return WindowPolicy(window_tokens=None if tokens == "auto" else int(tokens),
                        overlap=float(input_config.window_overlap), max_windows=int(input_config.max_windows))


# ---------------------------------------------------------------- windows per document, for the run record


def count_windows(values: list[int | None], into: dict[int, int] | None = None) -> dict[int, int]:
    """Documents by their window count (`_windows`), added to `into`: a counter, bounded by `max_windows`, never a
    list per document. A document decided before any request (no `_windows`) is not counted."""
    counts = into if into is not None else {}
    for value in values:
        if value:
            counts[int(value)] = counts.get(int(value), 0) + 1
    return counts


def windows_figures(counts: dict[int, int] | dict[str, int]) -> dict[str, object] | None:
    """The run's windows per document from its counter: median, max, the share of documents read in more than one
    window, and the counter itself (JSON keys are strings); None when no document was counted."""
    by_count = sorted((int(k), int(v)) for k, v in counts.items() if int(v) > 0)
    documents = sum(n for _, n in by_count)
    if not documents:
        return None
    return {"documents": documents, "median": _median(by_count, documents), "max": by_count[-1][0],
            "more_than_one": sum(n for k, n in by_count if k > 1) / documents,
            "counts": {str(k): n for k, n in by_count}}


def _median(by_count: list[tuple[int, int]], documents: int) -> float:
    """The median of the documents' window counts, from (count, documents) in ascending order."""
    middle = [(documents - 1) // 2, documents // 2]  # the two middle positions (one, for an odd number)
    values, seen = [], 0
    for value, n in by_count:
        values += [value] * sum(1 for m in middle if seen <= m < seen + n)
        seen += n
    return sum(values) / 2


def windows_text(figures: dict[str, object] | None) -> str | None:
    """One line of the run's windows per document, for the summary and the report; None without figures."""
    if not figures:
        return None
    median = float(figures["median"])  # type: ignore[arg-type]
    share = 100 * float(figures["more_than_one"])  # type: ignore[arg-type]
    return (f"per document median {median:g}, max {figures['max']}; {share:.1f}% of {figures['documents']} "
            "documents needed more than one")
