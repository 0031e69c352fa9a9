"""The documents of `euro_invoices.py`: the facts of one (`Doc`), each locale's number and date forms, and the
layouts (label/value block, header grid, letter, till receipt, Brazil's DANFE and NFS-e)."""

from __future__ import annotations

import random
import sys
from dataclasses import dataclass, field
from datetime import date, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from lab.experiments.euro_invoices_data import CITIES, MONTHS, NBSP, NNBSP, L


@dataclass
class Doc:
    doc_id: str
    locale: str
    layout: str
    vendor: str
    buyer: str
    number: str
    issue: date
    due: date | None
    currency: str
    rate: float
    items: list[tuple[str, float, float]]  # description, quantity, unit price
    net: float
    vat: float
    total: float
    show_net: bool = True
    show_vat: bool = True
    long_dates: bool = False
    due_terms: str | None = None  # a due date given only as terms ("within 14 days"): gold due is null
    extra: dict = field(default_factory=dict)

    @property
    def lang(self) -> str:
        return self.locale[:2]

    def gold(self) -> dict:
        return {
            "vendor": self.vendor,
            "invoice_number": self.number,
            "issue_date": self.issue.isoformat(),
            "due_date": None if self.due is None else self.due.isoformat(),
            "currency": self.currency,
            "net": round(self.net, 2) if self.show_net else None,
            "vat": round(self.vat, 2) if self.show_vat else None,
            "total": round(self.total, 2),
        }


# ---------------------------------------------------------------- forms


def group(n: int, sep: str) -> str:
    s = str(n)
    parts = []
    while len(s) > 3:
        parts.insert(0, s[-3:])
        s = s[:-3]
    parts.insert(0, s)
    return sep.join(parts)


def amount(x: float, d: Doc, rng: random.Random, grouped: bool = True) -> str:
    """The number as the document's locale writes it (no currency); one grouping symbol per document."""
    cents = round(x * 100)
    whole, frac = divmod(cents, 100)
    locale = d.locale
    if locale == "de_CH":
        sep = d.extra.setdefault("sep", rng.choice(["'", "’"])) if grouped else ""
        return f"{group(whole, sep)}.{frac:02d}"
    if locale == "fr_FR":
        sep = d.extra.setdefault("sep", rng.choice([" ", NBSP, NNBSP])) if grouped else ""
        return f"{group(whole, sep)},{frac:02d}"
    if locale == "fr_BE":
        sep = d.extra.setdefault("sep", rng.choice([".", " "])) if grouped else ""
        return f"{group(whole, sep)},{frac:02d}"
    sep = "." if grouped else ""
    return f"{group(whole, sep)},{frac:02d}"


def money(x: float, d: Doc, rng: random.Random, grouped: bool = True) -> str:
    """The amount with its currency as the locale writes it."""
    a = amount(x, d, rng, grouped)
    loc = d.locale
    style = d.extra.setdefault("money_style", rng.randrange(3))
    if loc == "de_DE":
        return [f"{a} €", f"{a} EUR", f"{a} €"][style]
    if loc == "de_AT":
        return [f"€ {a}", f"EUR {a}", f"€ {a}"][style]
    if loc == "de_CH":
        return [f"CHF {a}", f"{a} CHF", f"Fr. {a}"][style]
    if loc in ("fr_FR", "fr_BE"):
        return [f"{a} €", f"{a} EUR", f"{a}{NBSP}€"][style]
    if loc == "es_ES":
        return [f"{a} €", f"{a} EUR", f"{a}€"][style]
    if loc == "it_IT":
        return [f"€ {a}", f"{a} €", f"EUR {a}"][style]
    if loc in ("nl_NL", "nl_BE"):
        return [f"€ {a}", f"€{a}", f"EUR {a}"][style]
    if loc == "pt_BR":
        return [f"R$ {a}", f"R$ {a}", f"R${a}"][style]
    raise ValueError(loc)


