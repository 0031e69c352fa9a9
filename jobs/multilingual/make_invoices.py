"""Writes the multilingual corpus: 49 invoices and receipts in German (Germany, Austria, Switzerland), French,
Spanish, Italian, Dutch, Brazilian Portuguese and English, and their gold records.

Deterministic (seeded `random`, no network, no model), so the committed `invoices.parquet` and
`invoices_gold.jsonl` can be re-made byte for byte:

    python jobs/multilingual/make_invoices.py [--out DIR]

Each document is written the way such documents are written where its language is spoken, by hand-written
conventions (no formatting library, so the finders are not checked against the library they are built on):
amounts as `1.234,56 €`, `€ 1.234,56`, `1 234,56 €` (a narrow no-break space or a space), `CHF 2'450.00`,
`R$ 1.234,56`, `£1,234.56`; dates long (`15. Januar 2026`, `1er mars 2026`, `15 de enero de 2026`,
`15 gennaio 2026`, `15 januari 2026`, `15 de janeiro de 2026`) or numeric (`15.01.2026`, `15/01/2026`,
`15-01-2026`); tax as MwSt./MWST/TVA/IVA/BTW/ICMS/VAT; vendors with their legal forms (`GmbH`, `S.A.R.L.`,
`S.r.l.`, `B.V.`, `Ltda.`) and titles (`Ing.`, `Dr.`). Invoices carry line items (amounts beside the totals),
a customer, a VAT id, an IBAN and a phone number; receipts are short and state no due date.

The gold record of a document is the generator's own ground truth (the values it wrote), shaped like
`invoice.MultilingualInvoice`; it never comes from the pipeline's finders.
"""

from __future__ import annotations

import argparse
import json
import random
from datetime import date, timedelta
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

HERE = Path(__file__).resolve().parent
SEED = 20260541
PER_LOCALE = 7  # de (DE, AT, CH), fr, es, it, nl, pt-BR, en: 49 documents
NNBSP = "\u202f"  # French typography's narrow no-break space, as a word processor writes the group separator

MONTHS = {
    "de": "Januar Februar März April Mai Juni Juli August September Oktober November Dezember",
    "fr": "janvier février mars avril mai juin juillet août septembre octobre novembre décembre",
    "es": "enero febrero marzo abril mayo junio julio agosto septiembre octubre noviembre diciembre",
    "it": "gennaio febbraio marzo aprile maggio giugno luglio agosto settembre ottobre novembre dicembre",
    "nl": "januari februari maart april mei juni juli augustus september oktober november december",
    "pt": "janeiro fevereiro março abril maio junho julho agosto setembro outubro novembro dezembro",
    "en": "January February March April May June July August September October November December",
}

