"""`extract bench --long` without an engine: the long documents it makes, the curve's line, the ratio and the report
(pipeline.tools.bench_long). Its engine run is in tests/integration/test_bench.py (simulated)."""

from __future__ import annotations

import random

from pipeline.tools.bench import ratios
from pipeline.tools.bench_long import (
    LongSetup,
    documents,
    fit_line,
    long_document,
    paragraph_tokens,
    paragraphs_for,
    render_markdown,
    summarize,
    terms,
)
from pipeline.tools.synthetic import make_corpus
from workers.windows import Splitter, WindowPolicy


def test_a_long_document_is_its_invoice_then_terms_and_the_same_for_the_same_seed():
    text = long_document("INVOICE 7", 3, seed=1)
    assert text.startswith("INVOICE 7\n\nTerms and conditions\n\n1. ") and "\n\n3. " in text and "\n\n4. " not in text
    assert text == long_document("INVOICE 7", 3, seed=1) and long_document("INVOICE 7", 0, seed=1) == "INVOICE 7"
    assert terms(2, random.Random(0)).count("\n\n") == 1


def test_documents_aim_at_their_windows_as_the_splitter_cuts_them():
    """At 4 characters a token (the simulated engine's tokenizer), each document needs about the windows asked."""
    ids, texts, _ = make_corpus(6, 4242, prefix="bench")
    setup = LongSetup(window_tokens=512, windows=3, curve=(1, 2, 5, 10, 20))
    docs = documents(ids, texts, setup)
    assert docs["long_ids"] == ["long-0", "long-1"] and docs["curve_ids"] == [f"curve-{k}" for k in setup.curve]
    assert docs["curve_texts"][0] == texts[1]  # one window: the invoice alone

    def count(piece: str) -> int:
        return -(-len(piece) // 4)

    def windows(text: str) -> int:
        return len(Splitter(text, 512, WindowPolicy(512), count, lambda a, b: count(text[a:b]) <= 512).windows())

    got = [windows(t) for t in docs["curve_texts"]]
    assert got[0] == 1 and got == sorted(got) and all(abs(g - k) <= max(1, k // 5) for g, k in zip(got, setup.curve,
                                                                                                    strict=True)), got
    assert paragraphs_for(1, 512, paragraph_tokens()) == 0 and paragraphs_for(2, 512, 100) == 7


def test_the_curves_line_and_its_r2():
    fit = fit_line([(1, 2.0), (2, 3.0), (5, 6.0), (10, 11.0)])
    assert fit == {"slope": 1.0, "intercept": 1.0, "r2": 1.0}
    assert fit_line([(1, 1.0)])["slope"] is None and fit_line([(2, 1.0), (2, 3.0)])["slope"] is None
    bent = fit_line([(1, 1.0), (2, 4.0), (3, 9.0), (4, 16.0)])
    assert 0 < bent["r2"] < 1


def _run(docs: int, windows: list[int], tokens: int, seconds: float) -> dict:
    return {"docs": docs, "requests": sum(windows), "seconds": seconds, "windows": windows, "output_tokens": tokens,
            "output_tokens_per_s": round(tokens / seconds, 1), "field_accuracy": 0.5}


def test_the_ratio_is_long_over_short_output_tokens_per_s_and_the_report_shows_it():
    long = {**_run(1, [4], 360, 2.0), "dead_letter_causes": ["schema_violation: maxItems at items"]}
    raw = {"short": _run(4, [1, 1, 1, 1], 400, 2.0), "long": long,
           "curve": [_run(1, [1], 50, 0.5), _run(1, [3], 150, 1.5)], "engine_init_s": 1.0}
    report = summarize(raw, LongSetup(window_tokens=256, windows=4, curve=(1, 3)))
    assert report["long_over_short_tokens"] == 0.9 and report["long_windows"] == {"median": 4, "max": 4}
    assert report["curve_points"] == [{"windows": 1, "seconds": 0.5, "seconds_per_window": 0.5},
                                      {"windows": 3, "seconds": 1.5, "seconds_per_window": 0.5}]
    assert report["curve_fit"]["slope"] == 0.5
    markdown = render_markdown(report)
    assert "| long | 1 | 4 | 4, 4 | 2.0 | 360 | 180.0 | 0.5 |" in markdown
    assert "Dead letters (long): schema_violation: maxItems at items." in markdown
    assert "Dead letters (short)" not in markdown
    assert "long ÷ short output tokens/s: 0.9 (goal >= 0.9)" in markdown and "| 3 | 1.5 | 0.5 |" in markdown
    arms = {"pipeline": {"docs_per_s": 1.0, "output_tokens_per_s": 1.0}, "engine": {"docs_per_s": 1.0,
                                                                                   "output_tokens_per_s": 1.0},
            "retry": {"docs_per_s": 1.0}}
    price = {"constrained_decode_ms_per_token": 1.0, "equal_length_unconstrained_decode_ms_per_token": 1.0}
    assert ratios(arms, price, report)["long_over_short_tokens"] == 0.9
    assert ratios(arms, price)["long_over_short_tokens"] is None


def test_a_dead_letters_cause_names_its_first_errors_keyword_and_field():
    from pipeline.tools.bench_long import cause
    from workers.classify import Outcome, dead_letter

    merged = dead_letter("schema_violation", "too long", errors=[
        {"loc": ["items"], "keyword": "maxItems", "msg": "[...] is too long"}, {"loc": ["total"], "type": "x"}])
    assert cause(merged) == "schema_violation: maxItems at items"
    assert cause(dead_letter("semantic_invalid", "x", errors=[{"loc": ["vendor", "name"], "type": "value_error"}])) \
        == "semantic_invalid: value_error at vendor.name"
    assert cause(dead_letter("input_too_long", "over max_windows")) == "input_too_long"
    assert cause(Outcome(reason=None)) == "dead_letter"


def test_documents_aim_with_the_models_own_token_count_where_given():
    """A tokenizer that makes fewer tokens of the terms than 4 characters a token: more paragraphs, as many windows."""
    ids, texts, _ = make_corpus(6, 4242, prefix="bench")
    setup = LongSetup(window_tokens=512, windows=3, curve=(10, 50))

    def count(piece: str) -> int:
        return -(-len(piece) // 5)

    assert abs(paragraph_tokens(count) - paragraph_tokens() * 4 / 5) < 0.1
    docs = documents(ids, texts, setup, count)

    def windows(text: str) -> int:
        return len(Splitter(text, 512, WindowPolicy(512), count, lambda a, b: count(text[a:b]) <= 512).windows())

    got = [windows(t) for t in docs["curve_texts"]]
    assert all(abs(g - k) <= max(1, k // 10) for g, k in zip(got, setup.curve, strict=True)), got
    assert [windows(t) for t in documents(ids, texts, setup)["curve_texts"]] != got  # the estimate alone falls short