def numeric_date(d: date, locale: str, short_year: bool = False) -> str:
    y = f"{d.year % 100:02d}" if short_year else str(d.year)
    if locale.startswith("de"):
        return f"{d.day:02d}.{d.month:02d}.{y}"
    if locale == "nl_NL":
        return f"{d.day:02d}-{d.month:02d}-{y}"
    return f"{d.day:02d}/{d.month:02d}/{y}"


def long_date(d: date, locale: str) -> str:
    lang = locale[:2]
    month = MONTHS[lang][d.month - 1]
    if locale == "de_AT" and d.month == 1:
        month = "Jänner"
    if lang == "de":
        return f"{d.day}. {month} {d.year}"
    if lang == "fr":
        return f"{'1er' if d.day == 1 else d.day} {month} {d.year}"
    if lang == "es":
        return f"{d.day} de {month} de {d.year}"
    if lang == "it":
        return f"{'1°' if d.day == 1 else d.day} {month} {d.year}"
    if lang == "nl":
        return f"{d.day} {month} {d.year}"
    if lang == "pt":
        return f"{'1º' if d.day == 1 else d.day} de {month} de {d.year}"
    raise ValueError(locale)


def when(d: date, doc: Doc) -> str:
    return long_date(d, doc.locale) if doc.long_dates else numeric_date(d, doc.locale)


def rate_text(rate: float, locale: str) -> str:
    s = f"{rate:g}"
    return s.replace(".", ",") if locale != "de_CH" else s


def vat_label(d: Doc, rng: random.Random) -> str:
    r = rate_text(d.rate, d.locale)
    return {
        "de_DE": rng.choice([f"zzgl. {r} % MwSt.", f"USt. {r} %", f"{r} % MwSt."]),
        "de_AT": rng.choice([f"{r} % USt.", f"zzgl. {r}% USt"]),
        "de_CH": f"MWST {r} %",
        "fr_FR": rng.choice([f"TVA {r} %", f"TVA ({r}%)"]),
        "fr_BE": f"TVA {r}%",
        "es_ES": rng.choice([f"IVA {r}%", f"Cuota IVA ({r} %)", f"I.V.A. {r}%"]),
        "it_IT": rng.choice([f"IVA {r}%", f"IVA al {r}%", f"Imposta (IVA {r}%)"]),
        "nl_NL": rng.choice([f"BTW {r}%", f"btw {r}%"]),
        "nl_BE": f"BTW {r}%",
        "pt_BR": rng.choice([f"ICMS ({r}%)", f"ICMS {r}%"]),
    }[d.locale]


def tax_ids(locale: str, rng: random.Random) -> str:
    def digits(n: int) -> str:
        return "".join(str(rng.randint(0, 9)) for _ in range(n))

    return {
        "de_DE": f"USt-IdNr. DE{digits(9)} · Steuernr. {digits(2)}/{digits(3)}/{digits(5)}",
        "de_AT": f"UID: ATU{digits(8)} · FN {digits(6)}k HG Wien",
        "de_CH": f"CHE-{digits(3)}.{digits(3)}.{digits(3)} MWST",
        "fr_FR": f"SIRET {digits(3)} {digits(3)} {digits(3)} {digits(5)} · TVA intracom. FR{digits(2)} {digits(9)}",
        "fr_BE": f"TVA BE 0{digits(3)}.{digits(3)}.{digits(3)} · RPM Bruxelles",
        "es_ES": f"CIF B{digits(8)}",
        "it_IT": f"P.IVA {digits(11)} · C.F. {digits(11)}",
        "nl_NL": f"KvK {digits(8)} · btw-nr. NL{digits(9)}B01",
        "nl_BE": f"Ondernemingsnr. BE 0{digits(3)}.{digits(3)}.{digits(3)}",
        "pt_BR": f"CNPJ {digits(2)}.{digits(3)}.{digits(3)}/0001-{digits(2)} · "
        f"IE {digits(3)}.{digits(3)}.{digits(3)}.{digits(3)}",
    }[locale]