# Per locale: language, currency code, how amounts are written, VAT rates, and the document's words.
LOCALES: dict[str, dict] = {
    "de_DE": {"lang": "de", "currency": "EUR", "money": ("{n} €", "{n} EUR"), "sep": (".", ","), "rates": (19, 7),
              "numeric": "{d:02d}.{m:02d}.{y}", "tax": ("zzgl. {r} % MwSt.", "MwSt. {r} %", "USt. {r} %")},
    "de_AT": {"lang": "de", "currency": "EUR", "money": ("€ {n}", "EUR {n}"), "sep": (".", ","), "rates": (20, 10),
              "numeric": "{d:02d}.{m:02d}.{y}", "tax": ("zzgl. {r} % USt.", "MwSt. {r} %")},
    "de_CH": {"lang": "de", "currency": "CHF", "money": ("CHF {n}", "Fr. {n}"), "sep": ("'", "."),
              "rates": (8.1, 2.6), "numeric": "{d:02d}.{m:02d}.{y}", "tax": ("MWST {r} %", "zzgl. MWST {r} %")},
    "fr_FR": {"lang": "fr", "currency": "EUR", "money": ("{n} €", "{n} EUR"), "sep": (NNBSP, ","), "rates": (20, 10),
              "numeric": "{d:02d}/{m:02d}/{y}", "tax": ("TVA {r} %", "TVA ({r} %)")},
    "es_ES": {"lang": "es", "currency": "EUR", "money": ("{n} €", "{n} EUR"), "sep": (".", ","), "rates": (21, 10),
              "numeric": "{d:02d}/{m:02d}/{y}", "tax": ("IVA {r} %", "IVA ({r}%)")},
    "it_IT": {"lang": "it", "currency": "EUR", "money": ("€ {n}", "{n} €", "EUR {n}"), "sep": (".", ","),
              "rates": (22, 10), "numeric": "{d:02d}/{m:02d}/{y}", "tax": ("IVA {r}%", "IVA al {r}%")},
    "nl_NL": {"lang": "nl", "currency": "EUR", "money": ("€ {n}", "EUR {n}"), "sep": (".", ","), "rates": (21, 9),
              "numeric": "{d:02d}-{m:02d}-{y}", "tax": ("BTW {r}%", "BTW {r}% over subtotaal")},
    "pt_BR": {"lang": "pt", "currency": "BRL", "money": ("R$ {n}", "R$ {n}"), "sep": (".", ","), "rates": (18, 12),
              "numeric": "{d:02d}/{m:02d}/{y}", "tax": ("ICMS ({r}%)", "ICMS {r}%")},
    "en_GB": {"lang": "en", "currency": "GBP", "money": ("£{n}", "GBP {n}"), "sep": (",", "."), "rates": (20, 5),
              "numeric": "{d:02d}/{m:02d}/{y}", "tax": ("VAT @ {r}%", "VAT {r}%")},
}
# The German documents are shared among Germany, Austria and Switzerland.
SCHEDULE = ["de_DE", "de_DE", "de_DE", "de_AT", "de_AT", "de_CH", "de_CH"] + [
    loc for loc in ("fr_FR", "es_ES", "it_IT", "nl_NL", "pt_BR", "en_GB") for _ in range(PER_LOCALE)]

