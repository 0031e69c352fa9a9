"""The actor's CPU per document beside the engine, by stage, without Ray (issue 57 item 4).

    PYTHONPATH=$PWD .venv/bin/python jobs/bench/stage_cpu.py jobs/extract.yaml --docs 256 --chars 400

The job's own `BatchExtractor` (prompt, grounding, classify and validate, calibration, the outcome table) runs the
job's documents in batches of `workers.batch_size` against the simulated engine (`model.path: simulated`, answering
at once), each batch timed by `workers.stages` as an actor times it; a slice of each batch is written to a temporary
folder as an actor stages it. `--chars N`: each document is the job's next document repeated up to N characters
(a 20,000-character document: `--chars 20000`). Prints p50/p99 ms per stage and the cores a GPU needs at 20 and 50
documents/s; writes OUT/stage-cpu-<chars>.json.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import pyarrow as pa  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402

from pipeline.config import load_config  # noqa: E402
from pipeline.dataflow import build_spec  # noqa: E402
from pipeline.output.slices import SliceWriter  # noqa: E402
from pipeline.stage_config import ActorConfig  # noqa: E402
from pipeline.storage import LocalStorage  # noqa: E402
from workers.bundled_model import resolve_model_path  # noqa: E402
from workers.extractor import BatchExtractor  # noqa: E402
from workers.simulated import start_simulated  # noqa: E402
from workers.stages import StageHistograms, batch_clock, stage_lines, summarize, timed  # noqa: E402


def documents(loaded, docs: int, chars: int) -> pa.Table:
    cfg = loaded.config
    table = pq.read_table(loaded.input_uri.replace("{date}", ""), columns=[cfg.input.id_column, cfg.input.text_column])
    texts = table.column(cfg.input.text_column).to_pylist()
    out = []
    for i in range(docs):
        text = texts[i % len(texts)]
        while chars and len(text) < chars:
            text += "\n" + texts[(i + len(text)) % len(texts)]
        out.append(text[:chars] if chars else text)
    return pa.table({cfg.input.id_column: [f"d{i}" for i in range(docs)], cfg.input.text_column: out})


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("config")
    parser.add_argument("--docs", type=int, default=256)
    parser.add_argument("--chars", type=int, default=0, help="each document repeated to this many characters")
    parser.add_argument("--out", default="/tmp/stage-cpu")
    parser.add_argument("--tokenizer", default="bundled", help="the model whose tokenizer builds the prompts ('' for "
                        "the simulated engine's count of characters)")
    args = parser.parse_args()
    loaded = load_config(args.config, overrides={
        "model.path": "simulated", "model.simulated": {"allow": True}, "model.engine_kwargs": {}})
    # As the job runs on its model: constrained (so each document is grounded) and tokenized by the model's own
    # tokenizer; the simulated engine only answers.
    spec = dataclasses.replace(build_spec(ActorConfig.of(loaded), "stage-cpu"), constrained=True)
    engine = start_simulated(spec)
    if args.tokenizer:
        from transformers import AutoTokenizer

        from workers.engine.vllm_engine import chat_token_ids

        tokenizer = AutoTokenizer.from_pretrained(resolve_model_path(args.tokenizer))
        engine.prompt_token_ids = lambda prompt: chat_token_ids(tokenizer, prompt)  # as vLLM's engine counts it
    extractor = BatchExtractor(engine, spec, min(spec.engine.max_model_len, engine.max_model_len))
    extractor.prepare()
    batch_size = loaded.config.workers.batch_size
    table = documents(loaded, args.docs, args.chars)
    histograms = StageHistograms()
    with tempfile.TemporaryDirectory() as folder:
        writer = SliceWriter(LocalStorage(), "stage-cpu")
        for start in range(0, table.num_rows, batch_size):
            batch = table.slice(start, batch_size)
            with batch_clock() as clock:
                outcomes = extractor(batch)
                with timed("staging"):
                    writer.write(f"{folder}/slice-{start}.parquet", outcomes)
            histograms.add(clock.seconds, batch.num_rows)
    summary = summarize(histograms.to_json())
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"stage-cpu-{args.chars or 'job'}.json").write_text(json.dumps(summary, indent=1))
    print(f"{args.docs} documents of {args.chars or 'the job'} characters, batches of {batch_size}:")
    print("\n".join(stage_lines(summary)))
    print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
