"""One record from a document's windows (workers.windows): the per-field merge.

- A scalar takes the value of the window most sure of it (its leaf's `_confidence`: calibrated where the job has a
  calibration, since each window's outcome is calibrated already, raw otherwise; a leaf without one counts below
  any that has one, and a tie goes to the earlier window). Null wins only when every window says null.
- A list is the union of the windows' items, in document order (an item's first span, else its window's start).
  Two items are one only when they come from neighbouring windows, are equal, and their spans inside the two
  windows' overlap coincide (non-empty): the same words read twice. Items repeated elsewhere are kept.
- An object merges leaf by leaf (keys in the order the windows give them); items of a list of objects are items.
- A list item that is a term the document defines for a name (`Jane Quinn Doe ("EMPLOYEE")`, `Birch Pharma, Inc.,
  a Delaware corporation ... ("Birch")`) is replaced by that name (workers.aliases), once; a term whose name is
  not found is dropped while other items remain.
- A value that is only the field's own name (`Jurisdiction` for `jurisdiction`, `Parties` in `party`: a label the
  window copied, not its value) loses to any other value, and such a list item is dropped while others remain
  (`label_only`; issue 56: Kleister NDA train, docs 1-8, 4 of 8 jurisdictions read so at 512-2048 tokens a window).
- Given the document's `DefinedTerms`, a list item the document defines as a term of its own (`(the “Company”)`:
  an alias of a name written before it) is dropped while other items remain.

Each leaf of the merged record keeps where it came from: its window, and that window's confidence and spans, the
spans moved by the window's start so that they are offsets into the whole document.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from schemas.spans import join_path, leaves
from workers.aliases import defined_name
from workers.windows import Window


@dataclass
class WindowOutput:
    """A window's record with its leaves' confidence and spans (offsets into the window)."""

    window: Window
    record: dict[str, Any]
    confidence: dict[str, float] = field(default_factory=dict)
    spans: dict[str, list[tuple[int, int]]] = field(default_factory=dict)

    def absolute(self, path: str) -> list[tuple[int, int]]:
        return [(s + self.window.start, e + self.window.start) for s, e in self.spans.get(path, ())]


@dataclass
class Merged:
    """The merged record, and per leaf path its confidence, spans (in the document) and window."""

    record: dict[str, Any]
    confidence: dict[str, float] = field(default_factory=dict)
    spans: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    windows: dict[str, int] = field(default_factory=dict)
    terms: DefinedTerms | None = None  # the document's defined terms: list items that are aliases


# A defined term: `(the “Company”)`, `("Recipient")`, `(hereinafter referred to as "Seller")`, `(each a “Party”)`
DEFINED = r"\(\s*(?:(?:hereinafter|collectively|each|individually)[\w\s,]*?)?(?:the\s+|a\s+|an\s+)?[\"“”']{}[\"“”']"


@dataclass
class DefinedTerms:
    """The terms a document defines for itself, asked value by value (each answer kept)."""

    document: str
    _defined: dict[str, bool] = field(default_factory=dict)

    def defined(self, value: Any) -> bool:
        """Whether the document defines `value` as a term of its own, in brackets and quotes (`(the “Company”)`,
        `("Recipient")`, `(hereinafter referred to as "Seller")`): an alias of a name written before it."""
        if not isinstance(value, str) or not value.strip():
            return False
        if value not in self._defined:
            term = re.sub(r"^(?:the|a|an)\s+", "", value.strip(), flags=re.IGNORECASE)
            self._defined[value] = re.search(DEFINED.format(re.escape(term)), self.document) is not None
        return self._defined[value]


# A value as one window gives it: (the window's output, the value, its path in that window's record).
Found = tuple[WindowOutput, Any, str]


def merge(outputs: list[WindowOutput], terms: DefinedTerms | None = None) -> Merged:
    """The one record of `outputs` (a document's windows, in order, each with a record); with `terms`, a list
    item the document defines as a term is dropped while others remain (module docstring)."""
    merged = Merged(record={}, terms=terms)
    record = _merge([(o, o.record, "") for o in outputs], "", merged)
    merged.record = record if isinstance(record, dict) else {}
    return merged


def _merge(found: list[Found], path: str, out: Merged) -> Any:
    present = [f for f in found if f[1] is not None]
    if not present:
        return None  # null only when every window says null
    if all(isinstance(f[1], dict) for f in present):
        return _merge_object(present, path, out)
    if all(isinstance(f[1], list) for f in present):
        return _merge_list(present, path, out)
    return _merge_scalar(present, path, out)


def _merge_object(found: list[Found], path: str, out: Merged) -> dict[str, Any]:
    keys = list(dict.fromkeys(k for _, value, _ in found for k in value))
    return {key: _merge([(o, value.get(key), join_path(at, key)) for o, value, at in found], join_path(path, key), out)
            for key in keys}


def _merge_scalar(found: list[Found], path: str, out: Merged) -> Any:
    def sureness(item: tuple[int, Found]) -> tuple[bool, float, int]:
        i, (o, value, at) = item
        return (not label_only(value, path), o.confidence.get(at, -1.0), -i)

    _, (best, value, at) = max(enumerate(found), key=sureness)
    _keep(out, path, best, at)
    return value


def _keep(out: Merged, path: str, origin: WindowOutput, at: str) -> None:
    """Record the provenance of the leaf at `path`: it came from `origin`'s leaf at `at`."""
    out.windows[path] = origin.window.index
    if at in origin.confidence:
        out.confidence[path] = origin.confidence[at]
    if at in origin.spans:
        out.spans[path] = origin.absolute(at)


@dataclass
class _Item:
    origin: WindowOutput
    value: Any
    at: str  # its path in the window's record
    order: int  # its index in the window's list
    named: list[tuple[int, int]] | None = None  # a defined term replaced by its name: the name's place (aliases)

    def places(self) -> dict[str, list[tuple[int, int]]]:
        """Its leaves' spans in the document, by the leaf's path inside the item."""
        if self.named is not None:
            return {"": self.named}
        if not isinstance(self.value, dict | list):
            return {"": self.origin.absolute(self.at)}
        return {sub[len(self.at):]: self.origin.absolute(sub) for sub, _ in leaves(self.value, self.at)}

    def first(self) -> int:
        starts = [s for spans in self.places().values() for s, _ in spans]
        return min(starts) if starts else self.origin.window.start


def same_read(a: _Item, b: _Item) -> bool:
    """Whether `b` (a later window's item) is `a` read again: neighbouring windows, equal values, and their spans
    inside the windows' overlap coincide and are not empty."""
    if b.origin.window.index - a.origin.window.index != 1 or _canonical(a.value) != _canonical(b.value):
        return False
    low, high = b.origin.window.start, a.origin.window.end
    if high <= low:
        return False
    ours, theirs = a.places(), b.places()
    if ours.keys() != theirs.keys():
        return False
    for key in ours:
        inside_a = {s for s in ours[key] if low <= s[0] and s[1] <= high}
        inside_b = {s for s in theirs[key] if low <= s[0] and s[1] <= high}
        if not inside_a or inside_a != inside_b:
            return False
    return True


def _merge_list(found: list[Found], path: str, out: Merged) -> list[Any]:
    items = [_Item(o, value, f"{at}[{i}]", i) for o, values, at in found for i, value in enumerate(values)]
    if any(not label_only(item.value, path) for item in items):
        items = [item for item in items if not label_only(item.value, path)]
    terms = out.terms
    if terms is not None:
        items = [_named(item, terms.document) for item in items]  # a defined term: the name it stands for
    if terms is not None and any(not terms.defined(item.value) for item in items):
        items = [item for item in items if not terms.defined(item.value)]  # an alias, where a name remains
    kept: list[_Item] = []
    for item in items:
        if not any(same_read(earlier, item) or _same_name(earlier, item) for earlier in kept):
            kept.append(item)
    kept.sort(key=lambda it: (it.first(), it.origin.window.index, it.order))
    result = []
    for i, item in enumerate(kept):
        result.append(_merge([(item.origin, item.value, item.at)], f"{path}[{i}]", out))
        if item.named is not None:
            out.spans[f"{path}[{i}]"] = item.named
    return result


def _named(item: _Item, document: str) -> _Item:
    """The item, or where it is a term the document defines for a name (`("EMPLOYEE")` after `Jane Quinn Doe`),
    that name in its place, with the name's span (workers.aliases)."""
    if not isinstance(item.value, str):
        return item
    found = defined_name(document, item.value)
    if found is None:
        return item
    name, start, end = found
    return _Item(item.origin, name, item.at, item.order, named=[(start, end)])


def _same_name(a: _Item, b: _Item) -> bool:
    """Whether `b`, a defined term replaced by its name, names what `a` already does (the name once, not once per
    term: `Company` in three windows is one party)."""
    return b.named is not None and isinstance(a.value, str) and a.value.casefold() == str(b.value).casefold()


NAME_WORDS = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+")
ARTICLES = frozenset({"the", "a", "an"})


def _singular(word: str) -> str:
    word = word.casefold()
    if word.endswith("ies") and len(word) > 4:
        return word[:-3] + "y"
    return word[:-1] if word.endswith("s") and not word.endswith("ss") and len(word) > 3 else word


def label_only(value: Any, path: str) -> bool:
    """Whether `value` is a string of nothing but words of its field's own name (`Jurisdiction` or `the
    jurisdiction` for `jurisdiction`, `Parties` for `party[2]`, `Term` for `contract_term`), in any case and
    number: the label a window copied in place of the value it labels."""
    if not isinstance(value, str):
        return False
    name = re.sub(r"\[\d+\]", "", path).rpartition(".")[2]
    own = {_singular(w) for w in NAME_WORDS.findall(name)}
    words = [_singular(w) for w in re.findall(r"[^\W\d_]+", value)]
    words = [w for w in words if w not in ARTICLES]
    return bool(own) and bool(words) and not re.search(r"\d", value) and set(words) <= own


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)
