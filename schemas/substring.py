"""Substring fields: a string the grammar lets the model copy from anywhere in a long document.

`schemas.grounding` narrows a `text` field to an `enum` of every run of up to `MAX_WORDS` words of the
document. Past `MAX_CANDIDATES` candidates (a document of a few hundred words) the enum is too big to compile
quickly and grounding falls back to the schema as written. A *substring node* says the same thing as that enum
without listing it: the field's string is any run of 1..K consecutive words inside one cell of the document
(cells as `schemas.cells.sentences_of` cuts them), written exactly as the document writes it (the separators between
the words are the cell's own, usually one space). As in `grounding.spans`, the first word may also drop its
leading punctuation and the last word its trailing punctuation (`EDGE_PUNCTUATION`), e.g. `Acme Inc.` gives
`Acme Inc.` and `Acme Inc` (the two trims are independent, so `(Oslo)` also gives `Oslo)`, which `spans`
does not list). Every value the grammar allows is text the document literally holds.

The language is the minimal word-level automaton of every such run (its edges are the first word, then
separator + word), so runs that share their continuations share rules. It is built from where each run occurs
(`Automaton`), not from a trie of every run, and a process keeps the last few it built, so a row's grammar
reuses the automaton its grounding measured. A
`maxLength` on the field is enforced exactly (in characters of the decoded string, as JSON Schema counts).
A state with many edges is split on the labels' leading characters, so no rule has more than `MAX_FAN_OUT`
alternatives.

Cost: the automaton has about (words in long cells) x K states, and XGrammar's compile time grows faster than
linearly with the grammar's size (about 0.6 MB of EBNF for 1,000 words of prose at K=12: 3.7 s on one core;
1.7 MB for 3,000 words: ~50 s). `fit_max_words` picks the largest K (K, K/2, K/4, 1) whose rules fit
`MAX_GRAMMAR_BYTES`; the node carries the document's cells, so it is about the size of the document.

`substring_node` builds the schema node (plain `{"type": "string"}` to a JSON Schema validator, JSON
serialisable); `to_ebnf` turns a whole schema holding such nodes into XGrammar EBNF: the grammar XGrammar
builds from the schema (with the engine's compact JSON conventions), every substring node's string replaced
by the document's run language. vLLM takes it as `StructuredOutputsParams(grammar=...)`.
"""

from __future__ import annotations

import copy
import functools
import gc
import hashlib
import json
import re
from collections.abc import Iterable
from typing import Any

from schemas.cells import EDGE_BUT_BRACKETS, EDGE_PUNCTUATION, MAX_WORDS, POSSESSIVE, WORD, sentences_of
from schemas.walk import iter_subschemas

SUBSTRING_KEY = "x-substring"
FORMAT_VERSION = 2

# A script written without spaces between words (Chinese, Japanese, Thai): its "words" are single characters (its
# letters and its full-width punctuation), so a run is any 1..K consecutive characters of one clause (`unit:
# "char"` in the payload). A clause ends at a full-width stop, comma or enumeration comma, so a run never crosses
# one. A run of other letters inside such a text (`HarmonyOS`, `8K`) stays one word.
# The letters of those scripts (kana, CJK ideographs, Thai; `schemas.grounding.index.spaced` counts them), and the
# characters of a `char` unit: those letters and the full-width punctuation and forms beside them.
UNSPACED_LETTERS = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\u0e00-\u0e7f"
UNSPACED_CHARS = UNSPACED_LETTERS + "\u3000-\u303f\uff00-\uff65"
CHAR_WORD = re.compile(rf"[{UNSPACED_CHARS}]|[^\s—{UNSPACED_CHARS}]+")
CLAUSE_BREAK = re.compile("[\u3001\u3002\uff01\uff0c\uff1b\uff1f]+")
UNITS = {"word": WORD, "char": CHAR_WORD}
SENTINEL = "XSUBSTRING_SENTINEL_{}_"


# --- the schema node ------------------------------------------------------------------------------------------


def document_cells(document: str, extra: Iterable[str] = (), unit: str = "word") -> list[str]:
    """The document's cells that hold a word, in order (duplicates kept once: they add no run), then the `extra`
    cells (the normal forms of values the document writes, `schemas.grounding.normal`). A long document is
    prose, where a colon is punctuation inside a sentence (`Eternal Echoes: The Forgotten Chronicles`), so a
    cell is not cut after a `label:` here; a run still never crosses a sentence end."""
    found: dict[str, None] = {}
    for cell in [*sentences_of(document, labels=False), *extra]:
        for clause in [c.strip() for c in CLAUSE_BREAK.split(cell)] if unit == "char" else (cell,):
            if UNITS[unit].search(clause):
                found[clause] = None
    return list(found)