WORDS: dict[str, dict[str, tuple[str, ...]]] = {
    "de": {"invoice": ("Rechnung",), "receipt": ("Kassenbeleg", "Quittung"),
           "number": ("Rechnungsnummer:", "Rechnung Nr.", "Rechnungs-Nr.:"), "receipt_no": ("Beleg-Nr.", "Bon-Nr."),
           "issued": ("Rechnungsdatum:", "Datum:"), "due": ("Zahlbar bis:", "Fällig am:", "Zahlungsziel:"),
           "net": ("Nettobetrag", "Summe netto", "Zwischensumme"), "total": ("Gesamtbetrag", "Rechnungsbetrag"),
           "receipt_total": ("SUMME", "Gesamt"), "customer": ("Kunde:", "Rechnungsempfänger:"),
           "items": ("Pos. Menge Bezeichnung Einzelpreis Betrag",), "tel": ("Tel.",), "vat_id": ("USt-IdNr.",),
           "thanks": ("Vielen Dank für Ihren Einkauf!", "Bitte überweisen Sie den Betrag ohne Abzug.")},
    "fr": {"invoice": ("Facture",), "receipt": ("Ticket de caisse", "Reçu"),
           "number": ("Facture n°", "N° de facture :"), "receipt_no": ("Ticket n°",),
           "issued": ("Date :", "Date de facturation :"), "due": ("Échéance :", "À régler avant le"),
           "net": ("Total HT", "Montant HT"), "total": ("Total TTC", "Net à payer"),
           "receipt_total": ("TOTAL TTC", "Total"), "customer": ("Client :", "Facturé à :"),
           "items": ("Qté Désignation Prix unitaire Montant",), "tel": ("Tél.",), "vat_id": ("N° TVA",),
           "thanks": ("Merci de votre visite !", "Pénalités de retard : trois fois le taux d'intérêt légal.")},
    "es": {"invoice": ("Factura",), "receipt": ("Factura simplificada", "Ticket"),
           "number": ("Factura nº", "Número de factura:"), "receipt_no": ("Nº ticket:",),
           "issued": ("Fecha:", "Fecha de emisión:"), "due": ("Vencimiento:", "Fecha de vencimiento:"),
           "net": ("Base imponible",), "total": ("Total factura", "TOTAL"),
           "receipt_total": ("TOTAL", "Total a pagar"), "customer": ("Cliente:",),
           "items": ("Cant. Concepto Precio Importe",), "tel": ("Tel.",), "vat_id": ("CIF",),
           "thanks": ("Gracias por su visita.", "Forma de pago: transferencia bancaria.")},
    "it": {"invoice": ("Fattura",), "receipt": ("Scontrino", "Ricevuta"),
           "number": ("Fattura n.", "Numero fattura:"), "receipt_no": ("Documento n.",),
           "issued": ("Data:", "Data fattura:"), "due": ("Scadenza:", "Data scadenza:"),
           "net": ("Imponibile", "Totale imponibile"), "total": ("Totale documento", "Totale da pagare"),
           "receipt_total": ("TOTALE", "Totale complessivo"), "customer": ("Cliente:", "Spett.le"),
           "items": ("Q.tà Descrizione Prezzo Importo",), "tel": ("Tel.",), "vat_id": ("P.IVA",),
           "thanks": ("Grazie e arrivederci", "Pagamento: bonifico bancario a 30 giorni.")},
    "nl": {"invoice": ("Factuur",), "receipt": ("Kassabon", "Bon"),
           "number": ("Factuurnummer:", "Factuurnr."), "receipt_no": ("Bonnr.",),
           "issued": ("Factuurdatum:", "Datum:"), "due": ("Vervaldatum:", "Te betalen voor:"),
           "net": ("Subtotaal", "Totaal excl. BTW"), "total": ("Totaal incl. BTW", "Te betalen"),
           "receipt_total": ("TOTAAL", "Te betalen"), "customer": ("Klant:", "Factuuradres:"),
           "items": ("Aantal Omschrijving Prijs Bedrag",), "tel": ("Tel.",), "vat_id": ("BTW-nr.",),
           "thanks": ("Bedankt en tot ziens!", "Gelieve het bedrag binnen 30 dagen over te maken.")},
    "pt": {"invoice": ("Nota Fiscal", "Fatura"), "receipt": ("Cupom Fiscal", "Recibo"),
           "number": ("Nota Fiscal nº", "Nº da fatura:"), "receipt_no": ("Cupom nº",),
           "issued": ("Data de emissão:", "Emissão:"), "due": ("Vencimento:", "Data de vencimento:"),
           "net": ("Valor dos produtos", "Subtotal"), "total": ("Valor total", "Total a pagar"),
           "receipt_total": ("TOTAL R$", "Valor a pagar"), "customer": ("Cliente:", "Destinatário:"),
           "items": ("Qtd. Descrição Valor unit. Valor",), "tel": ("Tel.",), "vat_id": ("CNPJ",),
           "thanks": ("Obrigado pela preferência!", "Pagamento via boleto bancário.")},
    "en": {"invoice": ("Invoice", "Tax invoice"), "receipt": ("Receipt",),
           "number": ("Invoice No.", "Invoice number:"), "receipt_no": ("Receipt #",),
           "issued": ("Invoice date:", "Date:"), "due": ("Payment due:", "Due date:"),
           "net": ("Subtotal", "Net amount"), "total": ("Total", "Amount due"),
           "receipt_total": ("TOTAL", "Total paid"), "customer": ("Bill to:", "Customer:"),
           "items": ("Qty Description Unit price Amount",), "tel": ("Tel.",), "vat_id": ("VAT Reg. No.",),
           "thanks": ("Thank you for your custom.", "Please pay by bank transfer within 30 days.")},
}

VENDORS = {
    "de_DE": ("Müller Haustechnik GmbH", "Bäckerei Schneider GmbH & Co. KG", "Schreinerei Weber e.K.",
              "Dr. Fischer Consulting GmbH"),
    "de_AT": ("Ing. Peter Huber Elektrotechnik GmbH", "Gasthaus Zum Hirschen Ing. Mayr KG"),
    "de_CH": ("Keller Informatik AG", "Brunner Gartenbau GmbH"),
    "fr_FR": ("Boulangerie Martin S.A.R.L.", "Atelier Dubois SAS", "Garage Lefèvre et Fils S.A.R.L.",
              "Plomberie Girard EURL"),
    "es_ES": ("Construcciones García Hermanos S.L.", "Distribuciones Pérez S.A.", "Talleres Martínez S.L.",
              "Café Bar La Esquina S.L."),
    "it_IT": ("Rossi Impianti S.r.l.", "Studio Tecnico Ing. Bianchi", "Ferramenta Colombo S.n.c.",
              "Trattoria Da Mario S.a.s."),
    "nl_NL": ("Van den Berg Installatietechniek B.V.", "Bakkerij De Vries", "Jansen & Zonen B.V.",
              "Ing. J. Visser Advies B.V."),
    "pt_BR": ("Comércio de Alimentos Silva Ltda.", "Oliveira & Filhos Ltda.", "Padaria Pão Dourado ME",
              "Eng. Carlos Pereira Serviços Ltda."),
    "en_GB": ("Harrison & Co. Ltd", "Bluebell Catering Ltd.", "Dr. Patel Dental Practice", "Greenway Supplies Ltd"),
}
CUSTOMERS = ("Anna Schmidt", "Jean Dupont", "María López", "Giulia Conti", "Pieter de Jong", "João Santos",
             "Oliver Smith", "Hoffmann & Partner GmbH", "Société Lemoine SA", "Estudio Ruiz S.L.")
