"""Grounding's cost per document and its reach (the share of gold leaves the grounded grammar allows), per corpus.

    PYTHONPATH=$PWD python lab/grounding_cost.py [--screens placeholders,sent,labels] [--corpora sample,tickets]

Runs whatever `schemas.grounding` is first on the path, so the same script measures an older tree too:
    git archive 97ed404 schemas pipeline workers jobs | tar -x -C /tmp/ground-before
    PYTHONPATH=/tmp/ground-before:$PWD python lab/grounding_cost.py
Cost: CPU time (process_time: the machine is shared) of `ground(schema, document, mode=...)` per document,
one core, after one warm-up document (the one-off loads: Babel's CLDR data, lingua's models), with no automaton
kept from an earlier call; and on one 20,000-character document per corpus (its documents joined, under its first
document's schema). `grammar_ms_mean`: the row's grammar text after it (`to_ebnf`; XGrammar's compile not
included).
Reach: a gold leaf is refused when the grounded schema rejects it and the schema as written does not.
"""

from __future__ import annotations

import argparse
import inspect
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import jsonschema
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "corpora" / "deepjsoneval-dev"


def _ground(schema: dict[str, Any], doc: str, mode: str, screens: tuple[str, ...] | None) -> dict[str, Any]:
    from schemas import substring
    from schemas.grounding import ground

    if hasattr(substring, "_automaton"):  # a document's automaton is kept for its grammar: time each call cold
        substring._automaton.cache_clear()

    if screens is not None and "screens" in inspect.signature(ground).parameters:
        return ground(schema, doc, False, mode, screens=screens)
    return ground(schema, doc, False, mode)


def _job(path: str, gold: str, id_key: str, sets: dict[str, Any] | None = None) -> tuple[dict, list]:
    from pipeline.config import load_config

    loaded = load_config(ROOT / path, sets or {})
    cfg = loaded.config
    table = pq.read_table((ROOT / path).parent / cfg.input.uri, columns=[cfg.input.id_column, cfg.input.text_column])
    texts = dict(zip(*table.to_pydict().values(), strict=True))
    rows = []
    for line in (ROOT / gold).read_text().splitlines():
        if line.strip():
            record = json.loads(line)
            doc_id = record.pop(id_key)
            rows.append((texts[doc_id], record.get("record", record)))
    return loaded.contract.json_schema, [(schema_doc, rec, None) for schema_doc, rec in rows]


def corpora(names: list[str]) -> dict[str, tuple[str, list[tuple[str, dict, dict | None]]]]:
    """name → (grounding mode, [(document, gold record, per-item schema or None)]), with the job schema."""
    found: dict[str, Any] = {}
    if "sample" in names:
        schema, rows = _job("jobs/extract.yaml", "jobs/sample/invoices_gold.jsonl", "doc_id")
        found["sample"] = ("marked", [(d, g, schema) for d, g, _ in rows])
    if "unmarked" in names:
        schema, rows = _job("jobs/extract.yaml", "jobs/sample/invoices_gold.jsonl", "doc_id",
                            {"schema": "sample.unmarked_invoice:UnmarkedInvoice"})
        found["unmarked"] = ("auto", [(d, g, schema) for d, g, _ in rows])
    if "tickets" in names:
        schema, rows = _job("jobs/tickets/extract.yaml", "jobs/tickets/tickets_gold.jsonl", "ticket_id")
        found["tickets"] = ("auto", [(d, g, schema) for d, g, _ in rows])
    for lang in ("en", "zh"):
        path = SHARED / f"deepjsoneval-{lang}-dev.jsonl"
        if f"dje-{lang}" in names and path.exists():
            items = [json.loads(line) for line in path.read_text().splitlines()[:32] if line.strip()]
            found[f"dje-{lang}"] = ("auto", [(i["text"], i["json"], i["schema"]) for i in items])
    return found


def refused_paths(schema: dict[str, Any], grounded: dict[str, Any], gold: Any) -> set[str]:
    """Leaves of `gold` the grounded schema rejects and the schema as written accepts."""
    def paths(s: dict[str, Any]) -> set[str]:
        return {"/".join(map(str, e.absolute_path)) for e in jsonschema.Draft202012Validator(s).iter_errors(gold)}
    return paths(grounded) - paths(schema)


