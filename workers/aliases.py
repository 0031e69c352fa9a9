"""The name a defined term stands for: `Jane Quinn Doe ("EMPLOYEE")` → `Jane Quinn Doe`.

Contracts name each party once and then call it by a term they define in brackets and quotes: `Birch Pharma, Inc.,
a Delaware corporation having a place of business at ... ("Birch")`, `Globex Data Corporation, a Delaware
corporation (the "Company")`. Asked for the parties, a small model copies the term (`Company`, `EMPLOYEE`) from
the window it reads, which may be pages after the definition (Kleister NDA train, issue 56: 9 of 16 documents'
windows answered a term, 1 of 34 parties right). The merge (workers.merge) puts the name in the term's place.

Where the name is: in the text between the definition's bracket and the clause before it (the previous closing
bracket, colon, semicolon or a sentence's end, at most `REACH` characters back):
- the first organisation there, a run of capitalised words ending in a legal form (`schemas.grounding.names.
  LEGAL_FORMS`), given without the comma before the form (`Birch Pharma Inc.`, as registries write it);
- else the first run of two to five capitalised words after the clause's last `between`, `and`, `by`, `with` or
  `of` (English only so far; a person: `John Roe` of `between John Roe, M.D., an individual ...
  ("Contractor")`), so that `This Agreement is made by the parties listed below (the "Company")` names nobody.
No name there: None (the merge then drops the term while other items remain, as before).
"""

from __future__ import annotations

import re

from schemas.grounding.names import LEGAL_FORMS

REACH = 400  # characters before a definition searched for its name
MIN_LETTERS = 2  # a term of one letter (`Exhibit ("A")`) names no party
# A term defined in brackets: quoted anywhere inside one bracket (`(the “Company”)`, `(together the “Company”)`,
# `(“Lumen” and collectively with ..., the “Company”)`, `(hereinafter referred to as "Seller")`)
DEFINITION = r"\([^()]{{0,300}}?[\"“”']{}[\"“”']"
CAPITALISED = r"(?:[A-Z0-9][\w'’&.-]*|&)"
_FORMS = "|".join(re.escape(f) for f in sorted(LEGAL_FORMS, key=len, reverse=True))
ORGANISATION = re.compile(rf"(?P<name>{CAPITALISED}(?:[ \t\n]+{CAPITALISED}){{0,7}}?),?[ \t\n]+(?P<form>{_FORMS})"
                          r"(?![^\W_])")
PERSON = re.compile(r"[A-Z][a-z'’-]+(?:[ \t\n]+(?:[A-Z]\.|[A-Z][a-z'’-]+)){1,4}")
# The words before a party's name in a contract's clause (English): a person is looked for after the last of them
JOINS = re.compile(r"(?<![^\W_])(?:between|and|by|with|of)(?![^\W_])")
# Where the clause holding a definition starts: after a closing bracket, a colon, a semicolon, or a sentence's
# stop after a lower-case word (`Inc.` and `M.D.` are no sentence's end)
CLAUSE = re.compile(r"[):;]|(?<=[a-z])\.(?=\s)")


_LOWER_FORMS = frozenset(f.casefold() for f in LEGAL_FORMS)


def _legal_form_stop(text: str, end: int) -> bool:
    """Whether the stop ending at `end` is a legal form's (`Inc.`, `Corp.`), not a sentence's."""
    word = re.search(r"\S+$", text[:end])
    return word is not None and word.group().casefold() in _LOWER_FORMS


def defined_name(document: str, term: str) -> tuple[str, int, int] | None:
    """The name the document defines `term` for (module docstring): (the name, its start, its end), or None."""
    bare = re.sub(r"^(?:the|a|an)\s+", "", term.strip(), flags=re.IGNORECASE)
    if sum(c.isalpha() for c in bare) < MIN_LETTERS:  # `A`, `(i)`: an exhibit's or a clause's letter
        return None
    definition = re.search(DEFINITION.format(re.escape(bare)), document)
    if definition is None:
        return None
    low = max(0, definition.start() - REACH)
    before = document[low:definition.start()]
    boundaries = [m.end() for m in CLAUSE.finditer(before) if not _legal_form_stop(before, m.end())]
    offset = low + (boundaries[-1] if boundaries else 0)
    clause = document[offset:definition.start()]
    found = ORGANISATION.search(clause)
    if found is not None:
        words = " ".join(found.group("name").split())
        return f"{words} {found.group('form')}", offset + found.start(), offset + found.end()
    joins = list(JOINS.finditer(clause))
    person = PERSON.search(clause, joins[-1].end() if joins else 0)
    if person is not None:
        return " ".join(person.group().split()), offset + person.start(), offset + person.end()
    return None
