"""XGrammar EBNF rewritten to compile faster: the same language, so the same tokens at every step.

Two rewrites (`cheap_grammar` applies both), each measured on the windows of `extract bench --long`'s documents,
where a window's grammar took ~0.95 s of CPU to compile against ~0.02 s for a short invoice's.

1. Bounded repetitions of a character class, counted in chunks (`chunk_repetitions`).

XGrammar (0.2.8) writes a string of `maxLength` N as `chars{0, N}`, `chars` a rule of one character class, and
compiles it as N states, each with its own token-mask cache: about 8 ms a state on this machine's CPU, so a
`maxLength: 80` string costs ~0.6 s to compile and `maxLength: 200` ~1.6 s (the sample invoice's `items` and
`address` when grounding found no candidate for them, as in most windows of a long document: ~0.95 s a window).

The same language, counted in chunks of K characters, compiles in ~0.01 s whatever N is:

    chars{m, n}  =  chars_kK{m // K} chars{m % K}  (chars_kK{0, Q - 1} chars{0, K - 1} | chars_kK{Q} chars{0, R})
    chars_kK ::= chars{K, K}                                            where n - m = Q × K + R, 0 <= R < K

(a length L in [0, n - m] is Q' × K + R' with R' < K and Q' < Q, or Q × K + R' with R' <= R). Only the counting
changes, not what is counted, so the grammar admits exactly the same strings, and at every prefix exactly the
same tokens: decoding under it is the same. `chunk_repetitions` rewrites XGrammar's printed EBNF so.

2. Rules written twice, written once (`shared_rules`). A window's `customer`, `vendor.name` and `vendor.address`
are the same grounded enum of its text's runs (~1,200 of them); XGrammar compiles each copy (~0.09 s each). Two
rules with the same body are the same language, so every reference to the second can name the first.
"""

from __future__ import annotations

import re
from typing import Any

CHUNK = 4  # characters a chunk: 4 compiled fastest of 4-16 (0.01 s against 0.04 s at 8, 0.15 s at 16)
MIN_REPEAT = 2 * CHUNK  # a repetition of fewer characters is left as it is (`{4, 4}` of a date's digits)

# A rule whose whole body is one character class, as XGrammar prints it: `name ::= (([^\"\\\r\n]))`.
_CLASS_RULE = re.compile(r"^([A-Za-z_][\w]*) ::= \(\((\[(?:[^\]\\]|\\.)*\])\)\)$", re.MULTILINE)
# A bounded repetition of a rule: `name{0, 80}` (XGrammar's `{1, -1}` is unbounded and left as it is).
_REPEAT = re.compile(r"(?<![\w\]])([A-Za-z_][\w]*)\{(\d+), (\d+)\}")
# What a rule body quotes (a string literal or a character class): never rewritten.
_QUOTED = re.compile(r'"(?:[^"\\]|\\.)*"|\[(?:[^\]\\]|\\.)*\]')


def long_strings(schema: Any, least: int = MIN_REPEAT) -> bool:
    """Whether the JSON Schema has a string bound (`maxLength` or `minLength`) of `least` characters or more:
    the schemas whose XGrammar grammar `chunk_repetitions` changes."""
    if isinstance(schema, dict):
        for key, value in schema.items():
            if key in ("maxLength", "minLength") and isinstance(value, int) and not isinstance(value, bool):
                if value >= least:
                    return True
            elif key not in ("enum", "const", "examples", "default") and long_strings(value, least):
                return True
    elif isinstance(schema, list):
        return any(long_strings(item, least) for item in schema)
    return False


def chunked(name: str, chunk_name: str, low: int, high: int, chunk: int = CHUNK) -> str:
    """`name{low, high}` counted in chunks of `chunk` (`chunk_name` the rule of one chunk): the module's formula."""
    parts = []
    fixed_chunks, fixed_rest = divmod(low, chunk)
    if fixed_chunks:
        parts.append(f"{chunk_name}{{{fixed_chunks}, {fixed_chunks}}}")
    if fixed_rest:
        parts.append(f"{name}{{{fixed_rest}, {fixed_rest}}}")
    chunks, rest = divmod(high - low, chunk)
    if chunks:
        short = (f"{chunk_name}{{0, {chunks - 1}}} " if chunks > 1 else "") + f"{name}{{0, {chunk - 1}}}"
        full = f"{chunk_name}{{{chunks}, {chunks}}}" + (f" {name}{{0, {rest}}}" if rest else "")
        parts.append(f"(({short}) | ({full}))")
    elif rest:
        parts.append(f"{name}{{0, {rest}}}")
    return "(" + " ".join(parts) + ")" if parts else '""'