ADDRESSES = {
    "de_DE": ("Hauptstraße 12, 80331 München", "Bahnhofstr. 5, 50667 Köln"),
    "de_AT": ("Mariahilfer Straße 88, 1070 Wien", "Herrengasse 3, 8010 Graz"),
    "de_CH": ("Bahnhofstrasse 21, 8001 Zürich", "Marktgasse 9, 3011 Bern"),
    "fr_FR": ("12, rue de la République, 69002 Lyon", "8 avenue Jean Jaurès, 31000 Toulouse"),
    "es_ES": ("Calle Mayor, 24, 28013 Madrid", "Avda. Diagonal 410, 08037 Barcelona"),
    "it_IT": ("Via Roma 45, 20121 Milano", "Corso Vittorio Emanuele II 112, 10121 Torino"),
    "nl_NL": ("Keizersgracht 221, 1016 DV Amsterdam", "Oudegracht 54, 3511 AS Utrecht"),
    "pt_BR": ("Rua Augusta, 1508 - Consolação, São Paulo - SP, 01304-001", "Av. Atlântica, 2200, Rio de Janeiro - RJ"),
    "en_GB": ("14 High Street, Oxford OX1 4AH", "221 Deansgate, Manchester M3 4EN"),
}
DIAL = {"de_DE": 49, "de_AT": 43, "de_CH": 41, "fr_FR": 33, "es_ES": 34, "it_IT": 39, "nl_NL": 31, "pt_BR": 55,
        "en_GB": 44}
ITEMS = {
    "de": ("Wartung Heizungsanlage", "Arbeitsstunden Monteur", "Kupferrohr 15 mm", "Brötchen", "Kaffee"),
    "fr": ("Main d'œuvre", "Pièces détachées", "Baguette tradition", "Croissant", "Révision annuelle"),
    "es": ("Mano de obra", "Material eléctrico", "Café con leche", "Tostada", "Transporte"),
    "it": ("Manodopera", "Materiale idraulico", "Consulenza tecnica", "Caffè", "Cornetto"),
    "nl": ("Arbeidsloon", "Installatiemateriaal", "Volkorenbrood", "Koffie", "Advieswerk"),
    "pt": ("Mão de obra", "Material de construção", "Pão francês (kg)", "Café expresso", "Frete"),
    "en": ("Consultation", "Labour (hours)", "Printer paper A4", "Flat white", "Delivery"),
}
NUMBERS = {
    "de": ("RE-2026-{n:04d}", "2026-{n:04d}", "{n}"), "fr": ("F2026-{n:05d}", "FA-{n}"),
    "es": ("2026/{n:04d}", "A-{n:04d}"), "it": ("{n}", "{n}/2026", "FPR {n}/26"), "nl": ("2026-{n:04d}", "F26-{n}"),
    "pt": ("{a}.{b:03d}", "000.{a}.{b:03d}"), "en": ("INV-{n:05d}", "{n}"),
}


def written_number(cents: int, group: str, decimal: str) -> str:
    """An amount in cents as the locale writes it: `1.234,56`, `1 234,56`, `2'450.00`, `1,234.56`."""
    units, rest = divmod(cents, 100)
    digits = f"{units}"
    groups = [digits[max(0, i - 3):i] for i in range(len(digits), 0, -3)][::-1]
    return f"{group.join(groups)}{decimal}{rest:02d}"