def iban(locale: str, rng: random.Random) -> str:
    cc = {"de_DE": "DE", "de_AT": "AT", "de_CH": "CH", "fr_FR": "FR", "fr_BE": "BE", "es_ES": "ES", "it_IT": "IT",
          "nl_NL": "NL", "nl_BE": "BE", "pt_BR": "BR"}[locale]
    if cc == "BR":  # Brazil pays by boleto or PIX to an agency and account, not an IBAN
        agency = f"{rng.randint(1000, 9999)}-{rng.randint(0, 9)}"
        return f"Banco do Brasil Ag. {agency} C/C {rng.randint(10000, 99999)}-{rng.randint(0, 9)}"
    body = "".join(str(rng.randint(0, 9)) for _ in range(20))
    return f"IBAN {cc}{rng.randint(10, 99)} " + " ".join(body[i:i + 4] for i in range(0, 20, 4))


def header(d: Doc, rng: random.Random) -> list[str]:
    street, city, phone = rng.choice(CITIES[d.locale])
    d.extra["city"] = city
    tel = {"fr": "Tél.", "pt": "Fone:", "es": "Tfno.", "it": "Tel.", "nl": "Tel.", "de": "Tel."}[d.lang]
    return [d.vendor, street, city, f"{tel} {phone}", tax_ids(d.locale, rng)]


def buyer_block(d: Doc, rng: random.Random) -> list[str]:
    street, city, _ = rng.choice([c for c in CITIES[d.locale] if c[1] != d.extra.get("city")] or CITIES[d.locale])
    return [d.buyer, street, city]


def item_rows(d: Doc, rng: random.Random, with_symbol: bool = False) -> list[str]:
    lab = L[d.lang]["cols"]
    rows = [f"{lab[0]:<5}{lab[1]:<36}{lab[2]:>6}{lab[3]:>14}{lab[4]:>14}"]
    for i, (name, qty, price) in enumerate(d.items, 1):
        line = amount(qty * price, d, rng)
        unit = amount(price, d, rng)
        if with_symbol:
            line, unit = money(qty * price, d, rng), money(price, d, rng)
        q = f"{qty:g}".replace(".", ",")
        rows.append(f"{i:<5}{name:<36}{q:>6}{unit:>14}{line:>14}")
    return rows


def due_terms_line(d: Doc) -> str:
    t = d.due_terms
    return {
        "de": "Zahlbar sofort ohne Abzug." if t == "sofort" else f"Zahlbar innerhalb von {t} Tagen ohne Abzug.",
        "fr": "Paiement à réception de facture." if t == "sofort" else f"Paiement à {t} jours date de facture.",
        "es": "Pago al contado." if t == "sofort" else f"Forma de pago: transferencia a {t} días.",
        "it": "Pagamento: rimessa diretta." if t == "sofort" else f"Pagamento: bonifico bancario a {t} gg d.f.",
        "nl": "Direct te voldoen." if t == "sofort" else f"Gelieve binnen {t} dagen te betalen.",
        "pt": "Pagamento à vista." if t == "sofort" else f"Pagamento em {t} dias.",
    }[d.lang]


def exempt_line(d: Doc) -> str:
    return {
        "de_DE": "Gemäß § 19 UStG wird keine Umsatzsteuer berechnet.",
        "fr_FR": "TVA non applicable, art. 293 B du CGI.",
        "it_IT": "Operazione in franchigia da IVA ai sensi dell'art. 1, commi 54-89, L. 190/2014 (regime forfettario).",
    }[d.locale]


# ---------------------------------------------------------------- layouts