def chunk_repetitions(ebnf: str, chunk: int = CHUNK, least: int = MIN_REPEAT) -> str:
    """XGrammar EBNF with each repetition `{m, n}` of a one-character-class rule, n >= `least`, counted in chunks of
    `chunk` characters (a rule `{name}_k{chunk}` added per such rule): the same language, compiled in milliseconds
    instead of ~8 ms per character of n. Other repetitions, and a grammar without any, are left as they are."""
    classes = {m.group(1) for m in _CLASS_RULE.finditer(ebnf)}
    if not classes:
        return ebnf
    taken = set(re.findall(r"^([A-Za-z_][\w]*) ::=", ebnf, flags=re.MULTILINE))
    names: dict[str, str] = {}

    def chunk_rule(name: str) -> str:
        if name not in names:
            candidate = f"{name}_k{chunk}"
            while candidate in taken:
                candidate = "x" + candidate
            taken.add(candidate)
            names[name] = candidate
        return names[name]

    def replace(match: re.Match[str]) -> str:
        name, low, high = match.group(1), int(match.group(2)), int(match.group(3))
        if name not in classes or high < least or high < low:
            return match.group(0)
        return chunked(name, chunk_rule(name), low, high, chunk)

    lines = ebnf.rstrip("\n").split("\n")
    out = []
    for line in lines:
        head, sep, body = line.partition(" ::= ")
        out.append(head + sep + _outside_quotes(body, lambda text: _REPEAT.sub(replace, text)) if sep else line)
    out += [f"{rule} ::= (({name}{{{chunk}, {chunk}}}))" for name, rule in names.items()]
    return "\n".join(out) + "\n"


def _outside_quotes(body: str, rewrite: Any) -> str:
    """`body` with `rewrite` applied to each stretch between its string literals and character classes."""
    out, at = [], 0
    for match in _QUOTED.finditer(body):
        out += [rewrite(body[at:match.start()]), match.group(0)]
        at = match.end()
    return "".join([*out, rewrite(body[at:])])


_REFERENCE = re.compile(r"(?<![\w])[A-Za-z_][\w]*(?![\w])")


def shared_rules(ebnf: str) -> str:
    """XGrammar EBNF with each rule whose body is written the same as an earlier rule's dropped, and its references
    naming that earlier rule (until no two bodies are the same: merging two rules can make their users the same).
    `root` is kept. EBNF not written one rule a line (`name ::= body`) is returned as it is."""
    rules: dict[str, str] = {}
    for line in ebnf.rstrip("\n").split("\n"):
        name, sep, body = line.partition(" ::= ")
        if not sep or not re.fullmatch(r"[A-Za-z_][\w]*", name) or name in rules:
            return ebnf
        rules[name] = body
    changed = False
    while True:
        first: dict[str, str] = {}
        alias: dict[str, str] = {}
        for name, body in rules.items():
            if body in first and name != "root":
                alias[name] = first[body]
            else:
                first.setdefault(body, name)
        if not alias:
            break
        changed = True

        rename = _renamer(alias)
        rules = {name: _outside_quotes(body, rename) for name, body in rules.items() if name not in alias}
    return "".join(f"{name} ::= {body}\n" for name, body in rules.items()) if changed else ebnf


def _renamer(alias: dict[str, str]) -> Any:
    """A function of a rule body's text: each reference to a rule in `alias` naming its alias instead."""
    return lambda text: _REFERENCE.sub(lambda m: alias.get(m.group(0), m.group(0)), text)


def cheap_grammar(ebnf: str) -> str:
    """`chunk_repetitions` then `shared_rules`: the same language, compiled faster."""
    return shared_rules(chunk_repetitions(ebnf))
