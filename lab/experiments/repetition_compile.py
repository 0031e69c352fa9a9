"""What a bounded repetition costs XGrammar, at compile and at every decoding step, under the bundled tokenizer.

A JSON Schema `maxLength` (and a pattern's `{m,n}`) becomes `chars{m, n}` in XGrammar's grammar. A grounded row's
grammar is that row's own (its document's candidates are in it), so the engine compiles it once per row, and a
bounded string pays its repetition each time: the free branch of a Chinese document's text fields
(`schemas.grounding.core.OTHER_SCRIPT`, `{1,64}`) is most of such a row's compile. This measures, per bound, the
compile (one thread, no cache) and the token mask's cost per decoding step inside the string, for:
- `plain`: `c{m, n}`, as XGrammar writes it;
- `blocks`: the same language as blocks, `c{m} (blk{0,q-1} c{0,b} | blk{q} c{0,r})`, `blk ::= c{b}`;
- `open`: `c{m,}`, no upper bound (another language: to show the floor).
Each form's language is checked for every length 0..n+2 before it is timed.

Run: `.venv/bin/python lab/experiments/repetition_compile.py [--bounds 1:64,0:64,0:200]`
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

CHAR = r'[^\"\\\r\n\u4e00-\u9fff]'
TEXT = "The quick brown fox jumps over the lazy dog, then runs far away into the hills!"


def forms(m: int, n: int) -> dict[str, str]:
    k = n - m
    b = max(2, math.isqrt(k))
    q, r = divmod(k, b)
    head = f"c{{{m}, {m}}} " if m else ""
    return {"plain": f"body ::= c{{{m}, {n}}}",
            "blocks": (f"body ::= {head}rest\nrest ::= (blk{{0, {q - 1}}} c{{0, {b}}}) | (blk{{{q}, {q}}} c{{0, {r}}})"
                       f"\nblk ::= c{{{b}, {b}}}"),
            "open": f"body ::= c{{{m}, -1}}" if m else "body ::= c*"}


def measure(compiler, tokenizer, vocab_size: int, m: int, n: int, name: str, body: str) -> dict[str, object]:
    import xgrammar as xgr
    from xgrammar.testing import _is_grammar_accept_string

    ebnf = 'root ::= "{\\"a\\":\\"" body "\\"}"\n' + body + f"\nc ::= {CHAR}"
    start = time.perf_counter()
    compiled = compiler.compile_grammar(ebnf)
    compile_s = time.perf_counter() - start
    exact = all(_is_grammar_accept_string(ebnf, '{"a":"' + "x" * length + '"}') == (m <= length <= n)
                for length in range(n + 3))
    matcher, mask = xgr.GrammarMatcher(compiled), xgr.allocate_token_bitmask(1, vocab_size)
    ids = tokenizer.encode('{"a":"' + TEXT[:n] + '"}', add_special_tokens=False)
    start = time.perf_counter()
    for token in ids:
        matcher.fill_next_token_bitmask(mask)
        assert matcher.accept_token(token)
    step_ms = (time.perf_counter() - start) / len(ids) * 1000
    return {"bound": f"{{{m},{n}}}", "form": name, "compile_s": round(compile_s, 3), "same_language": exact,
            "mask_ms_per_token": round(step_ms, 3)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--bounds", default="1:64,0:64,0:37,0:200")
    args = parser.parse_args(argv)
    import xgrammar as xgr
    from transformers import AutoTokenizer

    from workers.bundled_model import prepare

    tokenizer = AutoTokenizer.from_pretrained(str(prepare()))
    info = xgr.TokenizerInfo.from_huggingface(tokenizer)
    compiler = xgr.GrammarCompiler(info, max_threads=1, cache_enabled=False)
    print("| bound | form | compile s | same language | mask ms per token |\n|---|---|---|---|---|")
    for bound in args.bounds.split(","):
        m, n = map(int, bound.split(":"))
        for name, body in forms(m, n).items():
            row = measure(compiler, tokenizer, info.vocab_size, m, n, name, body)
            same = row["same_language"] if name != "open" else "no (open)"
            print(f"| {row['bound']} | {name} | {row['compile_s']} | {same} | {row['mask_ms_per_token']} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
