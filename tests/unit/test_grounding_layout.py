"""Wrapped prose is prose, not a table: schemas.grounding.layout, issue 56."""

from __future__ import annotations

from schemas.grounding.finders import items
from schemas.grounding.layout import wrapped

# A contract as a PDF's text layer writes it: its sentences broken into lines of a page's width
CONTRACT = """CONFIDENTIALITY AGREEMENT
This Agreement (the "Agreement") takes effect on March 3, 2020 and is made between Birch Pharma,
Inc., a Delaware corporation, and Cedar Sciences, Inc. In connection with the evaluation of a possible
transaction, each party may disclose to the other certain confidential information relating to its business.
The receiving party shall hold the information in confidence and shall not use it for any purpose
other than the evaluation of the transaction, and shall protect it with at least the same degree of
care that it uses to protect its own information of a similar nature.
The obligations of this Agreement survive for seven years."""

INVOICE = """ACME Tools GmbH
Rechnung Nr. 1528
Datum: 15.01.2026
Pos | Artikel | Menge | Preis
1 | Hammer | 2 | 12,50 €
2 | Zange | 1 | 8,90 €
Summe netto: 33,90 €
MwSt. 19 %: 6,44 €
Gesamtbetrag: 40,34 €"""

E_MAIL = """Hi team,
my order #60589 arrived today but the blender is missing its lid and
the box was damaged. could you send a replacement lid or refund the
order? i paid with my card ending in 4242 and would prefer a refund
to the same card if a replacement is not possible within a week.
thanks, dana"""


def test_a_contract_broken_into_lines_is_wrapped_prose():
    assert wrapped(CONTRACT)
    assert wrapped(E_MAIL)


def test_forms_and_tables_are_not():
    assert not wrapped(INVOICE)
    assert not wrapped("Name: Ada\nDate: 2026-01-15\nTotal: 12.00\nStatus: paid\nRef: A-1\nNote: none")
    assert not wrapped("one line of prose only, however long it is")


def test_a_lists_strings_in_wrapped_prose_are_runs_of_its_words_not_whole_lines():
    found = items(CONTRACT)
    assert "Cedar Sciences" in found  # a name inside a line (before: only the whole line)
    assert "Hammer" in items(INVOICE) and "1 | Hammer" not in items(INVOICE)  # a table's cells, as before
