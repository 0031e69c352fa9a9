"""A blind stand-in for issue 54's held-out job: European invoices and receipts, and their gold.

Written without reading `schemas/grounding/` or `jobs/multilingual/make_invoices.py`, so that the finders were
never tuned on it. 42 documents in German (DE, AT, CH), French (FR, BE), Spanish, Italian, Dutch (NL, BE) and
Brazilian Portuguese, written the way such documents are written there: label/value blocks, a header grid (labels
in one row, values under them), letters in prose, till receipts, and Brazil's DANFE and NFS-e. Each country's
number forms (1.234,56 €, € 1.234,56, 1 234,56 €, CHF 1'234.50, R$ 1.234,56), date forms (15.01.2026, 15. Januar
2026, 15. Jänner 2026, 1er mars 2026, 15 de enero de 2026, 3 gennaio 2026, 15-01-2026, 15 de janeiro de 2026,
15.01.26), tax names (MwSt., USt., MWST, TVA, IVA, BTW, ICMS, ISS), legal forms and invoice numbers (1528,
FPR 3715/26, 804.089, RE-2026-0042, 12/2026, 000.012.345). Some documents state no due date, some no net or VAT.

The gold comes from the generator's own ground truth (the values it writes into the text), never from a finder.
A value the document does not write is null in the gold (a due date given only as "within 14 days", a net a
receipt does not state). Currency is the ISO 4217 code of the document's money, which it may write only as a
symbol (€, R$, Fr.).

    python lab/experiments/euro_invoices.py --out /tmp/euro [--seed 54]
    # OUT/input.parquet (doc_id, text), OUT/gold.jsonl, OUT/euro_invoice.py (a plain 8-field model), OUT/job.yaml
    PYTHONPATH=$PWD python lab/reach.py /tmp/euro/job.yaml --gold /tmp/euro/gold.jsonl --refusals
    flock /work/notes/heavy.lock env PYTHONPATH=$PWD python -m pipeline eval /tmp/euro/job.yaml \\
        --gold /tmp/euro/gold.jsonl --output /tmp/euro/run1

Stdlib plus pyarrow (to write the Parquet). Deterministic for a seed.
"""

from __future__ import annotations

import argparse
import json
import random
from dataclasses import dataclass, field
from datetime import date, timedelta
from pathlib import Path

NBSP = "\u00a0"
NNBSP = "\u202f"

# Per locale: how many documents, and which layouts they take (cycled in order).
PLAN: list[tuple[str, int, list[str]]] = [
    ("de_DE", 5, ["block", "grid", "prose", "receipt", "block"]),
    ("de_AT", 3, ["block", "prose", "receipt"]),
    ("de_CH", 2, ["grid", "block"]),
    ("fr_FR", 5, ["block", "grid", "prose", "receipt", "block"]),
    ("fr_BE", 2, ["grid", "block"]),
    ("es_ES", 6, ["block", "grid", "prose", "receipt", "block", "grid"]),
    ("it_IT", 6, ["block", "grid", "prose", "receipt", "block", "prose"]),
    ("nl_NL", 5, ["block", "grid", "prose", "receipt", "block"]),
    ("nl_BE", 2, ["block", "grid"]),
    ("pt_BR", 6, ["danfe", "nfse", "block", "prose", "receipt", "danfe"]),
]

MONTHS = {
    "de": "Januar Februar März April Mai Juni Juli August September Oktober November Dezember".split(),
    "fr": "janvier février mars avril mai juin juillet août septembre octobre novembre décembre".split(),
    "es": "enero febrero marzo abril mayo junio julio agosto septiembre octubre noviembre diciembre".split(),
    "it": "gennaio febbraio marzo aprile maggio giugno luglio agosto settembre ottobre novembre dicembre".split(),
    "nl": "januari februari maart april mei juni juli augustus september oktober november december".split(),
    "pt": "janeiro fevereiro março abril maio junho julho agosto setembro outubro novembro dezembro".split(),
}

