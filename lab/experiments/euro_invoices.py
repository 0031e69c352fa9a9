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
import sys
from datetime import date, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from lab.experiments.euro_invoices_data import BUYERS, ITEMS, PLAN, RATES, RECEIPT_ITEMS, RECEIPT_RATE, VENDORS
from lab.experiments.euro_invoices_layouts import LAYOUTS, Doc


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


def receipt_amounts(locale: str, rng: random.Random) -> tuple[list, float, float, float, float]:
    """A till receipt's items (gross prices), its rate, net, VAT and total."""
    picks = rng.sample(RECEIPT_ITEMS[locale[:2]], k=rng.randint(2, 4))
    items = [(name, float(rng.randint(1, 3)), price) for name, price in picks]
    total = round(sum(q * p for _, q, p in items), 2)
    rate = RECEIPT_RATE[locale]
    vat = round(total * rate / (100 + rate), 2)
    return items, rate, round(total - vat, 2), vat, total


def invoice_amounts(locale: str, rng: random.Random) -> tuple[list, float, float, float, float]:
    """An invoice's items (net prices; Swiss ones to 5 centimes), its rate, net, VAT and total."""
    picks = rng.sample(ITEMS[locale[:2]], k=rng.randint(1, 4))
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
    return items, rate, net, vat, round(net + vat, 2)


def make_doc(locale: str, layout: str, k: int, n: int, rng: random.Random) -> Doc:
    lang = locale[:2]
    vendor = VENDORS[locale][k % len(VENDORS[locale])]
    buyer = rng.choice(BUYERS[lang])
    issue = date(2026, 1, 1) + timedelta(days=rng.randint(0, 300))
    if k % 4 == 1:  # some land on the 1st (1er, 1º, 1°)
        issue = issue.replace(day=1)
    currency = {"de_CH": "CHF", "pt_BR": "BRL"}.get(locale, "EUR")
    receipt = layout == "receipt"
    items, rate, net, vat, total = (receipt_amounts if receipt else invoice_amounts)(locale, rng)
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