def block(d: Doc, rng: random.Random) -> str:
    v = L[d.lang]
    out = header(d, rng) + [""] + buyer_block(d, rng) + ["", v["title"], ""]
    delivered = d.issue - timedelta(days=rng.randint(1, 9))
    pairs = [
        (rng.choice(v["number"]), d.number),
        (rng.choice(v["date"]), when(d.issue, d)),
        (v["customer"], str(rng.randint(10000, 99999))),
        (v["delivery"], when(delivered, d)),
    ]
    if d.due is not None:
        pairs.append((rng.choice(v["due"]), when(d.due, d)))
    width = max(len(k) for k, _ in pairs) + 2
    colon = rng.random() < 0.7
    for k, val in pairs:
        out.append(f"{k + ':' if colon else k:<{width}}{val}")
    out += [""] + item_rows(d, rng) + [""]
    if d.extra.get("exempt"):
        out.append(f"{rng.choice(v['total'])}: {money(d.total, d, rng)}")
        out.append(exempt_line(d))
    else:
        tot = [(rng.choice(v["net"]), money(d.net, d, rng)), (vat_label(d, rng), money(d.vat, d, rng)),
               (rng.choice(v["total"]), money(d.total, d, rng))]
        w = max(len(k) for k, _ in tot) + 2
        out += [f"{k:<{w}}{val:>16}" for k, val in tot]
    out.append("")
    if d.due is None:
        out.append(due_terms_line(d))
    out += [f"{v['bank']}: {iban(d.locale, rng)}", v["thanks"]]
    return "\n".join(out)


def grid(d: Doc, rng: random.Random) -> str:
    """A header grid: the labels in one row, the values under them (how many invoice templates print it)."""
    v = L[d.lang]
    out = header(d, rng)[:3] + [""] + buyer_block(d, rng) + ["", v["title"], ""]
    labels = [rng.choice(v["number"]), rng.choice(v["date"]), v["customer"]]
    values = [d.number, numeric_date(d.issue, d.locale), str(rng.randint(1000, 99999))]
    if d.due is not None:
        labels.append(rng.choice(v["due"]))
        values.append(numeric_date(d.due, d.locale))
    labels.append(v["page"])
    values.append("1/1")
    widths = [max(len(a), len(b)) + 3 for a, b in zip(labels, values, strict=True)]
    out.append("".join(f"{a:<{w}}" for a, w in zip(labels, widths, strict=True)).rstrip())
    out.append("".join(f"{b:<{w}}" for b, w in zip(values, widths, strict=True)).rstrip())
    out += [""] + item_rows(d, rng) + [""]
    cur = {"EUR": "€", "CHF": "CHF", "BRL": "R$"}[d.currency] if rng.random() < 0.5 else d.currency
    pad = " " * 40
    out.append(f"{pad}{rng.choice(v['net']):<22}{amount(d.net, d, rng):>14}")
    out.append(f"{pad}{vat_label(d, rng):<22}{amount(d.vat, d, rng):>14}")
    out.append(f"{pad}{rng.choice(v['total']) + ' ' + cur:<22}{amount(d.total, d, rng):>14}")
    out.append("")
    if d.due is None:
        out.append(due_terms_line(d))
    out.append(f"{iban(d.locale, rng)} · {tax_ids(d.locale, rng)} · {header(d, rng)[3]}")
    return "\n".join(out)