VENDORS = {
    "de_DE": ["Elektro Brandt GmbH", "Druckerei Hoffmann & Söhne KG", "Kanzlei Dr. Wagner & Partner mbB",
              "Bäckerei Vogt", "Autohaus Krüger GmbH & Co. KG", "Getränke Lindner e.K."],
    "de_AT": ["Ing. Franz Huber GmbH", "Tischlerei Gruber KG", "Café Konditorei Moser OG"],
    "de_CH": ["Sanitär Keller AG", "Treuhand Meier & Co. GmbH"],
    "fr_FR": ["Atelier Dubois SAS", "Cabinet Girard & Associés", "Plomberie Lefèvre EURL",
              "Boulangerie Martin SARL", "Imprimerie Rousseau SA"],
    "fr_BE": ["Menuiserie Lambert SRL", "Bureau d'études Dupont SA"],
    "es_ES": ["Reformas García Hermanos S.L.", "Distribuciones López S.A.", "Asesoría Fernández y Asociados S.L.",
              "Cafetería El Sol S.C.", "Taller Mecánico Ruiz S.L.U.", "Gráficas Navarro S.L."],
    "it_IT": ["Idraulica Bianchi S.r.l.", "Ferramenta Colombo S.p.A.", "Studio Tecnico Ing. Ferrari S.r.l.",
              "Bar Pasticceria Ricci di Ricci Marco", "Tipografia Esposito S.n.c.", "Trasporti Romano & Figli S.r.l."],
    "nl_NL": ["Installatiebedrijf De Vries B.V.", "Schildersbedrijf Bakker V.O.F.", "Adviesbureau Visser & Co B.V.",
              "Bakkerij Jansen", "Drukkerij Smit B.V."],
    "nl_BE": ["Bouwbedrijf Peeters BV", "Brouwerij Claes NV"],
    "pt_BR": ["Silva Materiais de Construção Ltda.", "Costa Informática Ltda. - ME", "Auto Peças Almeida Ltda.",
              "Oliveira & Souza Serviços Contábeis Ltda.", "Padaria Pão Dourado Ltda.",
              "Transportadora Rodrigues S.A."],
}

BUYERS = {
    "de": ["Schulz Immobilien GmbH", "Praxis Dr. med. Anna Roth", "Fischer Logistik AG", "Gemeinde Oberau"],
    "fr": ["SCI Les Tilleuls", "Garage Moreau SARL", "Mairie de Saint-Aubin", "Laurent Conseil SAS"],
    "es": ["Comunidad de Propietarios Calle Olmo 7", "Hostal Sánchez S.L.", "Clínica Dental Ortega S.L.P."],
    "it": ["Condominio Via Verdi 12", "Ristorante Da Gino S.r.l.", "Farmacia Conti S.a.s."],
    "nl": ["Vereniging van Eigenaars Parkzicht", "Hotel De Linde B.V.", "Tandartspraktijk Mulder"],
    "pt": ["Construtora Pereira Ltda.", "Condomínio Edifício Aurora", "Clínica Santos & Lima S/S"],
}

