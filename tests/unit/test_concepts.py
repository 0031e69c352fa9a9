"""Label concepts in any language (`schemas.grounding.concepts`) and the `concepts` screen: a field that holds an
invoice concept keeps the values the document labels with it, in the document's own words (issue 54)."""

from __future__ import annotations

from typing import Any

import pytest

from schemas.grounding import ground
from schemas.grounding.concepts import field_concept
from schemas.grounding.dates import dates
from schemas.grounding.index import DocumentIndex
from schemas.grounding.screens import FieldContext, concepts, screen, screened

SCHEMA: dict[str, Any] = {"type": "object", "properties": {
    "invoice_number": {"anyOf": [{"type": "string"}, {"type": "null"}]},
    "issue_date": {"type": "string", "format": "date"},
    "due_date": {"anyOf": [{"type": "string", "format": "date"}, {"type": "null"}]},
    "net": {"anyOf": [{"type": "number"}, {"type": "null"}]}, "vat": {"anyOf": [{"type": "number"}, {"type": "null"}]},
    "total": {"type": "number"}}}

# Real-world heads and totals of an invoice in each language, as its printers lay them out: label, two spaces, value
INVOICES = {
    "de": ("Rechnung Nr. RE-2026-8606\nRechnungsdatum: 13. Februar 2026\nZahlungsziel: 15.03.2026\n"
           "1  2 x Kupferrohr 15 mm    975,32 €    1.950,64 €\n"
           "Summe netto    1.950,64 €\nzzgl. 19 % MwSt.    370,62 €\nRechnungsbetrag    2.321,26 €\n"),
    "fr": ("Facture n° F2026-02670\nDate de facturation : 8 juillet 2026\nÉchéance : 22 juillet 2026\n"
           "3 x Croissant    1 970,02 EUR    5 910,06 EUR\n"
           "Total HT    5 910,06 EUR\nTVA 20 %    1 182,01 EUR\nTotal TTC    7 092,07 EUR\n"),
    "es": ("Factura nº A-8423\nFecha: 3 de julio de 2026\nVencimiento: 2 de agosto de 2026\n"
           "2 x Material eléctrico    1.296,11 EUR    2.592,22 EUR\n"
           "Base imponible    2.592,22 EUR\nIVA (21%)    544,37 EUR\nTOTAL    3.136,59 EUR\n"),
    "it": ("Numero fattura: FT-8014\nData fattura: 12 maggio 2026\nData scadenza: 11 luglio 2026\n"
           "2 x Manodopera    573,38 €    1.146,76 €\n"
           "Totale imponibile    1.146,76 €\nIVA 10%    114,68 €\nTotale documento    1.261,44 €\n"),
    "nl": ("Factuurnummer: 2026-7108\nFactuurdatum: 11 januari 2026\nTe betalen voor: 12 maart 2026\n"
           "3 x Koffie    EUR 1.155,76    EUR 3.467,28\n"
           "Subtotaal    EUR 3.467,28\nBTW 9% over subtotaal    EUR 312,06\nTe betalen    EUR 3.779,34\n"),
    "pt": ("Nº da fatura: 000.143.446\nData de emissão: 26 de agosto de 2026\n"
           "Data de vencimento: 25 de setembro de 2026\n4 x Café expresso    R$ 1.857,62    R$ 7.430,48\n"
           "Subtotal    R$ 7.430,48\nICMS 18%    R$ 1.337,49\nTotal a pagar    R$ 8.767,97\n"),
    "en": ("Invoice number: INV-2217\nDate: 6th February 2026\nDue date: 7 April 2026\n"
           "4 x Printer paper A4    £1,667.99    £6,671.96\n"
           "Net amount    £6,671.96\nVAT 20%    £1,334.39\nAmount due    £8,006.35\n"),
}
EXPECTED = {
    "de": ("RE-2026-8606", "2026-02-13", "2026-03-15", 1950.64, 370.62, 2321.26),
    "fr": ("F2026-02670", "2026-07-08", "2026-07-22", 5910.06, 1182.01, 7092.07),
    "es": ("A-8423", "2026-07-03", "2026-08-02", 2592.22, 544.37, 3136.59),
    "it": ("FT-8014", "2026-05-12", "2026-07-11", 1146.76, 114.68, 1261.44),
    "nl": ("2026-7108", "2026-01-11", "2026-03-12", 3467.28, 312.06, 3779.34),
    "pt": ("000.143.446", "2026-08-26", "2026-09-25", 7430.48, 1337.49, 8767.97),
    "en": ("INV-2217", "2026-02-06", "2026-04-07", 6671.96, 1334.39, 8006.35),
}


def _enum(node: dict[str, Any]) -> list[Any] | None:
    for branch in [node, *(node.get("anyOf") or [])]:
        if isinstance(branch, dict) and "enum" in branch:
            return branch["enum"]
    return None


