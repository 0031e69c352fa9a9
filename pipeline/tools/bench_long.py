"""`extract bench --long`: the long-document arm and the windows curve (issue 56).

One engine (the actor's, from `workers.actor.start_engine`: the simulated one under `model.path: simulated`), one
`BatchExtractor` with the job's settings and `input.window_tokens` W, and three measurements in a row:

- `short`: the bench's short synthetic invoices, every one in one `outcomes` call (as `engine_same_requests`);
- `long`: long documents made of the same invoices, each followed by numbered paragraphs of terms and
  conditions to about `windows` windows of W tokens, as many documents as make about as many requests as the
  short ones had (so both runs keep the same sequences in flight), in one `outcomes` call;
- `curve`: one document of about k windows alone, for each k of `curve` (default 1, 2, 5, 10, 20, 50): the
  seconds per document against its windows, and a least-squares line through them.

Output tokens/s is every generated token over the seconds from the `outcomes` call to its return (prompts,
windows, grounding, generation, the merge and classifying all timed), so `long_over_short_tokens` says what a
windowed document costs per output token beside a short one: the goal is >= 0.9. The long documents' gold is
their invoice's, so `field_accuracy` also says what the merge keeps.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import random
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from pipeline.config import SIMULATED, load_config
from pipeline.dataflow import actor_env
from pipeline.tools.bench_requests import TimedEngine, actor_spec
from pipeline.tools.bench_scoring import leaf_fields
from pipeline.tools.child import run_in_child

ARM = "long_documents"
CURVE = (1, 2, 5, 10, 20, 50)
WINDOWS = 4  # windows per long document
WINDOW_TOKENS = 512
FILL = 0.85  # of a window's tokens its paragraphs fill, about
CHARS_PER_TOKEN = 4.0  # about, for English prose (the simulated engine's exactly)
GOAL = 0.9
TERMS = [
    "The Supplier shall deliver the goods to the address stated on the order, at its own risk until delivery.",
    "Title to the goods passes to the Customer on payment in full of every amount due under this invoice.",
    "Any claim for damage in transit must be notified in writing within seven days of delivery.",
    "Late payments bear interest at the statutory rate from the day after the due date until paid.",
    "The Customer may not set off any amount it claims against the Supplier against the amounts due.",
    "Goods returned without the Supplier's prior written consent will not be accepted or credited.",
    "The Supplier's liability for any loss is limited to the price of the goods that caused the loss.",
    "Neither party is liable for a delay caused by events beyond its reasonable control.",
    "These terms are the whole agreement between the parties and replace any earlier understanding.",
    "A waiver of any breach is not a waiver of any other breach, and must be given in writing.",
]


def terms(count: int, rng: random.Random) -> str:
    """`count` numbered paragraphs of three or four sentences of terms each, drawn from `TERMS`."""
    return "\n\n".join(f"{i + 1}. " + " ".join(rng.sample(TERMS, rng.choice((3, 4)))) for i in range(count))


def long_document(text: str, paragraphs: int, seed: int) -> str:
    """An invoice followed by `paragraphs` paragraphs of terms: its values in the first window, the rest filler."""
    return text if paragraphs <= 0 else f"{text}\n\nTerms and conditions\n\n{terms(paragraphs, random.Random(seed))}"


def paragraphs_for(windows: int, window_tokens: int, per_paragraph: float) -> int:
    """Paragraphs of terms for a document of about `windows` windows. Windows end at paragraphs, so each holds
    about `FILL` of its tokens, and the overlap (at most a tenth of a window, by default) is rarely a whole paragraph
    of terms: about `FILL` × W new tokens a window; the document is aimed at half a window short of `windows`."""
    if windows <= 1:
        return 0
    return max(1, math.ceil((windows - 0.5) * FILL * window_tokens / per_paragraph))


def paragraph_tokens(count: Callable[[str], int] | None = None) -> float:
    """About how many tokens a paragraph of terms is: `count`'s tokens (the model's tokenizer), else its characters
    over `CHARS_PER_TOKEN` (the simulated engine's tokens; the bundled model's tokenizer makes ~4.8 characters a
    token of these terms, so the estimate alone gave 41 windows where 50 were asked)."""
    block = terms(40, random.Random(0))
    return (count(block) if count is not None else len(block) / CHARS_PER_TOKEN) / 40


def model_tokens(config: Path | str, overrides: dict[str, Any]) -> Callable[[str], int] | None:
    """The job's model's token count of a text (its tokenizer, loaded here), or None under the simulated engine."""
    model = load_config(config, overrides).config.model.path
    if model == SIMULATED:
        return None
    from transformers import AutoTokenizer

    from workers.bundled_model import resolve_model_path

    tokenizer = AutoTokenizer.from_pretrained(resolve_model_path(model))
    return lambda text: len(tokenizer.encode(text, add_special_tokens=False))


def documents(ids: list[str], texts: list[str], setup: LongSetup,
              count: Callable[[str], int] | None = None) -> dict[str, list[str]]:
    """The long documents (about `setup.windows` windows each, as many as make about as many requests as the short
    documents) and the curve's (one per point), ids and texts; `count`: the model's token count of a text."""
    per_paragraph = paragraph_tokens(count)

    def make(k: int, i: int) -> str:
        return long_document(texts[i % len(texts)], paragraphs_for(k, setup.window_tokens, per_paragraph), seed=i)

    n_long = max(1, -(-len(ids) // setup.windows))
    return {"long_ids": [f"long-{i}" for i in range(n_long)], "long_texts": [make(setup.windows, i)
                                                                            for i in range(n_long)],
            "curve_ids": [f"curve-{k}" for k in setup.curve], "curve_texts": [make(k, k) for k in setup.curve]}


def _measure(extractor: Any, engine: TimedEngine, ids: list[str], texts: list[str],
             golds: list[dict] | None) -> dict[str, Any]:
    """One `outcomes` call over the documents: seconds, tokens, windows per document, and the records' scores."""
    engine.calls.clear()
    started = time.perf_counter()
    outcomes = extractor.outcomes(ids, texts)
    seconds = time.perf_counter() - started
    generations = [g for c in engine.calls for g in c.generations]
    tokens = sum(g.output_tokens for g in generations)
    windows = [int(o.extra.get("windows") or 1) for o in outcomes]
    generate_s = sum(c.ended - c.started for c in engine.calls)
    result = {"docs": len(ids), "requests": len(generations), "seconds": round(seconds, 3),
              # in the engine's generate calls; the rest: prompts, windows, grounding, the merge, classifying
              "generate_s": round(generate_s, 3), "other_s": round(seconds - generate_s, 3),
              "seconds_per_doc": round(seconds / len(ids), 3), "windows": windows,
              "prompt_tokens": sum(g.prompt_tokens for g in generations), "output_tokens": tokens,
              "output_tokens_per_s": round(tokens / seconds, 1) if seconds > 0 else None,
              "rows": sum(o.is_row for o in outcomes),
              "dead_letters": sorted(o.reason or "dead_letter" for o in outcomes if not o.is_row),
              "dead_letter_causes": sorted(cause(o) for o in outcomes if not o.is_row)}
    if golds is not None:
        result.update(leaf_fields([o.record if o.is_row else None for o in outcomes], golds, seconds))
    return result