ITEMS = {
    "de": [("Arbeitszeit Monteur (Std.)", 58.0, 78.0), ("Installationsmaterial pauschal", 40.0, 260.0),
           ("Anfahrt", 25.0, 45.0), ("Beratung (Std.)", 95.0, 160.0), ("Druck Flyer A5, 2.000 Stk.", 180.0, 420.0),
           ("Wartung Heizungsanlage", 120.0, 240.0), ("Entsorgung Altmaterial", 30.0, 85.0)],
    "fr": [("Main d'œuvre (heure)", 45.0, 72.0), ("Fournitures diverses", 30.0, 240.0),
           ("Déplacement", 25.0, 60.0), ("Honoraires de conseil", 300.0, 1200.0),
           ("Impression brochures A4", 150.0, 560.0), ("Remplacement chauffe-eau 200 L", 480.0, 890.0)],
    "es": [("Mano de obra (horas)", 28.0, 45.0), ("Material de fontanería", 35.0, 310.0),
           ("Desplazamiento", 20.0, 40.0), ("Asesoramiento fiscal trimestral", 150.0, 450.0),
           ("Pintura de fachada (m²)", 9.0, 16.0), ("Cambio de aceite y filtros", 60.0, 120.0)],
    "it": [("Manodopera (ore)", 30.0, 48.0), ("Materiale idraulico", 40.0, 280.0), ("Diritto di chiamata", 25.0, 50.0),
           ("Consulenza tecnica", 200.0, 900.0), ("Stampa biglietti da visita", 60.0, 140.0),
           ("Trasporto merci Milano-Bologna", 320.0, 780.0)],
    "nl": [("Arbeidsloon (uur)", 48.0, 70.0), ("Materiaal", 30.0, 250.0), ("Voorrijkosten", 25.0, 45.0),
           ("Advieswerkzaamheden", 110.0, 160.0), ("Schilderwerk kozijnen", 350.0, 900.0),
           ("Drukwerk folders A5", 120.0, 380.0)],
    "pt": [("Mão de obra (hora)", 60.0, 120.0), ("Cimento CP II 50 kg", 28.0, 42.0), ("Areia média (m³)", 90.0, 140.0),
           ("Honorários contábeis mensais", 450.0, 1200.0), ("Manutenção de computadores", 150.0, 380.0),
           ("Frete", 40.0, 180.0), ("Pastilha de freio dianteira", 85.0, 190.0)],
}

RECEIPT_ITEMS = {
    "de": [("Brötchen", 0.45), ("Bauernbrot 750g", 3.80), ("Kaffee gr.", 3.20), ("Butterbrezel", 1.95),
           ("Apfelstrudel", 3.60), ("Milch 1L", 1.19), ("Mineralwasser 0,5l", 1.49)],
    "fr": [("Baguette tradition", 1.30), ("Croissant", 1.15), ("Pain aux céréales", 3.40), ("Café", 1.80),
           ("Tarte aux pommes", 14.50), ("Éclair chocolat", 2.90)],
    "es": [("Café con leche", 1.60), ("Tostada con tomate", 2.40), ("Zumo de naranja", 2.80), ("Croissant", 1.50),
           ("Bocadillo jamón", 4.20), ("Agua 50cl", 1.20)],
    "it": [("Caffè", 1.20), ("Cornetto", 1.40), ("Cappuccino", 1.60), ("Spremuta", 3.50), ("Tramezzino", 3.00),
           ("Acqua nat. 0,5L", 1.00)],
    "nl": [("Volkorenbrood", 3.25), ("Krentenbollen 6st", 3.10), ("Appelflap", 1.95), ("Koffie", 2.80),
           ("Stroopwafels", 2.49)],
    "pt": [("Pão francês kg", 16.90), ("Café expresso", 6.50), ("Pão de queijo", 4.50), ("Leite integral 1L", 5.49),
           ("Bolo de fubá fatia", 7.90), ("Suco de laranja 300ml", 9.00)],
}

RATES = {"de_DE": [19, 7], "de_AT": [20, 10], "de_CH": [8.1, 2.6], "fr_FR": [20, 10, 5.5], "fr_BE": [21, 6],
         "es_ES": [21, 10], "it_IT": [22, 10], "nl_NL": [21, 9], "nl_BE": [21, 6], "pt_BR": [18, 12]}
RECEIPT_RATE = {"de_DE": 7, "de_AT": 10, "de_CH": 2.6, "fr_FR": 5.5, "fr_BE": 6, "es_ES": 10, "it_IT": 10,
                "nl_NL": 9, "nl_BE": 6, "pt_BR": 0}