def substring_node(document: str, max_words: int = MAX_WORDS, max_length: int | None = None,
                   nullable: bool = False, extra: Iterable[str] = (), unit: str = "word") -> dict[str, Any]:
    """A string node whose grammar (through `to_ebnf`) is any run of 1..max_words words of one cell of the
    document (or of an `extra` cell), at most `max_length` characters; with `nullable`, `null` is allowed too.
    `unit="char"`: words are characters of a script written without spaces (`CHAR_WORD`)."""
    if max_words < 1:
        raise ValueError("max_words must be at least 1")
    payload: dict[str, Any] = {"version": FORMAT_VERSION, "max_words": max_words, "max_length": max_length,
                               "cells": document_cells(document, extra, unit)}
    if unit != "word":  # a word-unit payload is as it was before units, so its grammar's hash is too
        payload["unit"] = unit
    payload["id"] = hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:16]
    node: dict[str, Any] = {"type": "string", SUBSTRING_KEY: payload}
    return {"anyOf": [node, {"type": "null"}]} if nullable else node


# A grounded number's candidates as the document writes them ("8.7"): XGrammar writes a float enum value with 17
# significant digits ("8.6999999999999993", ten tokens more), so a node with this key (beside its `enum`, which a
# plain validator checks) is spliced in as these exact literals.
LITERALS_KEY = "x-literals"


def _substring_nodes(schema: Any) -> Iterable[dict[str, Any]]:
    """The nodes `to_ebnf` splices rules of its own into: substring nodes and literal-number nodes."""
    return (node for _, node in iter_subschemas(schema) if isinstance(node.get(SUBSTRING_KEY), dict)
            or isinstance(node.get(LITERALS_KEY), list))


# XGrammar's compile time follows the grammar's size, worse than linearly: on one core (bundled tokenizer)
# 0.6 MB took 3.7 s, 0.9 MB 6-7 s, 1.2 MB 16 s, 1.6-1.7 MB 24-51 s (lab/README.md: substring_compile).
MAX_GRAMMAR_BYTES = 900_000


def state_bound(document: str, max_words: int, extra: Iterable[str] = (), unit: str = "word") -> int:
    """An upper bound on the automaton's states for these words, cheap to count: one per (word, words still
    allowed) pair, as if no run were repeated (the minimised automaton is smaller when runs repeat)."""
    return _state_bound(_cell_sizes(document_cells(document, extra, unit), unit), max_words)


def _cell_sizes(cells: Iterable[str], unit: str) -> list[int]:
    """Each cell's count of words (`unit`s)."""
    return [len(UNITS[unit].findall(cell)) for cell in cells]


def _state_bound(sizes: list[int], max_words: int) -> int:
    return 2 + sum(min(max_words, n - i) for n in sizes for i in range(n))


def grammar_bytes(auto: Automaton) -> int:
    """The size of the automaton's EBNF rules, what XGrammar's compile time follows: `automaton_rules`' characters
    (with a newline each), counted without writing the narrow states' rules out."""
    prefix = "substr0_"
    wide = _Emitter(prefix)  # writes the wide states (their helper rules are numbered in the same order)
    wide.rules.extend([f'{prefix} ::= "\\"" {prefix}s{ROOT}', f'{prefix}s{FINAL} ::= "\\""'])
    name = len(prefix) + 1  # `substr0_s`, before a state's number
    digits = [len(str(state)) for state in range(auto.size)]
    label_chars: dict[str, int] = {"": 0}  # a label's literal and the space after it
    total = 0
    for state in range(1, auto.size):
        edges = auto.edges[state]
        head = state != ROOT  # the state accepts: its first branch is the final state
        branches = len(edges) + head
        if branches > MAX_FAN_OUT:
            wide.state(state, edges)
            continue
        if not branches:  # `{name}{state} ::= {name}0`
            total += 2 * name + digits[state] + 7
            continue
        # `{name}{state} ::= ` + `(branch)` joined by ` | ` + a newline; a branch is `literal {name}{target}`
        # (or `{name}0`, the final state, for the head)
        for label, target in edges:
            chars = label_chars.get(label)
            if chars is None:
                chars = label_chars[label] = len(ebnf_literal(label)) + 1
            total += chars + digits[target]
        total += name + digits[state] + 6 + branches * (name + 5) - 3 + head
    return total + sum(len(rule) + 1 for rule in wide.rules)


