"""Writes a synthetic long-document corpus: non-disclosure agreements of 10,000-40,000 characters, and their
gold records (`nda.NDA`), from the generator's own truth.

Deterministic (seeded `random`, no network, no model), so `contracts.parquet` and `contracts_gold.jsonl` can be
re-made byte for byte:

    python jobs/contracts/make_contracts.py [--out DIR] [--count N]

Each agreement names its parties and effective date in the opening paragraph, its term in a section near the
middle, and its governing law near the end, between numbered sections of boilerplate (confidentiality,
exclusions, remedies, notices, ...) that make it long: the facts lie far apart, so a window holds only some
of them. The parties sign again at the end.
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
SEED = 20261206
COUNT = 12
COMPANIES = ["Harbor Analytics Inc.", "Bluestone Robotics LLC", "Northwind Biotech Corp.", "Crescent Labs Ltd.",
             "Meridian Software Inc.", "Quarry Point Holdings LLC", "Silverline Medical Inc.", "Tidewater Energy Co.",
             "Aldergrove Foods Inc.", "Keystone Aerospace Corp.", "Redfern Capital LLC", "Ivory Tower Media Inc."]
STATES = ["Delaware", "New York", "California", "Texas", "Massachusetts", "Illinois", "Washington", "Florida"]
NUMBERS = {1: "one", 2: "two", 3: "three", 4: "four", 5: "five"}
CLAUSES = [
    ("Definition of Confidential Information", "\"Confidential Information\" means any information disclosed by "
     "either party to the other party, either directly or indirectly, in writing, orally or by inspection of "
     "tangible objects, including without limitation documents, prototypes, samples, plans and equipment, which "
     "is designated as confidential or which a reasonable person would understand to be confidential."),
    ("Non-Use and Non-Disclosure", "Each party agrees not to use any Confidential Information of the other party "
     "for any purpose except to evaluate and engage in discussions concerning a potential business relationship "
     "between the parties. Each party agrees not to disclose any Confidential Information of the other party to "
     "third parties or to its employees, except to those employees who are required to have the information."),
    ("Maintenance of Confidentiality", "Each party agrees that it shall take reasonable measures to protect the "
     "secrecy of and avoid disclosure and unauthorized use of the Confidential Information of the other party. "
     "Without limiting the foregoing, each party shall take at least those measures that it takes to protect its "
     "own most highly confidential information."),
    ("Exclusions", "The obligations of this Agreement shall not apply to information that was publicly known and "
     "made generally available in the public domain prior to the time of disclosure, becomes publicly known "
     "through no action of the receiving party, or is already in the possession of the receiving party at the "
     "time of disclosure, as shown by its files and records."),
    ("No Obligation", "Nothing in this Agreement shall obligate either party to proceed with any transaction "
     "between them, and each party reserves the right, in its sole discretion, to terminate the discussions "
     "contemplated by this Agreement concerning the business opportunity."),
    ("No Warranty", "ALL CONFIDENTIAL INFORMATION IS PROVIDED \"AS IS\". NEITHER PARTY MAKES ANY WARRANTIES, "
     "EXPRESS, IMPLIED OR OTHERWISE, REGARDING ITS ACCURACY, COMPLETENESS OR PERFORMANCE."),
    ("Return of Materials", "All documents and other tangible objects containing or representing Confidential "
     "Information which have been disclosed by either party to the other party shall be and remain the property "
     "of the disclosing party and shall be promptly returned upon the disclosing party's written request."),
    ("Remedies", "Each party agrees that any violation or threatened violation of this Agreement may cause "
     "irreparable injury to the other party, entitling the other party to seek injunctive relief in addition to "
     "all legal remedies available at law or in equity."),
    ("Notices", "Any notice required or permitted by this Agreement shall be in writing and shall be delivered "
     "by hand, by a recognized overnight courier, or by certified mail, return receipt requested, to the address "
     "of the receiving party stated in this Agreement or such other address as a party may designate."),
    ("Assignment", "Neither party may assign or transfer this Agreement or any rights or obligations hereunder "
     "without the prior written consent of the other party, and any attempted assignment without such consent "
     "shall be null and void."),
    ("Severability", "If any provision of this Agreement is held invalid or unenforceable by a court of competent "
     "jurisdiction, the remaining provisions shall remain in full force and effect, and the provision shall be "
     "replaced by a valid provision that comes closest to the intention of the parties."),
    ("Entire Agreement", "This Agreement constitutes the entire agreement with respect to the Confidential "
     "Information disclosed herein and supersedes all prior or contemporaneous oral or written agreements "
     "concerning such Confidential Information. It may be amended only by a writing signed by both parties."),
]


def agreement(rng: random.Random, target: int) -> tuple[str, dict]:
    first, second = rng.sample(COMPANIES, 2)
    effective = date(2015, 1, 1) + timedelta(days=rng.randrange(3650))
    state = rng.choice(STATES)
    years = rng.choice([1, 2, 3, 5])
    opening = (f"MUTUAL NON-DISCLOSURE AGREEMENT\n\nThis Mutual Non-Disclosure Agreement (the \"Agreement\") is "
               f"entered into as of {effective:%B} {effective.day}, {effective.year} (the \"Effective Date\") by "
               f"and between {first}, and {second} (each a \"Party\").")
    term = (f"Term. This Agreement shall remain in effect for a period of {NUMBERS[years]} ({years}) years from "
            "the Effective Date, unless terminated earlier by either party upon thirty days' written notice.")
    law = (f"Governing Law. This Agreement shall be governed by and construed in accordance with the laws of the "
           f"State of {state}, without regard to its conflict of laws principles.")
    signature = (f"IN WITNESS WHEREOF, the parties have executed this Agreement as of the Effective Date.\n\n"
                 f"{first}\nBy: ____________________\nTitle: Chief Executive Officer\n\n"
                 f"{second}\nBy: ____________________\nTitle: General Counsel")
    body: list[str] = []
    while sum(len(p) + 2 for p in body) < target:
        heading, text = rng.choice(CLAUSES)
        body.append(f"{len(body) + 1}. {heading}. {text} {rng.choice(CLAUSES)[1]}")
    middle, late = len(body) // 2, max(len(body) * 5 // 6, len(body) // 2 + 1)
    body.insert(middle, term)
    body.insert(late, law)
    text = "\n\n".join([opening, *body, signature])
    gold = {"effective_date": effective.isoformat(), "jurisdiction": state, "parties": [first, second],
            "term_years": years}
    return text, gold


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=HERE)
    parser.add_argument("--count", type=int, default=COUNT)
    args = parser.parse_args()
    rng = random.Random(SEED)
    ids, texts, golds = [], [], []
    for i in range(args.count):
        text, gold = agreement(rng, rng.randrange(10_000, 40_000))
        ids.append(f"nda-{i:03d}")
        texts.append(text)
        golds.append({"doc_id": ids[-1], **gold})
    args.out.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table({"doc_id": ids, "text": texts}), args.out / "contracts.parquet")
    with open(args.out / "contracts_gold.jsonl", "w", encoding="utf-8") as handle:
        for gold in golds:
            handle.write(json.dumps(gold) + "\n")


if __name__ == "__main__":
    main()
