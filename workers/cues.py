"""Cue words: how much the text around a value speaks of its field, to choose between windows (workers.merge).

A window that does not hold a field's value still answers it: the bundled model fills every field of every
window, and is often surest of a value copied from a page that is not about the field (a long contract's
`jurisdiction` read as `2017` from a signature page, beside the window that writes `governed by the laws of the
State of California`). A field's cue words are the words of its name and description (`jurisdiction`: the state
or country whose *law governs* the agreement), stemmed (Snowball). A value's relevance is the sum, over the cue
stems written within `CONTEXT` characters of its span, of how rare each stem is in the document (inverse
document frequency over blocks of `BLOCK` characters): a word every page writes (`agreement`) weighs nothing.

Chosen on the Kleister NDA train split, docs 1-8 (issue 56); its worth on a slice it was not chosen on is in the
journal (lab/journal/quality.md, "Long documents in windows").
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

CONTEXT = 150  # characters either side of a value's span whose words count
BLOCK = 400  # characters of the blocks a stem's rarity is counted over
WORD = re.compile(r"[^\W\d_]{2,}")
# A defined term: `(the “Company”)`, `("Recipient")`, `(hereinafter referred to as "Seller")`, `(each a “Party”)`
DEFINED = r"\(\s*(?:(?:hereinafter|collectively|each|individually)[\w\s,]*?)?(?:the\s+|a\s+|an\s+)?[\"“”']{}[\"“”']"
STOP = frozenset({"the", "a", "an", "of", "or", "and", "to", "in", "on", "for", "by", "as", "is", "it", "its", "this",
                  "that", "with", "which", "whose", "what", "who", "be", "are", "at", "from", "e", "g", "eg"})


def _stemmer() -> Any:
    import snowballstemmer

    return snowballstemmer.stemmer("english")


def stems(text: str) -> list[str]:
    """The stems of the words of `text`, lower case, stop words left out."""
    words = [w.casefold() for w in WORD.findall(text)]
    return _stemmer().stemWords([w for w in words if w not in STOP])


def field_cues(json_schema: dict[str, Any]) -> dict[str, frozenset[str]]:
    """Each property's cue stems (its name's words and its description's), by the property's name, over the
    whole schema (a name used twice gets both fields' words)."""
    found: dict[str, set[str]] = {}
    for name, node in _properties(json_schema):
        words = " ".join(re.findall(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+", name))
        description = node.get("description") if isinstance(node, dict) else None
        text = f"{words} {description if isinstance(description, str) else ''}"
        found.setdefault(name, set()).update(stems(text))
    return {name: frozenset(words) for name, words in found.items()}


def _properties(node: Any) -> Iterable[tuple[str, Any]]:
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "properties" and isinstance(value, dict):
                yield from ((name, sub) for name, sub in value.items() if isinstance(name, str))
            yield from _properties(value)
    elif isinstance(node, list):
        for item in node:
            yield from _properties(item)


@dataclass
class Cues:
    """A document and its fields' cue stems; `relevance` of a value's spans to its field."""

    document: str
    words: dict[str, frozenset[str]]
    rank: bool = False  # rank a scalar's windows by `relevance` (off: measured no better, issue 56 journal)
    _weights: dict[str, float] = field(default_factory=dict)
    _blocks: list[set[str]] | None = None
    _defined: dict[str, bool] = field(default_factory=dict)

    def weight(self, stem: str) -> float:
        """How rare `stem` is in the document: log(blocks / (1 + blocks that write it)), at least 0."""
        if stem not in self._weights:
            if self._blocks is None:
                self._blocks = [set(stems(self.document[i:i + BLOCK])) for i in range(0, len(self.document), BLOCK)]
            holding = sum(stem in block for block in self._blocks)
            self._weights[stem] = max(0.0, math.log(len(self._blocks) / (1 + holding)))
        return self._weights[stem]

    def defined(self, value: Any) -> bool:
        """Whether the document defines `value` as a term of its own, in brackets and quotes (`(the “Company”)`,
        `("Recipient")`, `(hereinafter referred to as "Seller")`): an alias of a name written before it."""
        if not isinstance(value, str) or not value.strip():
            return False
        if value not in self._defined:
            term = re.sub(r"^(?:the|a|an)\s+", "", value.strip(), flags=re.IGNORECASE)
            self._defined[value] = re.search(DEFINED.format(re.escape(term)), self.document) is not None
        return self._defined[value]

    def relevance(self, path: str, spans: list[tuple[int, int]]) -> float:
        """The best, over the value's spans (offsets into the document), of the weights of its field's cue stems
        written within CONTEXT characters of the span; 0 for a value without a span or a field without cues, and
        for every value unless `rank`."""
        name = re.sub(r"\[\d+\]", "", path).rpartition(".")[2]
        cues = self.words.get(name)
        if not self.rank or not cues or not spans:
            return 0.0
        best = 0.0
        for start, end in spans:
            near = set(stems(self.document[max(0, start - CONTEXT):end + CONTEXT])) & cues
            best = max(best, sum(self.weight(stem) for stem in near))
        return best