@pytest.mark.parametrize("language", sorted(INVOICES))
def test_each_languages_labels_leave_each_field_the_value_under_its_own_label(language: str) -> None:
    """Without the `concepts` screen the dates hold both dates, the amounts every amount of the document (the
    item's price, the net, the tax and the total), and the number its neighbours: the multilingual job's model
    took the neighbouring label's value for 14 issue dates and 29 totals."""
    grounded = ground(SCHEMA, INVOICES[language], mode="auto")["properties"]
    fields = ("invoice_number", "issue_date", "due_date", "net", "vat", "total")
    found = {f: _enum(grounded[f]) for f in fields}
    assert found == {f: [v] for f, v in zip(fields, EXPECTED[language], strict=True)}


def test_without_the_screen_the_neighbours_values_stay() -> None:
    """The same German invoice under the screens before issue 54's concepts: several candidates per field."""
    grounded = ground(SCHEMA, INVOICES["de"], mode="auto", screens=("placeholders", "sent", "labels"))["properties"]
    assert len(_enum(grounded["total"]) or []) > 1 and len(_enum(grounded["issue_date"]) or []) == 2


def test_a_field_holds_a_concept_by_its_english_name() -> None:
    assert field_concept("issue_date") == "issue_date" and field_concept("InvoiceDate") == "issue_date"
    assert field_concept("vat") == "tax" and field_concept("total_amount") == "total"
    assert field_concept("subtotal") == "net" and field_concept("invoiceNumber") == "invoice_number"
    assert field_concept("order_date") is None and field_concept("amount") is None and field_concept(None) is None


def test_a_rate_is_not_the_tax_amount() -> None:
    """`IVA (21%)`: the 21 stands under the tax's label too, but a `%` follows it."""
    document = "Base imponible    100,00 EUR\nIVA (21%)    21,50 EUR\nTotal    121,50 EUR\n"
    assert _enum(ground(SCHEMA, document, mode="auto")["properties"]["vat"]) == [21.5]


RECEIPT = ("Ticket de caisse\n14 février 2026  19:03\nTicket n° F2026-01655\n1 x Croissant    6,48 EUR\n"
           "Total    6,48 EUR\nTVA (10 %)    0,59 EUR\nMontant HT    5,89 EUR\n")


def test_the_screen_never_removes_the_last_candidate() -> None:
    """A receipt's only date for a nullable `due_date`: the screen alone would leave none (the receipt labels no due
    date), and `screened` keeps it, saying the field is in doubt; a required one keeps it without doubt."""
    index = DocumentIndex(RECEIPT, "fr")
    rivals = frozenset({"issue_date", "invoice_number", "net", "tax", "total"})
    field = FieldContext("date", True, frozenset({"due", "date"}), (), "due_date", rivals)
    assert concepts(["2026-02-14"], field, index) == []  # what the screen alone would leave
    assert screened(["2026-02-14"], field, index, ("concepts",)) == ["2026-02-14"]
    assert screen(["2026-02-14"], field, index, ("concepts",)) == (["2026-02-14"], True)
    required = FieldContext("date", False, frozenset({"due", "date"}), (), "due_date", rivals)
    assert screen(["2026-02-14"], required, index, ("concepts",)) == (["2026-02-14"], False)


def test_a_value_under_a_label_the_lexicon_lacks_stays() -> None:
    """`Total sem IVA` (pt-PT's net) reads as a total: a `net` that the document labels nowhere keeps every
    candidate, the net among them (dropping values under other fields' concepts refused 4 of 30 such nets)."""
    document = "Total sem IVA: 100,00 €\nIVA 23%: 23,00 €\nTotal a pagar: 123,00 €\n"
    assert 100.0 in (_enum(ground(SCHEMA, document, mode="auto")["properties"]["net"]) or [])


def test_a_receipt_without_a_due_date_label_leaves_the_due_date_free() -> None:
    """A receipt labels its number, tax and total but no due date: its only date is in doubt for `due_date`,
    which keeps its plain type and null (the model's unsure value there is null after decoding), while the issue
    date keeps it; on the multilingual job 14 receipts' due dates were the issue date, invented."""
    grounded = ground(SCHEMA, RECEIPT, mode="auto")["properties"]
    assert _enum(grounded["due_date"]) is None and {"type": "null"} in grounded["due_date"]["anyOf"]
    assert _enum(grounded["issue_date"]) == ["2026-02-14"]


def test_a_dotted_date_or_the_documents_own_dates_decide_the_order() -> None:
    assert dates("Rechnungsdatum: 06.03.2026") == ["2026-03-06"]  # dots: day first in every locale
    assert dates("Datum: 06/03/2026, geliefert 24/02/2026") == ["2026-03-06", "2026-02-24"]
    assert dates("Date: 06/03/2026, shipped 02/24/2026") == ["2026-06-03", "2026-02-24"]
    assert dates("Date: 06/03/2026") == ["2026-03-06", "2026-06-03"]  # nothing decides: both readings