def money(cents: int, loc: dict, rng: random.Random, style: int | None = None) -> str:
    group, decimal = loc["sep"]
    if loc["lang"] == "fr" and rng.random() < 0.4:
        group = " "  # a plain space, as many French documents type it
    pattern = loc["money"][style if style is not None else rng.randrange(len(loc["money"]))]
    return pattern.format(n=written_number(cents, group, decimal))


def long_date(day: date, lang: str, rng: random.Random) -> str:
    month = MONTHS[lang].split()[day.month - 1]
    if lang == "de":
        return f"{day.day}. {month} {day.year}"
    if lang == "fr":
        return f"{'1er' if day.day == 1 else day.day} {month} {day.year}"
    if lang in ("es", "pt"):
        return f"{day.day} de {month} de {day.year}"
    if lang == "en":
        suffix = "th" if 10 <= day.day % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(day.day % 10, "th")
        return rng.choice((f"{month} {day.day}, {day.year}", f"{day.day}{suffix} {month} {day.year}",
                           f"{day.day} {month} {day.year}"))
    return f"{'1°' if lang == 'it' and day.day == 1 else day.day} {month} {day.year}"


def written_date(day: date, loc: dict, rng: random.Random, long: bool) -> str:
    return long_date(day, loc["lang"], rng) if long else loc["numeric"].format(d=day.day, m=day.month, y=day.year)


def facts(i: int, locale: str, rng: random.Random) -> dict:
    """One document's facts: the gold fields and what else the document writes."""
    loc = LOCALES[locale]
    lang = loc["lang"]
    receipt = i % PER_LOCALE in (5, 6)  # two receipts per locale
    issued = date(2026, 1, 1) + timedelta(days=rng.randrange(300))
    due = None if receipt else issued + timedelta(days=rng.choice((14, 30, 30, 60)))
    lines = []
    for _ in range(rng.randint(1, 2) if receipt else rng.randint(1, 3)):
        qty = rng.randint(1, 4)
        unit = rng.randint(120, 1400) if receipt else rng.randint(4500, 280000)
        lines.append((qty, rng.choice(ITEMS[lang]), unit))
    net = sum(q * u for q, _, u in lines)
    rate = rng.choice(loc["rates"])
    vat = round(net * rate / 100)
    n = rng.randint(20, 9999)
    pattern = rng.choice(NUMBERS[lang])
    number = pattern.format(n=n, a=rng.randint(100, 999), b=rng.randint(0, 999))
    return {"locale": locale, "loc": loc, "lang": lang, "receipt": receipt, "issued": issued, "due": due,
            "lines": lines, "net": net, "rate": rate, "vat": vat, "total": net + vat, "number": number,
            "vendor": VENDORS[locale][i % len(VENDORS[locale])], "address": rng.choice(ADDRESSES[locale]),
            "customer": rng.choice(CUSTOMERS), "phone": f"+{DIAL[locale]} {rng.randint(10, 99)} "
            f"{rng.randint(100, 999)} {rng.randint(1000, 9999)}", "long_issue": rng.random() < 0.6,
            "long_due": rng.random() < 0.4}


def gold_record(f: dict) -> dict:
    return {"vendor": f["vendor"], "invoice_number": f["number"], "issue_date": f["issued"].isoformat(),
            "due_date": f["due"].isoformat() if f["due"] else None, "currency": f["loc"]["currency"],
            "net": f["net"] / 100, "vat": f["vat"] / 100, "total": f["total"] / 100}


def _word(f: dict, key: str, rng: random.Random) -> str:
    return rng.choice(WORDS[f["lang"]][key])


def _rate(f: dict) -> str:
    rate = f"{f['rate']:g}"
    return rate.replace(".", ",") if f["loc"]["sep"][1] == "," else rate


def item_lines(f: dict, rng: random.Random, style: int) -> list[str]:
    out = []
    for pos, (qty, name, unit) in enumerate(f["lines"], 1):
        prefix = f"{pos}  " if f["lang"] == "de" and not f["receipt"] else ""
        out.append(f"{prefix}{qty} x {name}    {money(unit, f['loc'], rng, style)}    "
                   f"{money(qty * unit, f['loc'], rng, style)}")
    return out


