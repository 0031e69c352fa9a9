"""One hash per corpus of every document's grounded schema: whether a change to grounding changes any grammar.

Runs whatever `schemas.grounding` is first on the path, so a tree before a change is measured the same way:

    git archive COMMIT | tar -x -C /tmp/before
    PYTHONPATH=/tmp/before .venv/bin/python lab/experiments/grammar_hashes.py > /tmp/before.txt
    PYTHONPATH=$PWD .venv/bin/python lab/experiments/grammar_hashes.py > /tmp/after.txt
    diff /tmp/before.txt /tmp/after.txt

Corpora: the sample (marked and unmarked, the documents with gold), tickets, multilingual, contracts, and
DeepJSONEval en/zh dev (all items, where ../shared holds them). Each line: corpus, documents, the first 16 hex
digits of the sha256 of the grounded schemas (`ground(schema, text, False, mode)`, JSON with sorted keys).
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

sys.path.insert(1, str(Path(__file__).resolve().parents[1]))

import grounding_cost as gc  # lab/grounding_cost.py: the corpora and their job schemas


def main() -> int:
    from schemas.grounding import ground

    found = gc.corpora(["sample", "unmarked", "tickets"])
    for lang in ("en", "zh"):
        path = gc.SHARED / f"deepjsoneval-{lang}-dev.jsonl"
        if path.exists():
            items = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
            found[f"dje-{lang}-all"] = ("auto", [(i["text"], i["json"], i["schema"]) for i in items])
    for name, job, gold in (("multilingual", "jobs/multilingual/extract.yaml", "jobs/multilingual/invoices_gold.jsonl"),
                            ("contracts", "jobs/contracts/extract.yaml", "jobs/contracts/contracts_gold.jsonl")):
        schema, rows = gc._job(job, gold, "doc_id")
        found[name] = ("auto", [(d, g, schema) for d, g, _ in rows])
    for name, (mode, rows) in found.items():
        digest = hashlib.sha256()
        for document, _, schema in rows:
            digest.update(json.dumps(ground(schema, document, False, mode), sort_keys=True, default=str).encode())
        print(name, len(rows), digest.hexdigest()[:16])
    return 0


if __name__ == "__main__":
    sys.exit(main())