def cause(outcome: Any) -> str:
    """A dead letter's reason and its first error's keyword and field (`schema_violation: maxItems at items`):
    what made a long document's merged record fail, at a glance."""
    errors = (outcome.error or {}).get("errors") or []
    first = errors[0] if errors and isinstance(errors[0], dict) else {}
    where = ".".join(str(p) for p in first.get("loc") or ())
    keyword = first.get("keyword") or first.get("type")
    detail = f": {keyword}" + (f" at {where}" if where else "") if keyword else ""
    return f"{outcome.reason or 'dead_letter'}{detail}"


def fit_line(points: list[tuple[float, float]]) -> dict[str, float | None]:
    """The least-squares line seconds = intercept + slope × windows through `points`, and its R²."""
    n = len(points)
    if n < 2:
        return {"slope": None, "intercept": None, "r2": None}
    mx, my = sum(x for x, _ in points) / n, sum(y for _, y in points) / n
    sxx = sum((x - mx) ** 2 for x, _ in points)
    if not sxx:
        return {"slope": None, "intercept": None, "r2": None}
    slope = sum((x - mx) * (y - my) for x, y in points) / sxx
    intercept = my - slope * mx
    total = sum((y - my) ** 2 for _, y in points)
    residual = sum((y - intercept - slope * x) ** 2 for x, y in points)
    return {"slope": round(slope, 4), "intercept": round(intercept, 4),
            "r2": round(1 - residual / total, 4) if total else None}


@dataclasses.dataclass
class LongSetup:
    """What the arm runs: its window size, windows per long document and the curve's points."""

    window_tokens: int = WINDOW_TOKENS
    windows: int = WINDOWS
    curve: tuple[int, ...] = CURVE


def long_child(config: str, overrides: dict[str, Any], ids: list[str], texts: list[str], golds: list[dict],
               docs: dict[str, list[str]]) -> dict[str, Any]:
    """The arm in this process (a child of the bench's): one engine, the short run, the long run, the curve.
    `overrides` point `input.uri` at the long documents, so the engine's KV budget is sized for their windows."""
    from workers.actor import start_engine
    from workers.engine import has_accelerator
    from workers.extractor import BatchExtractor

    loaded = load_config(config, overrides)
    for key, value in actor_env(loaded.config.workers.gpus_per_actor).items():
        os.environ.setdefault(key, value)
    spec = actor_spec(loaded, "bench-long")
    engine = TimedEngine(start_engine(spec, spec.model_path != SIMULATED and has_accelerator()))
    try:
        extractor = BatchExtractor(engine, spec, min(spec.engine.max_model_len, engine.max_model_len))
        extractor.prepare()
        short = _measure(extractor, engine, ids, texts, golds)
        long = _measure(extractor, engine, docs["long_ids"], docs["long_texts"], golds[:len(docs["long_ids"])])
        curve = [_measure(extractor, engine, [i], [t], None)
                 for i, t in zip(docs["curve_ids"], docs["curve_texts"], strict=True)]
    finally:
        engine.inner.close()
    return {"short": short, "long": long, "curve": curve, "engine_init_s": round(engine.init_seconds, 3)}


