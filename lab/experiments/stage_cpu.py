"""The actor's CPU per document beside the engine, by stage, without Ray (issue 57 item 4).

    PYTHONPATH=$PWD .venv/bin/python lab/experiments/stage_cpu.py jobs/extract.yaml --docs 512
    PYTHONPATH=$PWD .venv/bin/python lab/experiments/stage_cpu.py jobs/extract.yaml --docs 48 --chars 20000

The job's own `BatchExtractor` (prompt, grounding, classify and validate, calibration, the outcome table) runs the
job's documents in batches of `workers.batch_size` against the simulated engine (`model.path: simulated`, answering
at once), each batch timed by `workers.stages` as an actor times it; a slice of each batch is written to a temporary
folder as an actor stages it. `--chars N`: each document is the job's next document repeated up to N characters
(a 20,000-character document: `--chars 20000`; `--sources-under 5000`: made of the job's documents shorter than
that, without the sample's 33,000-character contract written as one paragraph). The documents repeat every so
often (the sample has 52): between batches the actor's cache of recent documents' indexes
(`schemas.grounding.index`) is emptied, as a stream of distinct documents would find it, so a repeat is not
grounded from its earlier index (`--keep-index`: keep it). Prints p50/p99 ms per stage (bucket bounds, and exact)
and the cores a GPU needs at 20 and 50 documents/s; writes OUT/stage-cpu-<chars>.json.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import pyarrow as pa  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402

from pipeline.config import load_config  # noqa: E402
from pipeline.dataflow import build_spec  # noqa: E402
from pipeline.output.slices import SliceWriter  # noqa: E402
from pipeline.stage_config import ActorConfig  # noqa: E402
from pipeline.storage import LocalStorage  # noqa: E402
from schemas.grounding import index as grounding_index  # noqa: E402
from workers.bundled_model import resolve_model_path  # noqa: E402
from workers.extractor import BatchExtractor  # noqa: E402
from workers.simulated import start_simulated  # noqa: E402
from workers.stages import StageHistograms, batch_clock, per_document, stage_lines, summarize, timed  # noqa: E402


def quantile(values: list[float], q: float) -> float:
    """The q-th of the values (nearest rank)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * len(ordered) + 0.5) - 1))]


def documents(loaded, docs: int, chars: int, sources_under: int | None = None) -> pa.Table:
    cfg = loaded.config
    table = pq.read_table(loaded.input_uri.replace("{date}", ""), columns=[cfg.input.id_column, cfg.input.text_column])
    texts = [t for t in table.column(cfg.input.text_column).to_pylist()
             if sources_under is None or t is not None and len(t) < sources_under]
    out = []
    for i in range(docs):
        text = texts[i % len(texts)]
        while chars and len(text) < chars:
            text += "\n" + texts[(i + len(text)) % len(texts)]
        out.append(text[:chars] if chars else text)
    return pa.table({cfg.input.id_column: [f"d{i}" for i in range(docs)], cfg.input.text_column: out})


def exact_figures(shares: dict[str, list[float]]) -> dict[str, dict[str, float]]:
    """Per stage: p50, p99 and mean CPU ms per document, from each document's share of its batch."""
    return {stage: {"p50_ms": round(1e3 * quantile(v, 0.5), 3), "p99_ms": round(1e3 * quantile(v, 0.99), 3),
                    "mean_ms": round(1e3 * sum(v) / len(v), 3)} for stage, v in shares.items() if any(v)}


def job_extractor(config: str, tokenizer_model: str) -> tuple[Any, BatchExtractor]:
    """The job's `BatchExtractor` on the simulated engine, as the job runs on its model: constrained (so each
    document is grounded) and tokenized by the model's own tokenizer; the simulated engine only answers."""
    loaded = load_config(config, overrides={
        "model.path": "simulated", "model.simulated": {"allow": True}, "model.engine_kwargs": {}})
    spec = dataclasses.replace(build_spec(ActorConfig.of(loaded), "stage-cpu"), constrained=True)
    engine = start_simulated(spec)
    if tokenizer_model:
        from transformers import AutoTokenizer

        from workers.chat_tokens import document_counter
        from workers.engine.vllm_engine import chat_token_ids

        tokenizer = AutoTokenizer.from_pretrained(resolve_model_path(tokenizer_model))
        engine.prompt_token_ids = lambda prompt: chat_token_ids(tokenizer, prompt)  # as vLLM's engine counts it
        engine.document_counter = lambda render: document_counter(tokenizer, render)  # and its pieces
    return loaded, BatchExtractor(engine, spec, min(spec.engine.max_model_len, engine.max_model_len))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("config")
    parser.add_argument("--docs", type=int, default=256)
    parser.add_argument("--chars", type=int, default=0, help="each document repeated to this many characters")
    parser.add_argument("--out", default="/tmp/stage-cpu")
    parser.add_argument("--sources-under", type=int, default=None, help="make the documents of the job's documents "
                        "shorter than this many characters only (without the sample's one-paragraph contract)")
    parser.add_argument("--keep-index", action="store_true", help="keep the recent documents' indexes across batches")
    parser.add_argument("--tokenizer", default="bundled", help="the model whose tokenizer builds the prompts ('' for "
                        "the simulated engine's count of characters)")
    args = parser.parse_args()
    loaded, extractor = job_extractor(args.config, args.tokenizer)
    extractor.prepare()
    batch_size = loaded.config.workers.batch_size
    table = documents(loaded, args.docs, args.chars, args.sources_under)
    histograms = StageHistograms()
    shares: dict[str, list[float]] = {}  # per stage: each document's share of its batch, for exact quantiles
    with tempfile.TemporaryDirectory() as folder:
        writer = SliceWriter(LocalStorage(), "stage-cpu")
        for start in range(0, table.num_rows, batch_size):
            batch = table.slice(start, batch_size)
            if not args.keep_index:
                grounding_index._recent = grounding_index._Recent()
            with batch_clock() as clock:
                outcomes = extractor(batch)
                with timed("staging"):
                    writer.write(f"{folder}/slice-{start}.parquet", outcomes)
            histograms.add(clock.seconds, batch.num_rows)
            for stage, share in per_document(clock.seconds, batch.num_rows).items():
                shares.setdefault(stage, []).extend([share] * batch.num_rows)
    summary = summarize(histograms.to_json())
    exact = exact_figures(shares)
    summary = {**summary, "exact": exact}  # type: ignore[dict-item]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"stage-cpu-{args.chars or 'job'}.json").write_text(json.dumps(summary, indent=1))
    print(f"{args.docs} documents of {args.chars or 'the job'} characters, batches of {batch_size}:")
    print("\n".join(stage_lines({k: v for k, v in summary.items() if k != "exact"})))
    print("exact p50/p99 (mean) ms: " + ", ".join(f"{k} {v['p50_ms']:.3g}/{v['p99_ms']:.3g} ({v['mean_ms']:.3g})"
                                                  for k, v in exact.items()))  # the histograms' are bucket bounds
    print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
