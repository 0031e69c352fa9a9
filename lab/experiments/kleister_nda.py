"""The Kleister NDA benchmark's train split as a job of a new user's, and its score (issue 56).

Kleister NDA (github:applicaai/kleister-nda) states no license: this script is code only. It reads a local
checkout (or the bare git mirror the `fetch` tool makes) and writes everything it derives from the data OUTSIDE
the repository. It reads `train/` only; never point it at `dev-0/` or `test-A/` (held out for issue 56).

    # 1. convert: documents 1-8 and 40-47 of the train split (1-based, inclusive) → OUT/input.parquet,
    #    OUT/gold.jsonl (for `extract eval` and lab/reach.py), OUT/gold-kleister.jsonl (every gold value, for
    #    `score`), OUT/nda_user.py (a plain 4-field model) and OUT/job.yaml
    .venv/bin/python lab/experiments/kleister_nda.py convert --repo /work/.mirror/applicaai+kleister-nda/repo \\
        --docs 1:8,40:47 --out /work/kl/base [--window-tokens 2048]
    # 2. run it (the heavy lock)
    flock /work/notes/heavy.lock env PYTHONPATH=$PWD .venv/bin/python -m pipeline run /work/kl/base/job.yaml
    # 3. score the committed rows against the gold, per slice
    .venv/bin/python lab/experiments/kleister_nda.py score /work/kl/base [--docs 1:8] [--json]

The score is Kleister's: each document's (key, value) pairs against the gold's, exact match after case folding,
the gold's underscores read as spaces, parties as a set; precision, recall and F1 per field and over all pairs
(micro), as its GEval `MultiLabel-F1` on upper-cased values. A document with no row (a dead letter) predicts nothing.
"""

from __future__ import annotations

import argparse
import json
import lzma
import subprocess
import sys
from pathlib import Path
from typing import Any

FIELDS = ("effective_date", "jurisdiction", "party", "term")
COLUMNS = ("filename", "keys", "text_djvu", "text_tesseract", "text_textract", "text_best")  # in-header.tsv

MODEL = '''"""A non-disclosure agreement's key facts, as a new user would write the model (kleister_nda.py)."""

from __future__ import annotations

from datetime import date

from pydantic import BaseModel, Field

from schemas.registry import register


@register("kleister_nda_user", "1")
class NDAUser(BaseModel):
    effective_date: date | None = Field(description="the date the agreement takes effect; null if not stated")
    jurisdiction: str | None = Field(description="the state or country whose law governs the agreement")
    party: list[str] = Field(description="the names of the companies or people that sign the agreement")
    term: str | None = Field(description="how long the agreement lasts, e.g. 2 years; null if not stated")
'''

JOB = """# Kleister NDA train documents {docs}: written by lab/experiments/kleister_nda.py (data outside the repository)
name: kleister-nda
input:
  uri: input.parquet
  id_column: doc_id
  text_column: text
  long_documents: windows
  window_tokens: {window_tokens}
  window_overlap: 0.1
schema: nda_user:NDAUser
prompt: |
  Extract the agreement's effective date, governing jurisdiction, parties and term from this text.
  {{document}}
examples: false
model:
  path: bundled
  max_tokens: 256
  temperature: 0.0
  max_model_len: auto
  engine_kwargs:
    enforce_eager: true
workers:
  actors: 1
  gpus_per_actor: 0
  cpus_per_actor: 2
  batch_size: 4
output:
  uri: out
"""


def parse_docs(spec: str) -> list[int]:
    """`1:8,40:47,90` → [1..8, 40..47, 90] (1-based, inclusive)."""
    found: list[int] = []
    for part in spec.split(","):
        first, _, last = part.partition(":")
        found += range(int(first), int(last or first) + 1)
    return list(dict.fromkeys(found))


def doc_id(number: int) -> str:
    return f"train-{number:03d}"


def _read(repo: Path, name: str) -> bytes:
    """A train file from a checkout, else from a bare git mirror (`git show HEAD:train/...`)."""
    if not name.startswith("train/"):
        raise ValueError("only the train split is read")
    if (repo / name).is_file():
        return (repo / name).read_bytes()
    return subprocess.run(["git", f"--git-dir={repo}", "show", f"HEAD:{name}"], check=True,
                          capture_output=True).stdout


def unescape(text: str) -> str:
    """The TSV's escapes back: `\\n` end of line, `\\f` page break (a blank line), `\\t`, `\\\\`."""
    out, i = [], 0
    while i < len(text):
        if text[i] == "\\" and i + 1 < len(text):
            out.append({"n": "\n", "f": "\n\n", "t": "\t", "\\": "\\"}.get(text[i + 1], text[i:i + 2]))
            i += 2
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def gold_pairs(line: str) -> dict[str, list[str]]:
    """`effective_date=2020-03-03 party=Acme_Inc.` → {field: [values]}, underscores as spaces."""
    found: dict[str, list[str]] = {f: [] for f in FIELDS}
    for pair in line.split():
        key, _, value = pair.partition("=")
        if key in found:
            found[key].append(value.replace("_", " "))
    return found