CITIES = {
    "de_DE": [("Lindenstraße 14", "04109 Leipzig", "0341 9988770"), ("Am Markt 3", "50667 Köln", "0221 4711230"),
              ("Hauptstr. 112", "70173 Stuttgart", "0711 2233445")],
    "de_AT": [("Mariahilfer Straße 45", "1060 Wien", "+43 1 5874411"), ("Herrengasse 7", "8010 Graz", "0316 823344")],
    "de_CH": [("Bahnhofstrasse 21", "8001 Zürich", "044 211 45 67"), ("Marktgasse 9", "3011 Bern", "031 312 88 10")],
    "fr_FR": [("12 rue des Lilas", "69003 Lyon", "04 78 62 31 10"), ("5 avenue Jean Jaurès", "31000 Toulouse",
                                                                     "05 61 22 45 80"),
              ("28 boulevard Voltaire", "75011 Paris", "01 43 55 21 09")],
    "fr_BE": [("Rue Haute 48", "1000 Bruxelles", "02 512 34 56"),
              ("Rue de la Station 3", "4000 Liège", "04 223 45 67")],
    "es_ES": [("Calle Mayor, 15", "28013 Madrid", "912 345 678"), ("Carrer de Provença, 210", "08036 Barcelona",
                                                                   "934 512 300"),
              ("Avda. de la Constitución, 8", "41004 Sevilla", "954 221 870")],
    "it_IT": [("Via Roma, 21", "20121 Milano", "02 8645 1120"), ("Corso Vittorio Emanuele II, 54", "10123 Torino",
                                                                 "011 562 3344"),
              ("Via dei Mille, 7", "80121 Napoli", "081 410 2255")],
    "nl_NL": [("Kerkstraat 8", "1017 GC Amsterdam", "020-6231145"), ("Oudegracht 112", "3511 AX Utrecht",
                                                                      "030-2314567")],
    "nl_BE": [("Meir 54", "2000 Antwerpen", "03 231 45 67"), ("Veldstraat 12", "9000 Gent", "09 223 11 45")],
    "pt_BR": [("Rua das Flores, 123 - Centro", "01010-000 São Paulo - SP", "(11) 3456-7890"),
              ("Av. Afonso Pena, 1500 - Funcionários", "30130-005 Belo Horizonte - MG", "(31) 3224-5566"),
              ("Rua XV de Novembro, 88", "80020-310 Curitiba - PR", "(41) 3322-1100")],
}


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


def invoice_number(locale: str, i: int, rng: random.Random) -> str:
    forms = {
        "de_DE": [lambda: f"RE-2026-{rng.randint(1, 999):04d}", lambda: str(rng.randint(1000, 9999)),
                  lambda: f"{rng.randint(100, 999)}.{rng.randint(0, 999):03d}", lambda: f"2026-{rng.randint(10, 99)}"],
        "de_AT": [lambda: f"{rng.randint(10, 99)}/2026", lambda: f"AR {rng.randint(2026000, 2026999)}"],
        "de_CH": [lambda: f"{rng.randint(20260, 20269)}{rng.randint(100, 999)}",
                  lambda: f"R-{rng.randint(1000, 9999)}"],
        "fr_FR": [lambda: f"F{rng.randint(2026001, 2026399)}", lambda: f"FA-2026-{rng.randint(1, 999):03d}",
                  lambda: f"FPR {rng.randint(1000, 9999)}/26", lambda: str(rng.randint(100, 999))],
        "fr_BE": [lambda: f"2026/{rng.randint(1, 999):04d}", lambda: f"V26-{rng.randint(100, 999)}"],
        "es_ES": [lambda: f"A/{rng.randint(1, 999)}", lambda: f"2026-{rng.randint(1, 9999):04d}",
                  lambda: f"FV26-{rng.randint(1, 999):03d}", lambda: f"T001-{rng.randint(1, 99999):06d}"],
        "it_IT": [lambda: f"{rng.randint(1, 250)}/2026", lambda: f"{rng.randint(1, 99)}/PA",
                  lambda: f"FPR {rng.randint(1, 999)}/26", lambda: str(rng.randint(10, 99))],
        "nl_NL": [lambda: f"2026{rng.randint(1, 999):04d}", lambda: f"F-{rng.randint(10000, 99999)}",
                  lambda: f"{rng.randint(100, 999)}.{rng.randint(0, 999):03d}"],
        "nl_BE": [lambda: f"26/{rng.randint(1, 999):03d}", lambda: f"VF-2026-{rng.randint(1, 99)}"],
        "pt_BR": [lambda: f"000.{rng.randint(0, 99):03d}.{rng.randint(0, 999):03d}",
                  lambda: str(rng.randint(100, 9999)),
                  lambda: f"{rng.randint(1, 999):06d}"],
    }[locale]
    return forms[i % len(forms)]()