def fit_max_words(document: str, max_words: int = MAX_WORDS, max_length: int | None = None,
                  max_bytes: int = MAX_GRAMMAR_BYTES, extra: Iterable[str] = (), unit: str = "word") -> int | None:
    """The largest word bound among max_words, max_words // 2, max_words // 4 and 1 whose rules take at most
    `max_bytes`; None when not even single words fit (keep the schema as written). `state_bound` skips the
    bounds that cannot fit without building their automaton (a state takes 60-120 bytes). The automaton of the
    bound chosen stays in `automaton`'s cache for the grammar (`to_ebnf`)."""
    cells = document_cells(document, extra, unit)
    sizes = _cell_sizes(cells, unit)  # the cells and their words once, for every bound tried
    for k in sorted({max_words, max_words // 2, max_words // 4, 1} - {0}, reverse=True):
        if _state_bound(sizes, k) * 15 > max_bytes:
            continue
        if grammar_bytes(automaton(cells, k, max_length, unit)) <= max_bytes:
            return k
    return None


def _unique(nodes: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each node once: a schema may hold one node object at several places (a deep copy keeps that sharing)."""
    return list({id(node): node for node in nodes}.values())


def has_substring(schema: Any) -> bool:
    """Whether any node of the schema is a substring node."""
    return any(True for _ in _substring_nodes(schema))


def without_substrings(schema: dict[str, Any]) -> dict[str, Any]:
    """A copy of `schema` with each substring node a plain string again (its `max_length` kept): for a backend
    that takes no EBNF."""
    plain = copy.deepcopy(schema)
    for node in _unique(_substring_nodes(plain)):
        if node.pop(LITERALS_KEY, None) is not None:
            continue  # its enum stays
        payload = node.pop(SUBSTRING_KEY)
        if payload.get("max_length") is not None:
            node["maxLength"] = payload["max_length"]
    return plain


# --- the run automaton ------------------------------------------------------------------------------------------

FINAL = 0  # the accepting state with no way on (after a word whose trailing punctuation was dropped)
ROOT = 1


def _label_ends(label: str) -> tuple[str, ...]:
    """The ways a run may end inside `label` (its last word): without its trailing punctuation (`Acme Inc.` ends
    `Acme Inc`), without a possessive (`Petrova's` ends `Anya Petrova`), and `Edition)"` ends `(2022 Edition)`."""
    stripped = label.rstrip(EDGE_PUNCTUATION)
    ends = (stripped, stripped[:-2]) if stripped.endswith(POSSESSIVE) else (stripped,)
    if label[-1:] in "\"'”’" and label[-2:-1] in ")]}":
        ends = (*ends, label.rstrip(EDGE_BUT_BRACKETS))
    return tuple(dict.fromkeys(end for end in ends if end != label and end.strip()))


class Automaton:
    """The minimal word-level automaton of every run: `edges[state]` is a sorted list of (label, next state);
    state `ROOT` starts (and does not accept), every other state accepts, `FINAL` has no edges.

    A run is its first word, then separator + word at a time (the labels). What may follow a run depends only on
    where it occurs (the token after each occurrence), how many words it may still add, and how many characters.
    So a state is made once per such key, depth first (a run's continuations in the order the document first
    writes them), and states with the same edges are one (hash-consed bottom-up, as a trie's minimisation would
    number them). A trie of every run would hold (words) x K nodes; this visits about one key per distinct
    continuation (a Chinese document's clauses, shorter than K characters: about one per character)."""

    def __init__(self, cells: Iterable[str], max_words: int, max_length: int | None,
                 word: re.Pattern[str] = WORD) -> None:
        self.max_words, self.max_length = max_words, max_length
        # The cells' tokens in one list, each cell followed by an empty sentinel (nothing follows a cell's last
        # token), indexed from 1: an occurrence of a run is known by `g`, the index of the token after it.
        self._label: list[str] = [""]  # [g]: token g as a run's later label (its separator + word)
        self._rest: list[int] = [0]  # [g]: tokens of its cell from token g on (0 at a sentinel)
        self._chars: list[int] = [0]  # [g]: characters of its cell from token g's label on
        firsts: list[str] = []  # [g - 1]: token g as a run's first label (the word alone)
        for cell in cells:
            bounds = [m.span() for m in word.finditer(cell)]
            labels = [cell[bounds[i - 1][1] if i else start:end] for i, (start, end) in enumerate(bounds)]
            left = sum(map(len, labels))
            for i, label in enumerate(labels):
                self._label.append(label)
                self._rest.append(len(labels) - i)
                self._chars.append(left)
                left -= len(label)
            firsts.extend([*(cell[start:end] for start, end in bounds), ""])
            self._label.append("")
            self._rest.append(0)
            self._chars.append(0)
        self._ends: dict[str, tuple[str, ...]] = {}
        self.edges: list[list[tuple[str, int]]] = [[], []]
        self._ids: dict[tuple[tuple[str, int], ...], int] = {(): FINAL}
        self._made: dict[tuple[tuple[int, ...], int, int | None], int] = {}
        children: dict[str, list[int]] = {}
        ends: set[str] = set()
        for g, bare in enumerate(firsts, start=1):  # token g (a cell's sentinel gives "")
            if bare:
                self._step(bare, g + 1, 0, children, ends)
                if bare[0] in EDGE_PUNCTUATION and (first := bare.lstrip(EDGE_PUNCTUATION)):
                    self._step(first, g + 1, 0, children, ends)  # `(Oslo` also starts `Oslo`
        self.edges[ROOT] = self._edges_of(children, ends, 1, 0)
        del self._ids, self._made, self._ends, self._label, self._rest, self._chars  # only `edges` is kept

    def _fits(self, length: int) -> bool:
        return self.max_length is None or length <= self.max_length

    def _step(self, label: str, after: int, length: int, children: dict[str, list[int]], ends: set[str]) -> None:
        """An occurrence goes on by `label` to the token `after`: the ways to end inside the label, and the child."""
        found = self._ends.get(label)
        if found is None:
            found = self._ends[label] = _label_ends(label)
        for end in found:
            if self._fits(length + len(end)):
                ends.add(end)
        if self._fits(length + len(label)):
            children.setdefault(label, []).append(after)

    def _edges_of(self, children: dict[str, list[int]], ends: set[str], depth: int,
                  length: int) -> list[tuple[str, int]]:
        edges = {label: self._state(tuple(after), depth, length + len(label)) for label, after in children.items()}
        for label in ends:
            edges.setdefault(label, FINAL)  # an edge already there accepts at once: it covers the end
        return sorted(edges.items()) if len(edges) > 1 else list(edges.items())

    def _state(self, after: tuple[int, ...], depth: int, length: int) -> int:
        """The state reached by a run of `depth` words and `length` characters whose occurrences are each followed
        by the token in `after`."""
        if len(after) == 1:
            return self._chain(after[0], depth, length)
        rest = self._rest
        room = min(self.max_words - depth, max(rest[g] for g in after))  # more words than that cannot follow
        budget = None if self.max_length is None else \
            min(self.max_length - length, max(self._chars[g] for g in after))  # nor more characters
        key = (after, room, budget)
        state = self._made.get(key)
        if state is None:
            children: dict[str, list[int]] = {}
            ends: set[str] = set()
            if room > 0:
                for g in after:
                    if rest[g]:
                        self._step(self._label[g], g + 1, length, children, ends)
            state = self._made[key] = self._number(self._edges_of(children, ends, depth + 1, length))
        return state

    def _chain(self, g: int, depth: int, length: int) -> int:
        """`_state` of a run that occurs once: its way on is one path through its cell, walked to its end (or to a
        state already made) and numbered back from there, as the depth-first walk would. (Its keys start with the
        token, an int, where `_state`'s start with a tuple.)"""
        rest, labels, made, known_ends = self._rest, self._label, self._made, self._ends
        max_words, max_length = self.max_words, self.max_length
        path: list[tuple[tuple[int, int, int | None], str, tuple[str, ...]]] = []
        while True:
            room = min(max_words - depth, rest[g])
            budget = None if max_length is None else min(max_length - length, self._chars[g])
            key = (g, room, budget)
            state = made.get(key)
            if state is not None:
                break
            if room <= 0:
                state = made[key] = FINAL  # no edges
                break
            label = labels[g]
            ends = known_ends.get(label)
            if ends is None:
                ends = known_ends[label] = _label_ends(label)
            if ends and max_length is not None:
                ends = tuple(end for end in ends if length + len(end) <= max_length)
            if max_length is not None and length + len(label) > max_length:
                state = made[key] = self._number(sorted((end, FINAL) for end in ends))
                break
            path.append((key, label, ends))
            g, depth, length = g + 1, depth + 1, length + len(label)
        for key, label, ends in reversed(path):
            if ends:
                edges = {label: state}
                for end in ends:
                    edges.setdefault(end, FINAL)
                state = made[key] = self._number(sorted(edges.items()))
            else:
                state = made[key] = self._number([(label, state)])
        return state

    def _number(self, edges: list[tuple[str, int]]) -> int:
        """The state with these edges: made once (states with the same edges are one)."""
        signature = tuple(edges)
        state = self._ids.get(signature)
        if state is None:
            state = self._ids[signature] = len(self.edges)
            self.edges.append(edges)
        return state

    @property
    def size(self) -> int:
        return len(self.edges)


def automaton(cells: Iterable[str], max_words: int, max_length: int | None, unit: str = "word") -> Automaton:
    """The automaton of every run of 1..max_words words (`unit`s) inside one of `cells`, at most max_length
    characters (read only: the last few are kept, so the grammar of a row reuses the one `fit_max_words` built
    for its grounding)."""
    return _automaton(tuple(cells), max_words, max_length, unit)


@functools.lru_cache(maxsize=4)  # at most about 8 MB each: `fit_max_words` skips a bound past 60,000 states
def _automaton(cells: tuple[str, ...], max_words: int, max_length: int | None, unit: str) -> Automaton:
    # its thousands of small tuples would each count toward a collection of the whole heap (an engine's is large),
    # and none of them is garbage until it is built: collect after
    enabled = gc.isenabled()
    gc.disable()
    try:
        return Automaton(cells, max_words, max_length, UNITS[unit])
    finally:
        if enabled:
            gc.enable()


def runs_of(auto: Automaton, limit: int = 100_000) -> set[str]:
    """Every string the automaton accepts (for tests; at most `limit` of them)."""
    found: set[str] = set()
    stack: list[tuple[int, str]] = [(ROOT, "")]
    while stack and len(found) < limit:
        state, text = stack.pop()
        if state != ROOT:
            found.add(text)
        stack.extend((target, text + label) for label, target in auto.edges[state])
    return found


# --- EBNF ------------------------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=1 << 16)
def ebnf_literal(text: str) -> str:
    """`text` as it appears inside a JSON string (escaped as json.dumps escapes it, non-ASCII kept), as an EBNF
    string literal."""
    inside = json.dumps(text, ensure_ascii=False)[1:-1]
    return '"' + inside.replace("\\", "\\\\").replace('"', '\\"') + '"'


MAX_FAN_OUT = 8  # alternatives per rule: XGrammar's compile time grows with the square of a rule's fan-out


class _Emitter:
    """Writes the automaton's rules. A state with many edges is split on the labels' leading characters
    (a character trie of helper rules), so no rule has more than `MAX_FAN_OUT` alternatives."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.rules: list[str] = []
        self.helpers = 0

    def state(self, state: int, edges: list[tuple[str, int]]) -> None:
        head = [] if state in (ROOT, FINAL) else [f"{self.prefix}s{FINAL}"]
        body = self._choice(head, [(label, f"{self.prefix}s{target}") for label, target in edges])
        self.rules.append(f"{self.prefix}s{state} ::= {body}")

    def _choice(self, head: list[str], edges: list[tuple[str, str]]) -> str:
        branches = list(head)
        if len(edges) + len(head) <= MAX_FAN_OUT:
            branches.extend(f"{ebnf_literal(label)} {rest}" if label else rest for label, rest in edges)
        else:
            groups: dict[str, list[tuple[str, str]]] = {}
            for label, rest in edges:
                groups.setdefault(label[:1], []).append((label[1:], rest))
            for first, group in groups.items():
                branches.append(f"{ebnf_literal(first)} {self._helper(group)}" if first else group[0][1])
        return " | ".join(f"({b})" for b in branches) or f"{self.prefix}s{FINAL}"

    def _helper(self, edges: list[tuple[str, str]]) -> str:
        if len(edges) == 1:
            label, rest = edges[0]
            return f"{ebnf_literal(label)} {rest}" if label else rest
        self.helpers += 1
        name = f"{self.prefix}h{self.helpers}"
        self.rules.append(f"{name} ::= {self._choice([], edges)}")
        return name


def automaton_rules(auto: Automaton, prefix: str) -> list[str]:
    """The EBNF rules of the automaton's language as a JSON string (quotes included): rule `prefix` is the
    string, rule `{prefix}s{n}` state n (the rest of the string from there)."""
    emitter = _Emitter(prefix)
    emitter.rules.extend([f'{prefix} ::= "\\"" {prefix}s{ROOT}', f'{prefix}s{FINAL} ::= "\\""'])
    for state in range(1, auto.size):
        emitter.state(state, auto.edges[state])
    return emitter.rules


def _replace_nodes(schema: dict[str, Any]) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """A copy of the schema with each substring node a const sentinel, and the payload of each sentinel."""
    work = copy.deepcopy(schema)
    payloads: dict[str, dict[str, Any]] = {}
    for node in _unique(_substring_nodes(work)):
        payload = node[SUBSTRING_KEY] if SUBSTRING_KEY in node else {"literals": node[LITERALS_KEY]}
        key = payload.get("id") or hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:16]
        sentinel = SENTINEL.format(key)
        payloads[sentinel] = payload
        node.clear()
        node.update({"type": "string", "const": sentinel})
    return work, payloads


def _free_prefix(base: str, index: int) -> str:
    prefix = f"substr{index}_"
    while re.search(rf"^{re.escape(prefix)}", base, re.MULTILINE):
        prefix = "x" + prefix
    return prefix


# XGrammar (0.2.8) prints a character under U+0100 that it escapes as `\xHH`, but its EBNF parser reads every hex
# digit after `\x`: `"Gr\xe1ficas"` is read as `Gr` + U+0E1F + `icas`, so the grammar admits `Grฟicas` and not
# `Gráficas` (issue 54's blind euro job: 4 of 42 vendors, in every run where an amount made the schema EBNF). `\u`
# takes exactly four digits, so each `\xHH` is written `\u00HH` (an escaped backslash before it left alone).
_HEX_ESCAPE = re.compile(r"(?<!\\)((?:\\\\)*)\\x([0-9A-Fa-f]{2})")


def fixed_width_escapes(ebnf: str) -> str:
    r"""XGrammar's printed EBNF with each `\xHH` escape as `\u00HH`, which its parser reads back as written."""
    return _HEX_ESCAPE.sub(lambda m: f"{m.group(1)}\\u00{m.group(2)}", ebnf)


def to_ebnf(schema: dict[str, Any], any_whitespace: bool = False,
            separators: tuple[str, str] | None = (",", ":"), strict_mode: bool = True) -> str:
    """XGrammar EBNF for the whole schema: what XGrammar builds from it (by default with the engine's options,
    `disable_any_whitespace`: compact JSON), each substring node's string restricted to its document's runs.
    Root rule `root`. A schema without substring nodes gives XGrammar's own grammar for it."""
    import xgrammar

    work, payloads = _replace_nodes(schema)
    grammar = xgrammar.Grammar.from_json_schema(json.dumps(work), any_whitespace=any_whitespace,
                                                separators=None if any_whitespace else separators,
                                                strict_mode=strict_mode)
    base = fixed_width_escapes(str(grammar))
    rules: list[str] = []
    for index, (sentinel, payload) in enumerate(payloads.items()):
        literal = ebnf_literal(sentinel)
        literal = '"\\"' + literal[1:-1] + '\\""'
        if sentinel in base.replace(literal, ""):
            raise ValueError(f"XGrammar wrote the substring sentinel {sentinel} in a form not understood")
        prefix = _free_prefix(base, index)
        base = base.replace(literal, prefix)
        if "literals" in payload:
            rules.append(f"{prefix} ::= " + " | ".join(f'("{literal}")' for literal in payload["literals"]))
            continue
        cells = payload.get("cells") or []
        rules.extend(automaton_rules(automaton(cells, int(payload["max_words"]), payload.get("max_length"),
                                               payload.get("unit", "word")), prefix))
    return base.rstrip("\n") + "\n" + "\n".join(rules) + "\n"
