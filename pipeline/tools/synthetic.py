"""Synthetic invoices with known gold records: the sample corpus and the benchmark's corpus.

Deterministic for a given seed, so benchmark runs and the committed sample can be re-made exactly.
"""

from __future__ import annotations

import random
from datetime import date, timedelta

VENDORS = [
    ("Northwind Traders", "114 Harbor Way, Seattle, WA 98101"),
    ("Globex Industrial GmbH", "Lindenstrasse 12, 10969 Berlin"),
    ("Blue Fjord Consulting AS", "Storgata 5, 0155 Oslo"),
    ("Acme Office Supply", "77 Market St, San Francisco, CA 94105"),
    ("Kestrel Logistics Ltd", "9 Dock Road, Liverpool L3 4AB"),
    ("Maple & Finch Design", "300 Queen St W, Toronto, ON M5V 2A2"),
    ("Sakura Components KK", "2-4-1 Shibaura, Minato-ku, Tokyo"),
    ("Alpine Data AG", "Bahnhofstrasse 40, 8001 Zurich"),
]
CUSTOMERS = ["Contoso Ltd", "Fabrikam Inc", "Tailspin Toys", "Wide World Importers", "Litware Inc", None]
ITEMS = [
    ("Consulting hours", 95.0, 180.0),
    ("A4 copy paper, box of 5 reams", 21.5, 38.0),
    ("Freight, pallet", 120.0, 260.0),
    ("Software license, annual seat", 240.0, 480.0),
    ("Laptop stand", 29.0, 59.0),
    ("On-site installation", 300.0, 650.0),
    ("USB-C cable 2m", 6.5, 14.0),
    ("Monthly hosting", 49.0, 199.0),
    ("Design revisions", 60.0, 110.0),
    ("Printer toner cartridge", 45.0, 89.0),
]
CURRENCIES = {"Globex Industrial GmbH": "EUR", "Blue Fjord Consulting AS": "EUR", "Kestrel Logistics Ltd": "GBP",
              "Maple & Finch Design": "CAD", "Sakura Components KK": "JPY", "Alpine Data AG": "CHF"}
SYMBOL = {"USD": "$", "EUR": "€", "GBP": "£", "CAD": "C$", "JPY": "¥", "CHF": "CHF "}
TAX_RATES = {"USD": 0.0825, "EUR": 0.19, "GBP": 0.20, "CAD": 0.13, "JPY": 0.10, "CHF": 0.081}


def money(currency: str, value: float) -> str:
    if currency == "JPY":
        return f"{SYMBOL[currency]}{value:,.0f}"
    return f"{SYMBOL[currency]}{value:,.2f}"


def make_invoice(rng: random.Random) -> tuple[str, dict]:
    """One invoice document and its gold record (all fields of the sample `Invoice` contract and more)."""
    vendor, address = rng.choice(VENDORS)
    currency = CURRENCIES.get(vendor, "USD")
    customer = rng.choice(CUSTOMERS)
    issued = date(2026, 1, 1) + timedelta(days=rng.randrange(0, 330))
    due = issued + timedelta(days=rng.choice([14, 30, 45])) if rng.random() < 0.8 else None
    number = f"{vendor.split()[0][:3].upper()}-{issued.year}-{rng.randrange(1000, 9999)}"
    items = []
    for description, low, high in rng.sample(ITEMS, rng.randint(1, 4)):
        quantity = float(rng.randint(1, 12))
        unit = round(rng.uniform(low, high), 0 if currency == "JPY" else 2)
        if currency == "JPY":
            unit *= 100
        items.append({"description": description, "quantity": quantity, "unit_price": unit,
                      "amount": round(quantity * unit, 2)})
    subtotal = round(sum(i["amount"] for i in items), 2)
    tax = round(subtotal * TAX_RATES[currency], 0 if currency == "JPY" else 2)
    total = round(subtotal + tax, 2)

    lines = [vendor, address, "", f"INVOICE {number}", f"Date of issue: {issued:%B %d, %Y}"]
    if due:
        lines.append(f"Payment due: {due:%d %b %Y}")
    if customer:
        lines.append(f"Bill to: {customer}")
    lines += ["", "Description | Qty | Unit price | Amount"]
    for item in items:
        lines.append(f"{item['description']} | {item['quantity']:g} | {money(currency, item['unit_price'])}"
                     f" | {money(currency, item['amount'])}")
    lines += ["", f"Subtotal: {money(currency, subtotal)}", f"Tax: {money(currency, tax)}",
              f"Total due ({currency}): {money(currency, total)}", "", "Thank you for your business."]
    gold = {"invoice_number": number, "vendor": vendor, "customer": customer, "issue_date": issued.isoformat(),
            "due_date": due.isoformat() if due else None, "currency": currency, "line_items": items,
            "subtotal": subtotal, "tax": tax, "total": total}
    return "\n".join(lines), gold




def make_corpus(n: int, seed: int, prefix: str = "inv") -> tuple[list[str], list[str], list[dict]]:
    """`n` (id, text, gold) triples."""
    rng = random.Random(seed)
    ids, texts, golds = [], [], []
    for index in range(n):
        text, gold = make_invoice(rng)
        doc_id = f"{prefix}-{index:04d}"
        ids.append(doc_id)
        texts.append(text)
        golds.append({"doc_id": doc_id, **gold})
    return ids, texts, golds


def contract_record(gold: dict) -> dict:
    """A synthetic gold record in the shape of the sample `Invoice` contract (what `extract eval` scores)."""
    addresses = dict(VENDORS)
    return {"doc_id": gold["doc_id"], "invoice_number": gold["invoice_number"],
            "vendor": {"name": gold["vendor"], "address": addresses[gold["vendor"]]}, "customer": gold["customer"],
            "issue_date": gold["issue_date"], "due_date": gold["due_date"], "currency": gold["currency"],
            "items": [item["description"] for item in gold["line_items"]], "total": gold["total"]}