def prose(d: Doc, rng: random.Random) -> str:
    """A letter: the place and date, a subject line with the number, the amounts in sentences."""
    street, city, phone = rng.choice(CITIES[d.locale])
    d.extra["city"] = city
    town = city.split(" ", 1)[1].split(" - ")[0] if d.locale != "nl_NL" else city.split(" ", 2)[2]
    issue, due = long_date(d.issue, d.locale), None if d.due is None else long_date(d.due, d.locale)
    net, vat, total = money(d.net, d, rng), money(d.vat, d, rng), money(d.total, d, rng)
    r = rate_text(d.rate, d.locale)
    what = d.items[0][0]
    lines = [f"{d.vendor} · {street} · {city}", "", d.buyer, *buyer_block(d, rng)[1:], ""]
    if d.lang == "de":
        lines += [f"{town}, den {issue}", "", f"Rechnung Nr. {d.number}", "", "Sehr geehrte Damen und Herren,", "",
                  f"für die erbrachten Leistungen ({what} u. a.) erlauben wir uns, Ihnen {net} zzgl. {r} % "
                  f"Umsatzsteuer in Höhe von {vat} in Rechnung zu stellen. Der Rechnungsbetrag beläuft sich somit "
                  f"auf {total}."]
        lines.append(f"Bitte überweisen Sie den Betrag bis zum {due} auf unser unten genanntes Konto."
                     if due else due_terms_line(d))
        lines += ["", "Mit freundlichen Grüßen", "", d.vendor]
    elif d.lang == "fr":
        lines += [f"{town}, le {issue}", "", f"Objet : facture n° {d.number}", "", "Madame, Monsieur,", "",
                  f"Nous vous prions de trouver ci-dessous le détail de nos prestations ({what}, etc.) pour un "
                  f"montant de {net} HT, soit {vat} de TVA à {r} %, et un total de {total} TTC."]
        lines.append(f"Ce montant est payable au plus tard le {due} par virement." if due else due_terms_line(d))
        lines += ["", "Veuillez agréer, Madame, Monsieur, l'expression de nos salutations distinguées.", "", d.vendor]
    elif d.lang == "es":
        lines += [f"{town}, a {issue}", "", f"Asunto: factura número {d.number}", "", "Estimados señores:", "",
                  f"Por los trabajos realizados ({what.lower()} y otros) les facturamos una base imponible de {net}, "
                  f"más el {r}% de IVA ({vat}), lo que hace un total de {total}."]
        lines.append(f"Les rogamos efectúen el pago antes del {due}." if due else due_terms_line(d))
        lines += ["", "Atentamente,", "", d.vendor]
    elif d.lang == "it":
        lines += [f"{town}, {issue}", "", f"Oggetto: fattura n. {d.number}", "", "Spett.le Ditta,", "",
                  f"con la presente Vi addebitiamo per {what.lower()} e servizi connessi l'importo imponibile di "
                  f"{net}, oltre IVA al {r}% pari a {vat}, per un totale di {total}."]
        lines.append(f"Il pagamento è da effettuarsi entro il {due} mediante bonifico." if due else due_terms_line(d))
        lines += ["", "Distinti saluti,", "", d.vendor]
    elif d.lang == "nl":
        lines += [f"{town}, {issue}", "", f"Betreft: factuur {d.number}", "", "Geachte heer/mevrouw,", "",
                  f"Voor de uitgevoerde werkzaamheden ({what.lower()} e.d.) brengen wij u {net} excl. btw in rekening. "
                  f"De btw ({r}%) bedraagt {vat}; het totaal komt daarmee op {total}."]
        lines.append(f"Wij verzoeken u het bedrag uiterlijk {due} over te maken." if due else due_terms_line(d))
        lines += ["", "Met vriendelijke groet,", "", d.vendor]
    elif d.lang == "pt":
        lines += [f"{town}, {issue}", "", f"Ref.: Fatura nº {d.number}", "", "Prezados senhores,", "",
                  f"Pelos serviços prestados ({what.lower()} e outros), segue a cobrança de {net}, acrescida de "
                  f"ICMS de {r}% no valor de {vat}, totalizando {total}."]
        lines.append(f"O pagamento deverá ser efetuado até {due}, via boleto ou PIX." if due else due_terms_line(d))
        lines += ["", "Atenciosamente,", "", d.vendor]
    lines += ["", f"{iban(d.locale, rng)} · {tax_ids(d.locale, rng)}"]
    return "\n".join(lines)


def _receipt_de(d: Doc, lines: list[str], v: dict, rng: random.Random) -> list[str]:
    w, r, tot, net, vat, change, cash_s, stamp, hm = (v[k] for k in ("w", "r", "tot", "net", "vat", "change", "cash_s",
                                                                  "stamp", "hm"))
    cur = "CHF" if d.currency == "CHF" else "EUR"
    lines += [f"{'SUMME ' + cur:<{w - 10}}{tot:>10}", f"{'Bar':<{w - 10}}{cash_s:>10}",
              f"{'Rückgeld':<{w - 10}}{change:>10}", ""]
    lines += (["MwSt     Netto    MwSt   Brutto", f"A {r}%  {net:>7} {vat:>7} {tot:>8}"] if d.show_net
              else [f"enth. MwSt {r}%{vat:>{w - 14 - len(r)}}"])
    lines += ["", f"Bon-Nr. {d.number}  Kasse 2", f"{stamp}  {hm}", "Vielen Dank für Ihren Einkauf!"]
    return lines