def receipt_number(locale: str, rng: random.Random) -> str:
    return {
        "de": lambda: str(rng.randint(1000, 9999)),
        "fr": lambda: f"{rng.randint(1, 9999):05d}",
        "es": lambda: f"T{rng.randint(1, 9):03d}-{rng.randint(1, 99999):06d}",
        "it": lambda: f"{rng.randint(1, 99):04d}-{rng.randint(1, 999):04d}",
        "nl": lambda: str(rng.randint(100000, 999999)),
        "pt": lambda: f"{rng.randint(1, 99999):06d}",
    }[locale[:2]]()


# ---------------------------------------------------------------- making a document's facts


def make_doc(locale: str, layout: str, k: int, n: int, rng: random.Random) -> Doc:
    lang = locale[:2]
    vendor = VENDORS[locale][k % len(VENDORS[locale])]
    buyer = rng.choice(BUYERS[lang])
    issue = date(2026, 1, 1) + timedelta(days=rng.randint(0, 300))
    if k % 4 == 1:  # some land on the 1st (1er, 1º, 1°)
        issue = issue.replace(day=1)
    currency = {"de_CH": "CHF", "pt_BR": "BRL"}.get(locale, "EUR")
    receipt = layout == "receipt"
    if receipt:
        picks = rng.sample(RECEIPT_ITEMS[lang], k=rng.randint(2, 4))
        items = [(name, float(rng.randint(1, 3)), price) for name, price in picks]
        total = round(sum(q * p for _, q, p in items), 2)
        rate = RECEIPT_RATE[locale]
        vat = round(total * rate / (100 + rate), 2)
        net = round(total - vat, 2)
    else:
        picks = rng.sample(ITEMS[lang], k=rng.randint(1, 4))
        items = []
        for name, lo, hi in picks:
            qty = float(rng.choice([1, 1, 2, 3, 4, 6, 8, 12])) if hi < 200 else 1.0
            price = round(rng.uniform(lo, hi), 2) if hi < 200 else round(rng.uniform(lo, hi) * rng.choice([1, 3, 5]), 2)
            if locale == "de_CH":
                price = round(price * 20) / 20
            items.append((name, qty, price))
        net = round(sum(q * p for _, q, p in items), 2)
        rate = rng.choice(RATES[locale][:2])
        vat = round(net * rate / 100, 2)
        if locale == "de_CH":
            vat = round(vat * 20) / 20
        total = round(net + vat, 2)
    due_kind = rng.random()
    due = None if receipt or due_kind < 0.2 else issue + timedelta(days=rng.choice([10, 14, 14, 30, 30, 60]))
    doc = Doc(
        doc_id=f"eu-{n:02d}-{locale}",
        locale=locale,
        layout=layout,
        vendor=vendor,
        buyer=buyer,
        number=receipt_number(locale, rng) if receipt else invoice_number(locale, k, rng),
        issue=issue,
        due=due,
        currency=currency,
        rate=rate,
        items=items,
        net=net,
        vat=vat,
        total=total,
        long_dates=layout == "prose" or (layout == "block" and rng.random() < 0.4),
    )
    if not receipt and due is None:
        doc.due_terms = rng.choice(["14", "30", "sofort"])
    if receipt:
        doc.show_net = rng.random() < 0.5 and locale != "pt_BR"
        doc.show_vat = locale != "pt_BR"
    if locale == "pt_BR" and layout == "receipt":
        doc.show_net = doc.show_vat = False
    # A small business under a VAT exemption: no net, no VAT (Kleinunternehmer, franchise en base, forfettario).
    if layout == "block" and k == 4 and locale in ("de_DE", "fr_FR", "it_IT"):
        doc.vat = 0.0
        doc.net = doc.total = round(sum(q * p for _, q, p in items), 2)
        doc.show_net = doc.show_vat = False
        doc.extra["exempt"] = True
    return doc


