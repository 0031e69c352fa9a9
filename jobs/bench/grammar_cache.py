"""What vLLM's XGrammar cache holds over a long run of grounded documents, by its byte bound.

Grounded decoding gives each document a grammar of its own (`BatchExtractor._grammar`: the contract's grounded
fields narrowed to the values the document writes), and vLLM's XGrammar backend keeps every compiled grammar in
an LRU cache bounded by bytes (`VLLM_XGRAMMAR_CACHE_MB`, vLLM's default 512). A grammar is used by its own
document's requests (its first attempt and any retry), so on a long run the cache fills to its bound with
grammars no other document asks for. This compiles the sample's grounded grammars as the engine would (the
request's schema after `grammar_schema` and `structured_params`, a compiler built as vLLM builds it), cycling
over the documents with a distinct suffix each round so that every grammar is new, and reports the cache's
bytes (XGrammar's own count), the process's RSS, and the compiled size of one grammar.

    nice -n 19 .venv/bin/python jobs/bench/grammar_cache.py [--grammars 1500] [--cache-mb 512] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
MIB = 1 << 20


def rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("config", nargs="?", default=str(ROOT / "jobs/extract.yaml"))
    parser.add_argument("--grammars", type=int, default=1500)
    parser.add_argument("--cache-mb", type=int, default=512)
    parser.add_argument("--json", type=Path)
    return parser.parse_args()


def fill_cache(compiler: Any, spec: Any, texts: list[str], grammars: int,
               cache_mb: int) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """`grammars` grounded grammars compiled as the engine would, cycling over `texts` with a distinct suffix each
    round so that every grammar is new: the result, and the series of the cache's bytes and the RSS every 100."""
    from schemas.bounds import grammar_schema
    from schemas.grounding import ground
    from workers.engine.outputs import structured_params

    decode, contract = spec.decode, spec.schema.contract
    bounds = spec.engine.grammar_bounds
    started_rss, started = rss_mib(), time.perf_counter()
    series, sizes = [], []
    for n in range(grammars):
        text = texts[n % len(texts)] + f"\nRef. R{n // len(texts):05d}-{n:06d}"
        schema = grammar_schema(ground(contract.json_schema, text, decode.ground_numbers, decode.grounding),
                                *bounds, max_tokens=decode.max_tokens)
        params = structured_params(schema, "xgrammar")
        if params.grammar is not None:
            compiled = compiler.compile_grammar(params.grammar)
        else:
            compiled = compiler.compile_json_schema(params.json, any_whitespace=False, separators=(",", ":"))
        if n < 50:
            sizes.append(compiled.memory_size_bytes)
        del compiled
        if (n + 1) % 100 == 0 or n + 1 == grammars:
            series.append({"grammars": n + 1, "cache_mib": round(compiler.get_cache_size_bytes() / MIB, 1),
                           "rss_mib": round(rss_mib(), 1)})
            print(json.dumps(series[-1]), file=sys.stderr, flush=True)
    result = {"cache_limit_mib": cache_mb, "grammars": grammars,
              "grammar_mib_mean": round(sum(sizes) / len(sizes) / MIB, 3),
              "rss_before_mib": round(started_rss, 1), "rss_after_mib": series[-1]["rss_mib"],
              "rss_growth_mib": round(series[-1]["rss_mib"] - started_rss, 1),
              "cache_mib": series[-1]["cache_mib"], "seconds": round(time.perf_counter() - started, 1)}
    return result, series


def main() -> int:
    args = parse_args()

    import pyarrow.parquet as pq
    import xgrammar as xgr
    from transformers import AutoTokenizer

    from pipeline.config import load_config
    from pipeline.dataflow import build_spec
    from workers.bundled_model import resolve_model_path

    loaded = load_config(args.config)
    spec = build_spec(loaded, "grammar-cache")
    texts = [t for t in pq.read_table(ROOT / "jobs/sample/invoices.parquet").column(spec.text_column).to_pylist()
             if t and len(t) < 8000]
    tokenizer = AutoTokenizer.from_pretrained(resolve_model_path(spec.model_path))
    info = xgr.TokenizerInfo.from_huggingface(tokenizer, vocab_size=len(tokenizer))
    compiler = xgr.GrammarCompiler(info, max_threads=8, cache_enabled=True, cache_limit_bytes=args.cache_mb * MIB)
    result, series = fill_cache(compiler, spec, texts, args.grammars, args.cache_mb)
    print(json.dumps(result))
    if args.json:
        args.json.write_text(json.dumps({**result, "series": series}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
