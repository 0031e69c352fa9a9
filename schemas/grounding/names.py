"""Organisation names in the form registries write them: without the comma before the legal form
(`KITE PHARMA, INC.` → `KITE PHARMA INC.`, `Wells Fargo Securities, LLC` → `Wells Fargo Securities LLC`).

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
    word = r"[^\s,;:()\"“”]+"
    return re.compile(rf"(?P<name>{word}(?:[ \t]+{word}){{0,{MAX_NAME_WORDS - 1}}}),[ \t]+"
                      rf"(?P<form>{forms})(?![^\W_])", re.IGNORECASE)


NAME_FORM = _pattern()


def comma_free_names(text: str) -> list[str]:
    """Each `<up to MAX_NAME_WORDS words>, <legal form>` the text writes, without the comma (`NIKE, Inc.` →
    `NIKE Inc.`), in order of first appearance."""
    found: dict[str, None] = {}
    for match in NAME_FORM.finditer(text):
        name = match.group("name")
        if any(c.isupper() for c in name):
            found[f"{name} {match.group('form')}"] = None
    return list(found)
