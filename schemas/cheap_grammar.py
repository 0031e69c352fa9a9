"""XGrammar EBNF rewritten to compile faster: the same language, so the same tokens at every step of a decode.

A long document's window grounds its text fields in the window's own runs of words: the sample invoice's
`customer`, `vendor.name` and `vendor.address` each get the same enum of ~1,200 runs. XGrammar (0.2.8) compiles
each copy (~0.09 s of CPU each, on this machine), whether the schema comes as JSON Schema, with the enum written
three times or once in `$defs` (its converter inlines references). Two rules with the same body are the same
language, so `shared_rules` keeps the first and points every reference to the others at it: a window's grammar
compiles in ~0.75 s instead of ~0.95 s, and one with substring nodes in ~0.11 s instead of ~0.33 s. The token
mask at every step is the same (tests/unit/test_cheap_grammar.py), and so is the time to fill it.

Not done here, measured (lab/journal): counting a bounded string (`maxLength` N, XGrammar's `chars{0, N}`, ~8 ms
of compile a character) in chunks of K characters compiles in ~0.01 s, but most tokens are then undecided at
compile time and checked while decoding: filling the mask took ~80 times as long, and `extract bench --long-only`'s
long arm 85 s instead of 20 s.
"""

from __future__ import annotations

import json
import re
from typing import Any

# What a rule body quotes (a string literal or a character class): never renamed.
_QUOTED = re.compile(r'"(?:[^"\\]|\\.)*"|\[(?:[^\]\\]|\\.)*\]')
_REFERENCE = re.compile(r"(?<![\w])[A-Za-z_][\w]*(?![\w])")
LEAST_ENUM = 32  # values: an enum written twice with fewer is left to XGrammar's JSON Schema path


def repeated_enums(schema: Any, least: int = LEAST_ENUM) -> bool:
    """Whether the JSON Schema writes the same enum of `least` values or more twice or more: the schemas
    `shared_rules` compiles faster once they are EBNF."""
    seen: set[str] = set()

    def walk(node: Any) -> bool:
        if isinstance(node, dict):
            values = node.get("enum")
            if isinstance(values, list) and len(values) >= least:
                key = json.dumps(values, sort_keys=True, ensure_ascii=False, default=repr)
                if key in seen:
                    return True
                seen.add(key)
            return any(walk(v) for k, v in node.items() if k not in ("enum", "const", "examples", "default"))
        if isinstance(node, list):
            return any(walk(item) for item in node)
        return False

    return walk(schema)


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


def _outside_quotes(body: str, rewrite: Any) -> str:
    """`body` with `rewrite` applied to each stretch between its string literals and character classes."""
    out, at = [], 0
    for match in _QUOTED.finditer(body):
        out += [rewrite(body[at:match.start()]), match.group(0)]
        at = match.end()
    return "".join([*out, rewrite(body[at:])])