def convert(repo: Path, docs: list[int], out: Path, window_tokens: str) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    lines = lzma.decompress(_read(repo, "train/in.tsv.xz")).decode("utf-8").split("\n")
    expected = _read(repo, "train/expected.tsv").decode("utf-8").split("\n")
    out.mkdir(parents=True, exist_ok=True)
    ids, texts, gold, kleister = [], [], [], []
    for number in docs:
        columns = dict(zip(COLUMNS, lines[number - 1].split("\t"), strict=False))
        pairs = gold_pairs(expected[number - 1])
        ids.append(doc_id(number))
        texts.append(unescape(columns["text_best"]).strip())
        kleister.append({"doc_id": doc_id(number), **pairs})
        gold.append({"doc_id": doc_id(number), "effective_date": (pairs["effective_date"] or [None])[0],
                     "jurisdiction": (pairs["jurisdiction"] or [None])[0], "party": pairs["party"],
                     "term": (pairs["term"] or [None])[0]})
    pq.write_table(pa.table({"doc_id": ids, "text": texts}), out / "input.parquet")
    for name, records in (("gold.jsonl", gold), ("gold-kleister.jsonl", kleister)):
        (out / name).write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
    (out / "nda_user.py").write_text(MODEL, encoding="utf-8")
    (out / "job.yaml").write_text(JOB.format(docs=",".join(map(str, docs)), window_tokens=window_tokens),
                                  encoding="utf-8")
    lengths = sorted(len(t) for t in texts)
    print(f"{len(ids)} documents ({lengths[0]:,}-{lengths[-1]:,} characters) → {out}")


def committed_rows(output: Path) -> dict[str, dict[str, Any]]:
    """The output's committed rows by doc_id (the product's reader of committed output)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    import duckdb

    from pipeline.output.manifest import committed
    from pipeline.storage import storage_for

    storage = storage_for(str(output))
    files = [str(output / m.files["rows"]) for m in committed(storage, str(output))]
    rows: dict[str, dict[str, Any]] = {}
    for file in files:
        table = duckdb.sql(f"SELECT doc_id, {', '.join(FIELDS)} FROM read_parquet('{file}')").fetchall()
        for values in table:
            rows[values[0]] = dict(zip(FIELDS, values[1:], strict=True))
    return rows


def _normal(value: Any) -> str:
    return " ".join(str(value).replace("_", " ").split()).casefold()


def predicted(row: dict[str, Any] | None) -> set[tuple[str, str]]:
    if row is None:
        return set()
    found = set()
    for key in FIELDS:
        value = row.get(key)
        for item in value if isinstance(value, list) else [value]:
            if item is not None and str(item).strip():
                found.add((key, _normal(item)))
    return found


def score(gold: list[dict[str, Any]], rows: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """P, R and F1 per field and over all (key, value) pairs, micro-averaged over documents."""
    counts = {f: {"tp": 0, "fp": 0, "fn": 0} for f in (*FIELDS, "all")}
    for record in gold:
        truth = {(key, _normal(v)) for key in FIELDS for v in record.get(key) or []}
        guess = predicted(rows.get(record["doc_id"]))
        for key in (*FIELDS, "all"):
            t = {p for p in truth if key in ("all", p[0])}
            g = {p for p in guess if key in ("all", p[0])}
            counts[key]["tp"] += len(t & g)
            counts[key]["fp"] += len(g - t)
            counts[key]["fn"] += len(t - g)
    for c in counts.values():
        p = c["tp"] / (c["tp"] + c["fp"]) if c["tp"] + c["fp"] else 0.0
        r = c["tp"] / (c["tp"] + c["fn"]) if c["tp"] + c["fn"] else 0.0
        c.update(precision=p, recall=r, f1=2 * p * r / (p + r) if p + r else 0.0)
    return {"documents": len(gold), "rows": sum(1 for g in gold if g["doc_id"] in rows), "fields": counts}


def report(found: dict[str, Any]) -> str:
    lines = [f"{found['rows']} rows of {found['documents']} documents",
             "| field | right / gold | P | R | F1 |", "|---|---|---|---|---|"]
    for key, c in found["fields"].items():
        lines.append(f"| {key} | {c['tp']}/{c['tp'] + c['fn']} | {c['precision']:.3f} | {c['recall']:.3f} | "
                     f"{c['f1']:.3f} |")
    return "\n".join(lines)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)
    c = sub.add_parser("convert", help="train documents → input, gold, model and job outside the repository")
    c.add_argument("--repo", type=Path, required=True, help="a kleister-nda checkout or its bare git mirror")
    c.add_argument("--docs", required=True, help="1-based, inclusive ranges of the train split: 1:8,40:47")
    c.add_argument("--out", type=Path, required=True)
    c.add_argument("--window-tokens", default="2048")
    s = sub.add_parser("score", help="the committed rows of a job against its gold")
    s.add_argument("dir", type=Path, help="the folder convert wrote (its gold-kleister.jsonl)")
    s.add_argument("--output", type=Path, help="the job's output (default: DIR/out)")
    s.add_argument("--docs", help="only these documents (1-based ranges)")
    s.add_argument("--json", action="store_true")
    args = p.parse_args()
    if args.command == "convert":
        if Path(__file__).resolve().parents[2] in args.out.resolve().parents:
            p.error("--out must be outside the repository (Kleister NDA has no license)")
        convert(args.repo, parse_docs(args.docs), args.out, args.window_tokens)
        return 0
    gold = [json.loads(line) for line in (args.dir / "gold-kleister.jsonl").read_text().splitlines() if line]
    if args.docs:
        wanted = {doc_id(n) for n in parse_docs(args.docs)}
        gold = [g for g in gold if g["doc_id"] in wanted]
    found = score(gold, committed_rows(args.output or args.dir / "out"))
    print(json.dumps(found, indent=1) if args.json else report(found))
    return 0


if __name__ == "__main__":
    sys.exit(main())