# ---------------------------------------------------------------- vocabulary

L = {
    "de": dict(
        title="RECHNUNG", number=["Rechnungsnummer", "Rechnungs-Nr.", "Re.-Nr.", "Rechnung Nr."],
        date=["Rechnungsdatum", "Datum", "Rechnungsdatum"], customer="Kundennummer", delivery="Lieferdatum",
        due=["Fälligkeit", "Zahlbar bis", "Fällig am"], net=["Nettobetrag", "Summe netto", "Zwischensumme netto"],
        total=["Gesamtbetrag", "Rechnungsbetrag", "Gesamtsumme brutto", "Zu zahlender Betrag"],
        cols=("Pos.", "Bezeichnung", "Menge", "Einzelpreis", "Gesamt"), page="Seite",
        bank="Bankverbindung", thanks="Vielen Dank für Ihren Auftrag!",
    ),
    "fr": dict(
        title="FACTURE", number=["N° de facture", "Facture N°", "Numéro de facture", "Facture n°"],
        date=["Date de facture", "Date", "Date d'émission"], customer="Réf. client", delivery="Date de livraison",
        due=["Date d'échéance", "Échéance", "À régler avant le"], net=["Total HT", "Montant HT", "Sous-total HT"],
        total=["Total TTC", "Net à payer", "Montant TTC"],
        cols=("Réf.", "Désignation", "Qté", "P.U. HT", "Montant HT"), page="Page",
        bank="Coordonnées bancaires", thanks="Merci de votre confiance.",
    ),
    "es": dict(
        title="FACTURA", number=["Nº Factura", "Factura nº", "Número de factura", "Factura Nº"],
        date=["Fecha", "Fecha de factura", "Fecha de emisión"], customer="Cód. cliente", delivery="Fecha de entrega",
        due=["Fecha de vencimiento", "Vencimiento", "Vto."], net=["Base imponible", "Base Imponible", "Subtotal"],
        total=["TOTAL FACTURA", "Total", "Importe total"],
        cols=("Ref.", "Concepto", "Cant.", "Precio", "Importe"), page="Página",
        bank="Transferencia bancaria", thanks="Gracias por su confianza.",
    ),
    "it": dict(
        title="FATTURA", number=["Fattura n.", "Numero fattura", "Fattura nr.", "N. documento"],
        date=["Data", "Data fattura", "Data documento"], customer="Cod. cliente", delivery="DDT del",
        due=["Scadenza", "Data scadenza", "Scadenza pagamento"], net=["Imponibile", "Totale imponibile", "Imponibile"],
        total=["Totale documento", "Totale fattura", "Totale da pagare"],
        cols=("Cod.", "Descrizione", "Q.tà", "Prezzo unit.", "Importo"), page="Pag.",
        bank="Coordinate bancarie", thanks="Grazie per aver scelto i nostri servizi.",
    ),
    "nl": dict(
        title="FACTUUR", number=["Factuurnummer", "Factuurnr.", "Factuur nr."],
        date=["Factuurdatum", "Datum", "Factuurdatum"], customer="Klantnummer", delivery="Leverdatum",
        due=["Vervaldatum", "Te betalen vóór", "Vervaldag"],
        net=["Totaal excl. BTW", "Subtotaal", "Totaal exclusief btw"],
        total=["Totaal incl. BTW", "Te betalen", "Totaal"],
        cols=("Nr.", "Omschrijving", "Aantal", "Prijs", "Bedrag"), page="Pagina",
        bank="Betaalgegevens", thanks="Bedankt voor uw opdracht.",
    ),
    "pt": dict(
        title="FATURA", number=["Fatura nº", "Nº da fatura", "Número"],
        date=["Data de emissão", "Emissão", "Data"], customer="Cód. cliente", delivery="Data de entrega",
        due=["Vencimento", "Data de vencimento", "Vencimento"], net=["Subtotal", "Valor dos produtos", "Subtotal"],
        total=["Total", "Valor total", "Total a pagar"],
        cols=("Item", "Descrição", "Qtd.", "Valor unit.", "Valor total"), page="Página",
        bank="Dados bancários", thanks="Obrigado pela preferência!",
    ),
}


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
    if d.lang == "de":
        cur = "CHF" if d.currency == "CHF" else "EUR"
        lines += [f"{'SUMME ' + cur:<{w - 10}}{tot:>10}", f"{'Bar':<{w - 10}}{cash_s:>10}",
                  f"{'Rückgeld':<{w - 10}}{change:>10}", ""]
        lines += (["MwSt     Netto    MwSt   Brutto", f"A {r}%  {net:>7} {vat:>7} {tot:>8}"] if d.show_net
                  else [f"enth. MwSt {r}%{vat:>{w - 14 - len(r)}}"])
        lines += ["", f"Bon-Nr. {d.number}  Kasse 2", f"{stamp}  {hm}", "Vielen Dank für Ihren Einkauf!"]
    elif d.lang == "fr":
        lines += [f"{'TOTAL TTC':<{w - 10}}{tot + ' €':>10}", f"{'CB':<{w - 10}}{tot:>10}", ""]
        lines += (["Taux   HT      TVA     TTC", f"{r}%  {net:>7} {vat:>6} {tot:>7}"] if d.show_net
                  else [f"dont TVA {r}% : {vat}"])
        lines += ["", f"Ticket n° {d.number}", f"Le {stamp} à {hm}", "Merci de votre visite !"]
    elif d.lang == "es":
        lines = ["FACTURA SIMPLIFICADA", *lines, f"{'TOTAL (IVA incl.)':<{w - 10}}{tot + ' €':>10}",
                 f"{'Efectivo':<{w - 10}}{cash_s:>10}", f"{'Cambio':<{w - 10}}{change:>10}", ""]
        lines.append(f"Base imp. {net}  IVA {r}% {vat}" if d.show_net else f"IVA {r}% incluido: {vat}")
        lines += ["", f"Ticket nº: {d.number}", f"Fecha: {stamp}  Hora: {hm}", "Gracias por su visita"]
    elif d.lang == "it":
        lines = [*lines[:3], "DOCUMENTO COMMERCIALE", "di vendita o prestazione", "DESCRIZIONE      IVA  Prezzo(€)",
                 *lines[4:]]
        lines += [f"{'TOTALE COMPLESSIVO':<{w - 10}}{tot:>10}", f"{'di cui IVA':<{w - 10}}{vat:>10}",
                  f"{'Pagamento contante':<{w - 10}}{cash_s:>10}", f"{'Resto':<{w - 10}}{change:>10}", ""]
        lines += [f"Imponibile {net}"] * d.show_net
        lines += ["", f"{stamp} {hm}", f"DOCUMENTO N. {d.number}", "RT 99MEX012345"]
    elif d.lang == "nl":
        lines += [f"{'TOTAAL':<{w - 10}}{'€ ' + tot:>10}", f"{'PIN':<{w - 10}}{tot:>10}", ""]
        lines += (["BTW%   Excl.    BTW    Incl.", f"{r}%  {net:>7} {vat:>6} {tot:>7}"] if d.show_net
                  else [f"BTW {r}% over {net} = {vat}"])
        lines += ["", f"Bonnr. {d.number}", f"{stamp} {hm}", "Bedankt en tot ziens!"]
    elif d.lang == "pt":
        lines = [*lines[:3], tax_ids(d.locale, rng).split(" · ")[0],
                 "Documento Auxiliar da Nota Fiscal de Consumidor Eletrônica", *lines[3:]]
        lines += [f"Qtde. total de itens{len(d.items):>{w - 20}}", f"{'Valor total R$':<{w - 10}}{tot:>10}",
                  f"{'Valor a pagar R$':<{w - 10}}{tot:>10}", f"{'Dinheiro':<{w - 10}}{cash_s:>10}",
                  f"{'Troco':<{w - 10}}{change:>10}", "",
                  f"NFC-e nº {d.number} Série 001 Emissão {stamp} {hm}:{rng.randint(0, 59):02d}",
                  "Consulte pela Chave de Acesso em www.fazenda.sp.gov.br/nfce/consulta",
                  "CONSUMIDOR NÃO IDENTIFICADO"]
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