def leaves(value: Any, path: str = "") -> list[str]:
    if isinstance(value, dict):
        return [p for k, v in value.items() for p in leaves(v, f"{path}/{k}" if path else str(k))]
    if isinstance(value, list):
        return [p for i, v in enumerate(value) for p in leaves(v, f"{path}/{i}")]
    return [path]


def enum_sizes(node: Any) -> list[int]:
    """The size of each enum a grounded schema holds (its fields' candidates): how far grounding narrows."""
    if isinstance(node, list):
        return [n for item in node for n in enum_sizes(item)]
    if not isinstance(node, dict):
        return []
    own = [len(node["enum"])] if isinstance(node.get("enum"), list) else []
    return own + [n for key, value in node.items() if key != "enum" for n in enum_sizes(value)]


def field_of(path: str) -> str:
    return "/".join(p for p in path.split("/") if not p.isdigit())


def measure(name: str, mode: str, rows: list, screens: tuple[str, ...] | None) -> dict[str, Any]:
    from schemas.substring import to_ebnf

    to_ebnf(_ground(rows[0][2], rows[0][0], mode, screens))  # warm-up: one-off loads (XGrammar's import too)

    times, grammar, total, refused, sizes = [], [], {}, {}, []
    for doc, gold, schema in rows:
        start = time.process_time()
        grounded = _ground(schema, doc, mode, screens)
        times.append((time.process_time() - start) * 1000)
        start = time.process_time()
        to_ebnf(grounded)  # the row's grammar text, as the engine is handed it (XGrammar's compile not included)
        grammar.append((time.process_time() - start) * 1000)
        sizes.extend(enum_sizes(grounded))
        for leaf in leaves(gold):
            total[field_of(leaf)] = total.get(field_of(leaf), 0) + 1
        for path in refused_paths(schema, grounded, gold):
            refused[field_of(path)] = refused.get(field_of(path), 0) + 1
    n, bad = sum(total.values()), sum(refused.values())
    chars = statistics.mean(len(d) for d, _, _ in rows)
    return {"corpus": name, "mode": mode, "docs": len(rows), "mean_chars": round(chars),
            "ms_mean": round(statistics.mean(times), 2), "ms_p90": round(sorted(times)[int(0.9 * len(times))], 2),
            "grammar_ms_mean": round(statistics.mean(grammar), 2),
            "reach": round(1 - bad / n, 4) if n else None, "leaves": n, "refused": bad,
            "mean_candidates": round(statistics.mean(sizes), 1) if sizes else None,
            "refused_by_field": dict(sorted(refused.items(), key=lambda kv: -kv[1])[:8])}


def long_document(rows: list, mode: str, screens: tuple[str, ...] | None, name: str) -> dict[str, Any]:
    doc = ""
    for text, _, _ in rows:
        doc += text + "\n\n"
        if len(doc) >= 20_000:
            break
    doc = doc[:20_000]
    schema = rows[0][2]
    _ground(schema, doc, mode, screens)
    times = []
    for _ in range(3):
        start = time.process_time()
        _ground(schema, doc, mode, screens)
        times.append((time.process_time() - start) * 1000)
    return {"corpus": f"20k-chars ({name} joined)", "mode": mode, "chars": len(doc), "ms_min": round(min(times), 1)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--screens", default=None, help="comma-separated screens (default: the policy's)")
    parser.add_argument("--corpora", default="sample,unmarked,tickets,dje-en,dje-zh")
    args = parser.parse_args(argv)
    screens = None if args.screens is None else tuple(s for s in args.screens.split(",") if s)
    found = corpora(args.corpora.split(","))
    for name, (mode, rows) in found.items():
        print(json.dumps(measure(name, mode, rows, screens), ensure_ascii=False))
    for name, mode in (("sample", "marked"), ("unmarked", "auto"), ("dje-en", "auto"), ("dje-zh", "auto")):
        if name in found:  # one long document of the corpus's texts, under its first document's schema
            print(json.dumps(long_document(found[name][1], mode, screens, name)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