def totals(f: dict, rng: random.Random, style: int) -> list[str]:
    tax = rng.choice(f["loc"]["tax"]).format(r=_rate(f))
    net, vat = money(f["net"], f["loc"], rng, style), money(f["vat"], f["loc"], rng, style)
    total = money(f["total"], f["loc"], rng, style)
    if f["receipt"]:
        return [f"{_word(f, 'receipt_total', rng)}    {total}", f"{tax}    {vat}", f"{_word(f, 'net', rng)}    {net}"]
    return [f"{_word(f, 'net', rng)}    {net}", f"{tax}    {vat}", f"{_word(f, 'total', rng)}    {total}"]


def tax_id(f: dict, rng: random.Random) -> str:
    """The vendor's tax number as the country writes it (a CNPJ in Brazil, a VAT id elsewhere)."""
    if f["locale"] == "pt_BR":
        return f"{rng.randint(10, 99)}.{rng.randint(100, 999)}.{rng.randint(100, 999)}/0001-{rng.randint(10, 99)}"
    return f"{f['locale'][-2:]}{rng.randint(10**8, 10**9 - 1)}"


def invoice_text(f: dict, rng: random.Random) -> str:
    style = rng.randrange(len(f["loc"]["money"]))
    words = WORDS[f["lang"]]
    head = [f["vendor"], f["address"], f"{rng.choice(words['tel'])} {f['phone']}",
            f"{rng.choice(words['vat_id'])} {tax_id(f, rng)}", ""]
    head += [f"{_word(f, 'invoice', rng)}", f"{_word(f, 'number', rng)} {f['number']}",
             f"{_word(f, 'issued', rng)} {written_date(f['issued'], f['loc'], rng, f['long_issue'])}",
             f"{_word(f, 'due', rng)} {written_date(f['due'], f['loc'], rng, f['long_due'])}", "",
             f"{_word(f, 'customer', rng)} {f['customer']}", ""]
    body = [words["items"][0], *item_lines(f, rng, style), "", *totals(f, rng, style), ""]
    tail = [f"IBAN {f['locale'][-2:]}{rng.randint(10, 99)} {rng.randint(1000, 9999)} {rng.randint(1000, 9999)} "
            f"{rng.randint(1000, 9999)} {rng.randint(1000, 9999)} {rng.randint(10, 99)}", _word(f, "thanks", rng)]
    return "\n".join(head + body + tail)


def receipt_text(f: dict, rng: random.Random) -> str:
    style = rng.randrange(len(f["loc"]["money"]))
    when = written_date(f["issued"], f["loc"], rng, f["long_issue"])
    head = [f["vendor"], f["address"], f"{_word(f, 'tel', rng)} {f['phone']}", "", _word(f, "receipt", rng),
            f"{when}  {rng.randint(7, 21):02d}:{rng.randint(0, 59):02d}", f"{_word(f, 'receipt_no', rng)} "
            f"{f['number']}", ""]
    return "\n".join(head + item_lines(f, rng, style) + [""] + totals(f, rng, style) + ["", _word(f, "thanks", rng)])


def corpus() -> tuple[list[str], list[str], list[str], list[dict]]:
    rng = random.Random(SEED)
    ids, locales, texts, golds = [], [], [], []
    for i, locale in enumerate(SCHEDULE):
        f = facts(i, locale, rng)
        ids.append(f"ml-{i:02d}-{locale}")
        locales.append(locale)
        texts.append(receipt_text(f, rng) if f["receipt"] else invoice_text(f, rng))
        golds.append(gold_record(f))
    return ids, locales, texts, golds


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, default=HERE)
    out = p.parse_args().out
    out.mkdir(parents=True, exist_ok=True)
    ids, locales, texts, golds = corpus()
    pq.write_table(pa.table({"doc_id": ids, "locale": locales, "text": texts}), out / "invoices.parquet")
    with (out / "invoices_gold.jsonl").open("w") as fh:
        for doc_id, gold in zip(ids, golds, strict=True):
            fh.write(json.dumps({"doc_id": doc_id, "record": gold}, ensure_ascii=False) + "\n")
    print(f"wrote {len(ids)} documents to {out / 'invoices.parquet'} and their gold to {out / 'invoices_gold.jsonl'}")


if __name__ == "__main__":
    main()