def _receipt_fr(d: Doc, lines: list[str], v: dict, rng: random.Random) -> list[str]:
    w, r, tot, net, vat, change, cash_s, stamp, hm = (v[k] for k in ("w", "r", "tot", "net", "vat", "change", "cash_s",
                                                                  "stamp", "hm"))
    lines += [f"{'TOTAL TTC':<{w - 10}}{tot + ' €':>10}", f"{'CB':<{w - 10}}{tot:>10}", ""]
    lines += (["Taux   HT      TVA     TTC", f"{r}%  {net:>7} {vat:>6} {tot:>7}"] if d.show_net
              else [f"dont TVA {r}% : {vat}"])
    lines += ["", f"Ticket n° {d.number}", f"Le {stamp} à {hm}", "Merci de votre visite !"]
    return lines


def _receipt_es(d: Doc, lines: list[str], v: dict, rng: random.Random) -> list[str]:
    w, r, tot, net, vat, change, cash_s, stamp, hm = (v[k] for k in ("w", "r", "tot", "net", "vat", "change", "cash_s",
                                                                  "stamp", "hm"))
    lines = ["FACTURA SIMPLIFICADA", *lines, f"{'TOTAL (IVA incl.)':<{w - 10}}{tot + ' €':>10}",
             f"{'Efectivo':<{w - 10}}{cash_s:>10}", f"{'Cambio':<{w - 10}}{change:>10}", ""]
    lines.append(f"Base imp. {net}  IVA {r}% {vat}" if d.show_net else f"IVA {r}% incluido: {vat}")
    lines += ["", f"Ticket nº: {d.number}", f"Fecha: {stamp}  Hora: {hm}", "Gracias por su visita"]
    return lines


def _receipt_it(d: Doc, lines: list[str], v: dict, rng: random.Random) -> list[str]:
    w, r, tot, net, vat, change, cash_s, stamp, hm = (v[k] for k in ("w", "r", "tot", "net", "vat", "change", "cash_s",
                                                                  "stamp", "hm"))
    lines = [*lines[:3], "DOCUMENTO COMMERCIALE", "di vendita o prestazione", "DESCRIZIONE      IVA  Prezzo(€)",
             *lines[4:]]
    lines += [f"{'TOTALE COMPLESSIVO':<{w - 10}}{tot:>10}", f"{'di cui IVA':<{w - 10}}{vat:>10}",
              f"{'Pagamento contante':<{w - 10}}{cash_s:>10}", f"{'Resto':<{w - 10}}{change:>10}", ""]
    lines += [f"Imponibile {net}"] * d.show_net
    lines += ["", f"{stamp} {hm}", f"DOCUMENTO N. {d.number}", "RT 99MEX012345"]
    return lines


def _receipt_nl(d: Doc, lines: list[str], v: dict, rng: random.Random) -> list[str]:
    w, r, tot, net, vat, change, cash_s, stamp, hm = (v[k] for k in ("w", "r", "tot", "net", "vat", "change", "cash_s",
                                                                  "stamp", "hm"))
    lines += [f"{'TOTAAL':<{w - 10}}{'€ ' + tot:>10}", f"{'PIN':<{w - 10}}{tot:>10}", ""]
    lines += (["BTW%   Excl.    BTW    Incl.", f"{r}%  {net:>7} {vat:>6} {tot:>7}"] if d.show_net
              else [f"BTW {r}% over {net} = {vat}"])
    lines += ["", f"Bonnr. {d.number}", f"{stamp} {hm}", "Bedankt en tot ziens!"]
    return lines


