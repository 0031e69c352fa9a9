"""Organisation names in the form registries write them: without the comma before the legal form
(`NORTHWIND LABS, INC.` → `NORTHWIND LABS INC.`, `Blue Harbor Capital, LLC` → `Blue Harbor Capital LLC`).

Company registers and the records made from them (SEC EDGAR's conformed names, Kleister's gold, most CRMs) drop
that comma; a free-text field decoded as runs of the document's words (`schemas.substring`) could only copy it.
`comma_free_names` offers, for each `<words>, <legal form>` the document writes, the same words without the comma,
as a cell of its own beside the document's runs (so any run that ends at the legal form is allowed too): still only
names the document writes.

The legal forms are data (`LEGAL_FORMS`: English, and the usual continental ones). Chosen on the Kleister NDA train
split (issue 56: 7 of the 11 refused party names of docs 1-8 were such names); on the sample, tickets and
DeepJSONEval en it changes no reach (no gold value there is a comma-free form of a name the document writes).
"""

from __future__ import annotations

import re

LEGAL_FORMS = ("Inc.", "Inc", "Incorporated", "LLC", "L.L.C.", "Ltd.", "Ltd", "Limited", "Corp.", "Corp",
               "Corporation", "Co.", "LLP", "L.L.P.", "LP", "L.P.", "PLC", "plc", "N.V.", "B.V.", "S.A.", "AG", "GmbH",
               "S.p.A.", "SE", "S.L.", "AB", "ASA", "A/S", "Pty. Ltd.", "Pty Ltd")
MAX_NAME_WORDS = 6  # words of a name before its legal form


def _pattern() -> re.Pattern[str]:
    forms = "|".join(re.escape(f) for f in sorted(LEGAL_FORMS, key=len, reverse=True))
    return re.compile(rf",[ \t]+(?P<form>{forms})(?![^\W_])", re.IGNORECASE)


FORM_AFTER_COMMA = _pattern()
NAME_WORD = re.compile(r"[^\s,;:()\"“”]+")


def comma_free_names(text: str) -> list[str]:
    """Each `<up to MAX_NAME_WORDS words>, <legal form>` the text writes, without the comma (`NIKE, Inc.` →
    `NIKE Inc.`), in order of first appearance."""
    found: dict[str, None] = {}
    for match in FORM_AFTER_COMMA.finditer(text):
        before = text[max(0, match.start() - 200):match.start()]
        words = re.search(rf"(?:{NAME_WORD.pattern}[ \t]+){{0,{MAX_NAME_WORDS - 1}}}{NAME_WORD.pattern}$", before)
        if words is not None and any(c.isupper() for c in words.group()):
            found[f"{words.group()} {match.group('form')}"] = None
    return list(found)
