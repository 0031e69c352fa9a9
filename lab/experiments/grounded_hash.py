"""A digest of what the actor sends the engine beside the prompt, per document: the grounded schema (the grammar's
JSON Schema, its free-field marks taken off, and the free fields' leaf patterns) and a long document's windows
(offsets and prompt token ids, and each window's grammar). Run it on two trees and compare: a performance change
to grounding or to window planning must leave every line the same (issue 57 item 4).

    PYTHONPATH=$PWD .venv/bin/python lab/experiments/grounded_hash.py --out /tmp/after.jsonl
    git archive BASE schemas workers pipeline jobs lab | tar -x -C /tmp/before
    (cd /tmp/before && PYTHONPATH=$PWD /work/main/.venv/bin/python lab/experiments/grounded_hash.py --out /tmp/b.jsonl)
    cmp /tmp/before.jsonl /tmp/after.jsonl

Corpora: the sample job (jobs/extract.yaml), the sample under its unmarked model (`unmarked`), tickets,
multilingual, contracts, and DeepJSONEval en/zh dev (each row's own schema, from ../shared/corpora; skipped when
absent). `--corpora` picks some. Each corpus's documents are grounded as the actor grounds
them (`BatchExtractor._grammar` under the job's settings, constrained); windows: every document of the corpus
and, per corpus, `--long` documents of 20,000 characters made of its documents joined (as stage_cpu.py makes
them), planned with the job's settings and the bundled model's tokenizer, whether or not the job reads windows.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
SHARED = ROOT.parent / "shared" / "corpora" / "deepjsoneval-dev"  # --shared: another place

JOBS = {"sample": ("jobs/extract.yaml", {}),
        "unmarked": ("jobs/extract.yaml", {"schema": "sample.unmarked_invoice:UnmarkedInvoice"}),
        "tickets": ("jobs/tickets/extract.yaml", {}), "multilingual": ("jobs/multilingual/extract.yaml", {}),
        "contracts": ("jobs/contracts/extract.yaml", {})}


def digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, ensure_ascii=False, default=repr).encode()).hexdigest()[:16]


def extractor_for(config: str, tokenizer: Any, sets: dict[str, Any] | None = None) -> Any:
    from pipeline.config import load_config
    from pipeline.dataflow import build_spec
    from pipeline.stage_config import ActorConfig
    from workers.chat_tokens import document_counter
    from workers.engine.vllm_engine import chat_token_ids
    from workers.extractor import BatchExtractor
    from workers.simulated import start_simulated

    loaded = load_config(ROOT / config, overrides={
        **(sets or {}), "model.path": "simulated", "model.simulated": {"allow": True}, "model.engine_kwargs": {}})
    spec = dataclasses.replace(build_spec(ActorConfig.of(loaded), "grounded-hash"), constrained=True)
    engine = start_simulated(spec)
    engine.prompt_token_ids = lambda prompt: chat_token_ids(tokenizer, prompt)
    engine.document_counter = lambda render: document_counter(tokenizer, render)
    return loaded, BatchExtractor(engine, spec, min(spec.engine.max_model_len, engine.max_model_len))


def job_documents(loaded: Any) -> list[tuple[str, str, Any]]:
    import pyarrow.parquet as pq

    cfg = loaded.config
    table = pq.read_table(loaded.input_uri.replace("{date}", ""), columns=[cfg.input.id_column, cfg.input.text_column])
    return [(str(i), t, None) for i, t in zip(*table.to_pydict().values(), strict=True)]


def dje_documents(lang: str, limit: int, folder: Path = SHARED) -> list[tuple[str, str, Any]]:
    path = folder / f"deepjsoneval-{lang}-dev.jsonl"
    if not path.exists():
        return []
    items = [json.loads(line) for line in path.read_text().splitlines() if line.strip()][:limit]
    return [(f"{lang}-{n}", i["text"], json.dumps(i["schema"], ensure_ascii=False)) for n, i in enumerate(items)]


def joined(docs: list[tuple[str, str, Any]], count: int, chars: int) -> list[tuple[str, str, Any]]:
    out = []
    for i in range(count):
        text = docs[i % len(docs)][1]
        while len(text) < chars:
            text += "\n" + docs[(i + len(text)) % len(docs)][1]
        out.append((f"long-{i}", text[:chars], docs[i % len(docs)][2]))
    return out


def lines_for(name: str, extractor: Any, docs: list[tuple[str, str, Any]], long: list[tuple[str, str, Any]]
              ) -> list[dict[str, Any]]:
    from schemas.grounding.unsure import free_fields
    from workers.prompt import prompt_for
    from workers.windowed import plan
    from workers.windows import WindowPolicy

    out = []
    for doc_id, text, schema in docs:
        contract = extractor.contract_for(schema)
        grammar = extractor._grammar(contract, text)
        schema_out, free = free_fields(grammar) if grammar is not None else (None, ())
        out.append({"corpus": name, "doc": doc_id, "grammar": digest(schema_out),
                    "free": digest([p.pattern for p in free])})
    policy = extractor.windows or WindowPolicy()
    for doc_id, text, schema in [*docs, *long]:
        contract = extractor.contract_for(schema)
        schema_json = extractor._schema_json(contract)

        def render(d: str, c: Any = contract, s: str = schema_json) -> Any:
            return prompt_for(extractor.prompt, d, c.json_schema, s)

        planned = plan(text, render, extractor.engine.prompt_token_ids,
                       extractor.max_model_len - extractor.decode.max_tokens, policy,
                       extractor.engine.document_counter(render))
        value = planned.reason if not isinstance(planned, list) else [
            (r.window.index, r.window.start, r.window.end, digest(r.prompt)) for r in planned]
        line = {"corpus": name, "doc": doc_id, "windows": digest(value),
                "count": len(planned) if isinstance(planned, list) else 0}
        if isinstance(planned, list) and len(planned) > 1:  # each window's grammar, as the actor builds a batch's
            line["window_grammars"] = window_grammars(extractor, contract, [r.text for r in planned])
        out.append(line)
    return out


def window_grammars(extractor: Any, contract: Any, texts: list[str]) -> str:
    """A digest of a windowed document's grammars (each window's schema and free fields), as the actor builds them
    for one batch: `_grammars` where the tree has it (a window's field found only in another window is null there:
    schemas.grounding.elsewhere), else each window grounded alone, as before it."""
    from schemas.grounding.unsure import free_fields

    if hasattr(extractor, "_grammars"):
        grammars, free = extractor._grammars([contract] * len(texts), texts, [0] * len(texts))
    else:
        grammars = [extractor._grammar(contract, text) for text in texts]
        free = [free_fields(g)[1] if g is not None else () for g in grammars]
    return digest([[digest(g), [p.pattern for p in f]] for g, f in zip(grammars, free, strict=True)])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--corpora", default="sample,unmarked,tickets,multilingual,contracts,dje-en,dje-zh")
    parser.add_argument("--dje", type=int, default=136, help="DeepJSONEval documents per language")
    parser.add_argument("--shared", type=Path, default=SHARED, help="the DeepJSONEval dev folder")
    parser.add_argument("--long", type=int, default=8, help="20,000-character documents per corpus")
    args = parser.parse_args()
    from transformers import AutoTokenizer

    from workers.bundled_model import resolve_model_path

    tokenizer = AutoTokenizer.from_pretrained(resolve_model_path("bundled"))
    lines = []
    for name in args.corpora.split(","):
        if name.startswith("dje-"):
            docs = dje_documents(name[4:], args.dje, args.shared)
            if not docs:
                print(f"{name}: {args.shared} absent, skipped", file=sys.stderr)
                continue
            _, extractor = extractor_for("jobs/deepjsoneval/extract.yaml", tokenizer)
        else:
            config, sets = JOBS[name]
            loaded, extractor = extractor_for(config, tokenizer, sets)
            docs = job_documents(loaded)
        docs = [d for d in docs if d[1]]
        found = lines_for(name, extractor, docs, joined(docs, args.long, 20_000))
        windowed = sum(1 for f in found if f.get("count", 0) > 1)
        print(f"{name}: {len(docs)} documents, {windowed} planned in more than one window", file=sys.stderr)
        lines += found
    Path(args.out).write_text("".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines))
    print(f"{len(lines)} lines, digest {digest(lines)}")


if __name__ == "__main__":
    main()