def documents(seed: int) -> list[tuple[Doc, str]]:
    rng = random.Random(seed)
    out = []
    n = 0
    for locale, count, layouts in PLAN:
        for k in range(count):
            d = make_doc(locale, layouts[k % len(layouts)], k, n, rng)
            text = LAYOUTS[d.layout](d, rng)
            out.append((d, text))
            n += 1
    return out


MODEL = '''"""A plain 8-field invoice model, as a new user writes it (lab/experiments/euro_invoices.py)."""

from __future__ import annotations

from datetime import date

from pydantic import BaseModel, Field


class EuroInvoice(BaseModel):
    vendor: str = Field(description="name of the company that issued the invoice or receipt")
    invoice_number: str | None = Field(description="invoice or receipt number")
    issue_date: date = Field(description="date of issue")
    due_date: date | None = Field(description="payment due date, if stated")
    currency: str = Field(description="ISO 4217 currency code, e.g. EUR")
    net: float | None = Field(description="net amount before VAT")
    vat: float | None = Field(description="VAT / sales tax amount")
    total: float = Field(description="total amount including VAT")
'''

JOB = """# A blind stand-in for issue 54's held-out job (lab/experiments/euro_invoices.py): the defaults.
name: euro-blind
input:
  uri: input.parquet
  id_column: doc_id
  text_column: text
schema: euro_invoice:EuroInvoice
prompt: |
  Extract the invoice from this document.
  {document}
examples: false
model:
  path: bundled
  max_tokens: 384
  temperature: 0.0
  max_model_len: 4096
  engine_kwargs:
    enforce_eager: true
workers:
  actors: 1
  gpus_per_actor: 0
  cpus_per_actor: 2
  batch_size: 16
output:
  uri: out
"""


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True, help="a folder outside the repository")
    p.add_argument("--seed", type=int, default=54)
    p.add_argument("--show", help="print this document's text and gold (a doc_id)")
    a = p.parse_args()
    docs = documents(a.seed)
    if a.show:
        for d, text in docs:
            if d.doc_id == a.show:
                print(text)
                print(json.dumps(d.gold(), ensure_ascii=False))
        return 0
    for d, text in docs:  # the gold's strings are written as they stand (the amounts and dates in the locale's form)
        assert d.vendor in text and d.number in text, d.doc_id
    import pyarrow as pa
    import pyarrow.parquet as pq

    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table({"doc_id": [d.doc_id for d, _ in docs], "text": [t for _, t in docs]}),
                   out / "input.parquet")
    with open(out / "gold.jsonl", "w", encoding="utf-8") as f:
        for d, _ in docs:
            f.write(json.dumps({"doc_id": d.doc_id, "record": d.gold()}, ensure_ascii=False) + "\n")
    (out / "euro_invoice.py").write_text(MODEL, encoding="utf-8")
    (out / "job.yaml").write_text(JOB, encoding="utf-8")
    n_gold = sum(sum(v is not None for v in d.gold().values()) for d, _ in docs)
    print(f"{len(docs)} documents, {n_gold} non-null gold values → {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