def summarize(raw: dict[str, Any], setup: LongSetup) -> dict[str, Any]:
    """The arm's report: its runs, the ratio long ÷ short in output tokens/s, the curve and its line."""
    short, long = raw["short"], raw["long"]
    ratio = (round(long["output_tokens_per_s"] / short["output_tokens_per_s"], 3)
             if long["output_tokens_per_s"] and short["output_tokens_per_s"] else None)
    points = [(float(p["windows"][0]), float(p["seconds"])) for p in raw["curve"]]
    windows = sorted(long["windows"])
    return {**raw, "window_tokens": setup.window_tokens, "windows_asked": setup.windows,
            "long_over_short_tokens": ratio, "goal": GOAL,
            "long_windows": {"median": windows[len(windows) // 2] if windows else None,
                             "max": windows[-1] if windows else None},
            "curve_points": [{"windows": int(x), "seconds": y, "seconds_per_window": round(y / x, 3)}
                             for x, y in points],
            "curve_fit": fit_line(points)}


def run_long_arm(config: Path, overrides: dict[str, Any], ids: list[str], texts: list[str], golds: list[dict],
                 out: Path, setup: LongSetup, env: dict[str, str] | None = None) -> dict[str, Any]:
    """The arm in a child process of its own (its engine's memory goes when it exits): the long documents written
    to OUT/corpus-long.parquet, the job at `input.window_tokens` W. Returns the arm's report."""
    docs = documents(ids, texts, setup, model_tokens(config, overrides))
    corpus = out / "corpus-long.parquet"
    write_corpus(corpus, docs["long_ids"] + docs["curve_ids"], docs["long_texts"] + docs["curve_texts"])
    overrides = {**overrides, "input.uri": str(corpus.resolve()), "input.window_tokens": setup.window_tokens}
    raw = run_in_child(long_child, str(config), overrides, ids, texts, golds, docs, env=env,
                       what="the bench's long-document engine")
    return summarize(raw, setup)


def render_markdown(report: dict[str, Any]) -> str:
    short, long = report["short"], report["long"]
    lines = [f"## Long documents: windows of {report['window_tokens']} tokens", "",
             "| run | docs | requests | windows per doc (median, max) | seconds | output tokens | tokens/s | "
             "field acc. |", "|---|---|---|---|---|---|---|---|"]
    for name, run in (("short", short), ("long", long)):
        w = sorted(run["windows"])
        lines.append(f"| {name} | {run['docs']} | {run['requests']} | {w[len(w) // 2]}, {w[-1]} | {run['seconds']} | "
                     f"{run['output_tokens']} | {run['output_tokens_per_s']} | {run.get('field_accuracy')} |")
    for name, run in (("short", short), ("long", long)):
        if run.get("dead_letter_causes"):
            lines += ["", f"Dead letters ({name}): " + "; ".join(run["dead_letter_causes"]) + "."]
    lines += ["", f"long ÷ short output tokens/s: {report['long_over_short_tokens']} (goal >= {report['goal']}).",
              "", "Seconds per document by windows (each document alone):", "",
              "| windows | seconds | seconds per window |", "|---|---|---|"]
    lines += [f"| {p['windows']} | {p['seconds']} | {p['seconds_per_window']} |" for p in report["curve_points"]]
    fit = report["curve_fit"]
    lines += ["", f"Least-squares line: seconds = {fit['intercept']} + {fit['slope']} × windows, R² {fit['r2']}.", ""]
    return "\n".join(lines)


def render_chart(report: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    xs = [p["windows"] for p in report["curve_points"]]
    ys = [p["seconds"] for p in report["curve_points"]]
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot(xs, ys, "o", label="one document")
    fit = report["curve_fit"]
    if fit["slope"] is not None and xs:
        ax.plot([0, max(xs)], [fit["intercept"], fit["intercept"] + fit["slope"] * max(xs)], "-",
                label=f"{fit['intercept']} + {fit['slope']} × windows (R² {fit['r2']})")
    ax.set_xlabel("windows")
    ax.set_ylabel("seconds per document")
    ax.set_title(f"windows of {report['window_tokens']} tokens")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_long(out: Path, report: dict[str, Any]) -> None:
    """DIR/bench-long.json, bench-long.md and bench-windows.png."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "bench-long.json").write_text(json.dumps(report, indent=2))
    (out / "bench-long.md").write_text(render_markdown(report))
    render_chart(report, out / "bench-windows.png")


def write_corpus(path: Path, ids: list[str], texts: list[str]) -> None:
    pq.write_table(pa.table({"doc_id": ids, "text": pa.array(texts, pa.string())}), path)