def _receipt_pt(d: Doc, lines: list[str], v: dict, rng: random.Random) -> list[str]:
    w, r, tot, net, vat, change, cash_s, stamp, hm = (v[k] for k in ("w", "r", "tot", "net", "vat", "change", "cash_s",
                                                                  "stamp", "hm"))
    lines = [*lines[:3], tax_ids(d.locale, rng).split(" · ")[0],
             "Documento Auxiliar da Nota Fiscal de Consumidor Eletrônica", *lines[3:]]
    lines += [f"Qtde. total de itens{len(d.items):>{w - 20}}", f"{'Valor total R$':<{w - 10}}{tot:>10}",
              f"{'Valor a pagar R$':<{w - 10}}{tot:>10}", f"{'Dinheiro':<{w - 10}}{cash_s:>10}",
              f"{'Troco':<{w - 10}}{change:>10}", "",
              f"NFC-e nº {d.number} Série 001 Emissão {stamp} {hm}:{rng.randint(0, 59):02d}",
              "Consulte pela Chave de Acesso em www.fazenda.sp.gov.br/nfce/consulta",
              "CONSUMIDOR NÃO IDENTIFICADO"]
    return lines


RECEIPT_TAILS = {"de": _receipt_de, "fr": _receipt_fr, "es": _receipt_es, "it": _receipt_it, "nl": _receipt_nl,
                 "pt": _receipt_pt}


