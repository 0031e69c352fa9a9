"""How big and how slow to compile: the substring grammar (schemas/substring.py) against the `text` enum
(schemas/grounding.spans) for documents of 100 to 20,000 words.

Documents are built deterministically from the DeepJSONEval dev paragraphs (prose: long lines, one cell per
line) and the sample invoices (short cells), shuffled with a fixed seed and cut at N words. The schema has one
nullable grounded string field beside a plain string and a number. Compile = XGrammar's GrammarCompiler with the
bundled model's tokenizer, as vLLM's xgrammar backend builds it (8 threads, no cache), compact JSON.

    .venv/bin/python jobs/bench/substring_compile.py [--sizes 100,1000,5000,10000,20000] [--max-enum 10000]
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from schemas.cells import MAX_WORDS  # noqa: E402
from schemas.grounding import spans  # noqa: E402
from schemas.substring import automaton, document_cells, fit_max_words, substring_node, to_ebnf  # noqa: E402

CORPUS = ROOT.parent / "shared" / "corpora" / "deepjsoneval-dev" / "deepjsoneval-en-dev.jsonl"
INVOICES = ROOT / "jobs" / "sample" / "invoices.parquet"


def blocks() -> list[str]:
    """Paragraphs of prose and whole invoices, in a fixed shuffled order."""
    import pyarrow.parquet as pq

    found: list[str] = []
    if CORPUS.exists():
        for line in CORPUS.read_text().splitlines():
            found.extend(p.strip() for p in json.loads(line)["text"].split("\n\n") if p.strip())
    found.extend(pq.read_table(INVOICES, columns=["text"]).column("text").to_pylist())
    random.Random(7).shuffle(found)
    return found


def document(words: int, pool: list[str]) -> str:
    """The first `words` words of the pool, whole lines kept, the last line cut."""
    lines: list[str] = []
    count = 0
    for block in pool:
        for line in block.splitlines() + [""]:
            take = line.split(" ")
            n = len(line.split())
            if count + n > words:
                lines.append(" ".join(take[:max(0, words - count)]))
                return "\n".join(lines)
            lines.append(line)
            count += n
    return "\n".join(lines)


def schema_with(field: dict) -> dict:
    return {"type": "object", "properties": {"party": field, "note": {"type": "string", "maxLength": 200},
                                             "total": {"type": "number"}},
            "required": ["party", "note", "total"]}


def compiler():
    import xgrammar as xgr
    from transformers import AutoConfig, AutoTokenizer

    from workers.bundled_model import resolve_model_path

    path = resolve_model_path("bundled")
    tokenizer = AutoTokenizer.from_pretrained(path)
    config = AutoConfig.from_pretrained(path)
    info = xgr.TokenizerInfo.from_huggingface(tokenizer, vocab_size=config.vocab_size)
    return xgr.GrammarCompiler(info, max_threads=8, cache_enabled=False)


def first_mask_ms(compiled) -> float:
    """Milliseconds to fill the token mask at the start of the field's string (its widest choice)."""
    import xgrammar as xgr

    matcher = xgr.GrammarMatcher(compiled)
    assert matcher.accept_string('{"party":"')
    bitmask = xgr.allocate_token_bitmask(1, compiled.tokenizer_info.vocab_size)
    start = time.perf_counter()
    matcher.fill_next_token_bitmask(bitmask)
    return (time.perf_counter() - start) * 1000


def substring_row(comp, doc: str, compile_it: bool) -> dict:
    start = time.perf_counter()
    auto = automaton(document_cells(doc), MAX_WORDS, None)
    ebnf = to_ebnf(schema_with(substring_node(doc, MAX_WORDS, None, nullable=True)))
    build_s = time.perf_counter() - start
    row = {"states": auto.size, "ebnf_kb": len(ebnf.encode()) / 1024, "build_s": build_s}
    if not compile_it:
        return row
    start = time.perf_counter()
    compiled = comp.compile_grammar(ebnf)
    compile_s = time.perf_counter() - start
    return {**row, "compile_s": compile_s, "mask_ms": first_mask_ms(compiled)}


def fit_row(comp, doc: str) -> dict:
    """The substring grammar at the word bound `fit_max_words` picks for the document."""
    start = time.perf_counter()
    k = fit_max_words(doc)
    if k is None:
        return {"k": None}
    ebnf = to_ebnf(schema_with(substring_node(doc, k, None, nullable=True)))
    build_s = time.perf_counter() - start
    start = time.perf_counter()
    comp.compile_grammar(ebnf)
    return {"k": k, "ebnf_kb": len(ebnf.encode()) / 1024, "build_s": build_s,
            "compile_s": time.perf_counter() - start}


def enum_row(comp, doc: str, max_enum: int) -> dict:
    candidates = spans(doc)
    row: dict = {"candidates": len(candidates)}
    if len(candidates) > max_enum:
        return row
    schema = schema_with({"anyOf": [{"enum": candidates}, {"type": "null"}]})
    start = time.perf_counter()
    compiled = comp.compile_json_schema(json.dumps(schema), any_whitespace=False, separators=(",", ":"))
    row.update(compile_s=time.perf_counter() - start, schema_kb=len(json.dumps(schema).encode()) / 1024,
               mask_ms=first_mask_ms(compiled))
    return row


def fmt(value, spec: str = ".2f") -> str:
    return "-" if value is None else format(value, spec)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="100,1000,5000,10000,20000")
    parser.add_argument("--max-enum", type=int, default=12_500, help="compile the enum up to this many candidates")
    parser.add_argument("--max-compile-words", type=int, default=3_000,
                        help="compile the substring grammar up to this many words (5,000 words took 220 s)")
    args = parser.parse_args()
    comp = compiler()
    comp.compile_grammar('root ::= "x"')  # warm-up
    pool = blocks()
    print("| words | cells | substring: states | EBNF KiB | build s | compile s | 1st mask ms "
          "| enum: candidates | schema KiB | compile s | 1st mask ms | fit K | EBNF KiB | build s | compile s |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for words in (int(s) for s in args.sizes.split(",")):
        doc = document(words, pool)
        sub = substring_row(comp, doc, words <= args.max_compile_words)
        enum = enum_row(comp, doc, args.max_enum)
        fit = fit_row(comp, doc)
        print(f"| {words:,} | {len(document_cells(doc)):,} | {sub['states']:,} | {sub['ebnf_kb']:,.0f} "
              f"| {sub['build_s']:.2f} | {fmt(sub.get('compile_s'))} | {fmt(sub.get('mask_ms'))} "
              f"| {enum['candidates']:,} "
              f"| {fmt(enum.get('schema_kb'), ',.0f')} | {fmt(enum.get('compile_s'))} | {fmt(enum.get('mask_ms'))} "
              f"| {fit['k']} | {fmt(fit.get('ebnf_kb'), ',.0f')} | {fmt(fit.get('build_s'))} "
              f"| {fmt(fit.get('compile_s'))} |",
              flush=True)


if __name__ == "__main__":
    main()