def receipt(d: Doc, rng: random.Random) -> str:
    """A till receipt: narrow, gross prices, the VAT in a small table or a line, date and time at the foot."""
    street, city, phone = rng.choice(CITIES[d.locale])
    w = 34
    r = rate_text(d.rate, d.locale)
    lines = [d.vendor.center(w).rstrip(), street.center(w).rstrip(), city.center(w).rstrip(), "-" * w]
    for name, qty, price in d.items:
        a = amount(qty * price, d, rng, grouped=False)
        label = f"{qty:g}x {name}" if qty > 1 else name
        lines.append(f"{label[:w - 10]:<{w - 10}}{a:>10}")
    lines.append("-" * w)
    tot = amount(d.total, d, rng, grouped=False)
    net = amount(d.net, d, rng, grouped=False)
    vat = amount(d.vat, d, rng, grouped=False)
    cash = float(((int(d.total) // 10) + 1) * 10)
    change = amount(cash - d.total, d, rng, grouped=False)
    cash_s = amount(cash, d, rng, grouped=False)
    stamp = f"{d.issue.day:02d}.{d.issue.month:02d}.{d.issue.year % 100:02d}" if d.lang == "de" else (
        numeric_date(d.issue, d.locale) if d.lang != "it" else f"{d.issue.day:02d}-{d.issue.month:02d}-{d.issue.year}")
    hm = f"{rng.randint(7, 19):02d}:{rng.randint(0, 59):02d}"
    lines = RECEIPT_TAILS[d.lang](d, lines, dict(w=w, r=r, tot=tot, net=net, vat=vat, change=change, cash_s=cash_s,
                                                  stamp=stamp, hm=hm), rng)
    return "\n".join(lines)


def danfe(d: Doc, rng: random.Random) -> str:
    """Brazil's DANFE (a printed NF-e): boxed labels over values, the taxes in a grid, the duplicates with due dates."""
    street, city, phone = rng.choice(CITIES[d.locale])
    key = " ".join("".join(str(rng.randint(0, 9)) for _ in range(4)) for _ in range(11))
    prod = amount(d.net, d, rng)
    icms = amount(d.vat, d, rng)
    tot = amount(d.total, d, rng)
    lines = [
        f"RECEBEMOS DE {d.vendor.upper()} OS PRODUTOS CONSTANTES DA NOTA FISCAL INDICADA AO LADO",
        f"NF-e Nº {d.number} SÉRIE 001",
        "",
        "DANFE",
        "Documento Auxiliar da Nota Fiscal Eletrônica",
        "0 - ENTRADA  1 - SAÍDA   [1]",
        f"Nº {d.number}",
        "SÉRIE 001   FOLHA 1/1",
        "",
        d.vendor,
        f"{street} - {city}",
        f"Fone: {phone}",
        "CHAVE DE ACESSO",
        key,
        "NATUREZA DA OPERAÇÃO                      PROTOCOLO DE AUTORIZAÇÃO DE USO",
        f"VENDA DE MERCADORIA                       {rng.randint(10**14, 10**15 - 1)} "
        f"{numeric_date(d.issue, d.locale)}",
        tax_ids(d.locale, rng),
        "",
        "DESTINATÁRIO / REMETENTE",
        "NOME / RAZÃO SOCIAL                          DATA DA EMISSÃO",
        f"{d.buyer:<45}{numeric_date(d.issue, d.locale)}",
        "",
    ]
    if d.due is not None:
        lines += ["FATURA / DUPLICATA", "Número   Vencimento   Valor",
                  f"001      {numeric_date(d.due, d.locale)}   R$ {tot}", ""]
    lines += [
        "CÁLCULO DO IMPOSTO",
        "BASE DE CÁLC. DO ICMS   VALOR DO ICMS   VALOR TOTAL DOS PRODUTOS   VALOR TOTAL DA NOTA",
        f"{prod:<24}{icms:<16}{prod:<27}{tot}",
        "",
        "DADOS DO PRODUTO / SERVIÇO",
        "CÓDIGO  DESCRIÇÃO                           NCM       QUANT.  V. UNIT.   V. TOTAL",
    ]
    for i, (name, qty, price) in enumerate(d.items, 1):
        lines.append(f"{i:06d}  {name:<36}{rng.randint(10000000, 99999999):<10}{qty:>6g}"
                     f"{amount(price, d, rng):>10}{amount(qty * price, d, rng):>11}")
    lines += ["", "DADOS ADICIONAIS", "Valores em reais (R$)."]
    return "\n".join(lines)


def nfse(d: Doc, rng: random.Random) -> str:
    """A municipal service invoice (NFS-e): the service value, ISS, and the net value of the note."""
    street, city, phone = rng.choice(CITIES[d.locale])
    d.rate = 5
    d.vat = round(d.net * 0.05, 2)
    d.total = round(d.net + d.vat, 2)
    lines = [
        "PREFEITURA MUNICIPAL", "NOTA FISCAL DE SERVIÇOS ELETRÔNICA - NFS-e",
        f"Número da Nota: {d.number}",
        f"Data e Hora de Emissão: {numeric_date(d.issue, d.locale)} {rng.randint(8, 18):02d}:{rng.randint(0, 59):02d}:"
        f"{rng.randint(0, 59):02d}",
        f"Código de Verificação: {''.join(rng.choice('ABCDEFGHJKLMNPQRSTUVWXYZ23456789') for _ in range(8))}",
        "", "PRESTADOR DE SERVIÇOS", f"Razão Social: {d.vendor}", f"Endereço: {street} - {city}",
        tax_ids(d.locale, rng).split(" · ")[0], "",
        "TOMADOR DE SERVIÇOS", f"Razão Social: {d.buyer}", "",
        "DISCRIMINAÇÃO DOS SERVIÇOS",
    ]
    for name, qty, price in d.items:
        lines.append(f"{name} - {qty:g} x R$ {amount(price, d, rng)}")
    lines += ["", f"VALOR DOS SERVIÇOS = R$ {amount(d.net, d, rng)}",
              f"Alíquota ISS: 5,00%   Valor do ISS: R$ {amount(d.vat, d, rng)}",
              f"VALOR TOTAL DA NOTA = R$ {amount(d.total, d, rng)}"]
    if d.due is not None:
        lines.append(f"Vencimento do boleto: {numeric_date(d.due, d.locale)}")
    return "\n".join(lines)


LAYOUTS = {"block": block, "grid": grid, "prose": prose, "receipt": receipt, "danfe": danfe, "nfse": nfse}
