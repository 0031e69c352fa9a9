"""Issue 58: the run's tokens and cost at a stated price (pipeline.costs), the fields that look copied
(pipeline.field_warnings), and eval's list of wrong values (pipeline.tools.evaluate.mistakes)."""

from __future__ import annotations

import pyarrow as pa
import pytest

from pipeline.costs import GENERATION_RATE, WALL_RATE, cost_figures, percentile, rates, token_figures, usage_lines
from pipeline.field_warnings import example_warnings, field_warnings
from pipeline.tools.evaluate import DEFAULT_OPTIONS
from pipeline.tools.evaluate.mistakes import by_field, csv_rows, run_mistakes, snippet

# -- tokens and cost ----------------------------------------------------------------------------


def test_token_figures_totals_percentiles_and_generation_rate():
    prompt = list(range(100, 200))  # 100 documents: 100..199 prompt tokens
    output = [10] * 98 + [500, 1000]
    figures = token_figures(prompt, output, generation_s=20.0)
    assert figures["documents"] == 100
    assert figures["prompt_tokens"] == sum(range(100, 200)) == 14950
    assert figures["output_tokens"] == 980 + 1500
    assert figures["prompt_per_document"] == {"p50": 149, "p99": 198}  # nearest rank
    assert figures["output_per_document"] == {"p50": 10, "p99": 500}
    assert figures["generation_tokens_per_s"] == 2480 / 20 == 124.0
    assert percentile([], 50) is None and token_figures([], [], None)["generation_tokens_per_s"] is None


def test_cost_at_a_price_per_million_tokens():
    price = {"per_million_input_tokens": 0.15, "per_million_output_tokens": 0.60}
    cost = cost_figures(prompt_tokens=2_000_000, output_tokens=500_000, documents=4000, wall_s=100.0, units=1,
                        price=price)
    assert cost["total"] == pytest.approx(2 * 0.15 + 0.5 * 0.60) == 0.6
    assert cost["per_1000_documents"] == pytest.approx(0.6 / 4) == 0.15
    assert "2000000 input tokens at 0.15" in cost["basis"]


def test_cost_at_a_price_per_gpu_hour():
    cost = cost_figures(10**9, 10**9, documents=500, wall_s=1800.0, units=2, price={"per_gpu_hour": 3.0})
    assert cost["total"] == pytest.approx(0.5 * 2 * 3.0) == 3.0  # half an hour on two GPUs; tokens do not count
    assert cost["per_1000_documents"] == pytest.approx(6.0)
    assert cost_figures(1, 1, 1, 1.0, 1, None) is None
    assert cost_figures(1, 1, 0, 1.0, 1, {"per_gpu_hour": 1.0})["per_1000_documents"] is None


def test_cost_config_takes_one_basis(tmp_path):
    from pipeline.config import ConfigError, load_config
    from tests.conftest import write_config

    both = write_config(tmp_path, simulated=True, **{"output.cost": {"per_gpu_hour": 2.0,
                                                                      "per_million_input_tokens": 1.0}})
    with pytest.raises(ConfigError, match="one basis"):
        load_config(str(both))
    tokens = write_config(tmp_path, simulated=True, **{"output.cost": {"per_million_input_tokens": 1.0,
                                                                        "per_million_output_tokens": 2.0}})
    assert load_config(str(tokens)).config.output.cost.per_million_output_tokens == 2.0


def test_summary_labels_both_rates_and_gives_tokens_and_cost():
    timings = {"generation_s": 2.0, "total_s": 20.0}
    assert rates(timings, 10) == {GENERATION_RATE: 5.0, WALL_RATE: 0.5}
    usage = {**token_figures([100, 120], [10, 30], 2.0),
             "cost": cost_figures(220, 40, 2, 20.0, 1, {"per_million_input_tokens": 1e6 / 220,
                                                        "per_million_output_tokens": 0})}
    text = "\n".join(usage_lines(usage, timings, 10))
    assert "5.00 docs/s over generation only; 0.50 docs/s over wall time with start-up" in text
    assert "tokens     prompt 220 (per document p50 100, p99 120), output 40 (p50 10, p99 30)" in text
    assert "20.0 output tokens/s of generation" in text
    assert "cost       1.0000, 500.0000 per 1,000 documents" in text


# -- fields that look copied ---------------------------------------------------------------------


def test_a_field_null_in_every_row_is_flagged_and_a_varied_one_is_not():
    rows = pa.table({"id": [f"d{i}" for i in range(12)], "city": [f"c{i}" for i in range(12)],
                     "deposit": pa.array([None] * 12, pa.float64()), "pets": [True] * 10 + [False] * 2,
                     "currency": ["EUR"] * 12, "_run_id": ["r"] * 12})
    warnings = field_warnings(rows)
    assert warnings == ["deposit is null in 12 of 12 rows (100%)",
                        'currency holds the same value "EUR" in 12 of 12 rows (100%)']
    assert field_warnings(rows.slice(0, 2)) == []  # two rows say nothing
    eleven = rows.set_column(2, "deposit", pa.array([None] * 11 + [5.0]))
    assert "deposit is null in 11 of 12 rows (92%)" in field_warnings(eleven)  # 91.7% > 90%
    ten = rows.set_column(2, "deposit", pa.array([None] * 10 + [5.0, 6.0]))
    assert not any(w.startswith("deposit") for w in field_warnings(ten))  # 83% is not flagged


def test_examples_that_all_leave_a_field_null_or_share_a_value_are_flagged():
    outputs = [{"city": "Graz", "deposit": None, "currency": "EUR"},
               {"city": "Linz", "deposit": None, "currency": "EUR"}]
    warnings = example_warnings(outputs)
    assert len(warnings) == 2
    assert warnings[0].startswith("every example leaves deposit null")
    assert warnings[1].startswith('every example holds the same currency ("EUR")')
    assert example_warnings(outputs[:1]) == []
    assert example_warnings([*outputs, {"city": "Wien", "deposit": 900, "currency": "CHF"}]) == []


# -- wrong values, listed ------------------------------------------------------------------------

SCHEMA = {"type": "object", "properties": {"city": {"type": ["string", "null"]},
                                           "rent": {"type": ["number", "null"]},
                                           "deposit": {"type": ["number", "null"]}}}


def test_mistakes_most_frequent_field_first_with_snippets_from_spans_or_the_text():
    texts = {"a": "Flat in Wien 1030, rent EUR 2.300 a month.", "b": "Graz 8010, rent EUR 750.",
             "c": "Linz 4020, rent EUR 480, deposit EUR 900."}
    golds = {"a": {"city": "Wien", "rent": 2300, "deposit": None}, "b": {"city": "Graz", "rent": 750},
             "c": {"city": "Linz", "rent": 480, "deposit": 900}}
    rows = {"a": {"city": "Wien", "rent": 2.3, "deposit": None}, "b": {"city": "Graz", "rent": 8010, "deposit": 5},
            "c": {"city": "Linz", "rent": 480, "deposit": None}}
    spans = {"b": {"rent": [{"start": 5, "end": 9}]}}
    found = by_field(run_mistakes(golds, rows, lambda _: SCHEMA, DEFAULT_OPTIONS, spans, texts))
    assert list(found) == ["deposit", "rent"]  # 2 mistakes each: ties by name; city has none
    assert [(m["doc_id"], m["kind_word"]) for m in found["deposit"]] == [("c", "missed"), ("b", "invented")]
    rent = {m["doc_id"]: m for m in found["rent"]}
    assert rent["a"]["snippet"] == "Flat in Wien 1030, rent EUR ⟦2.300⟧ a month."  # found by a search
    # `2.300` is ambiguous in an English sentence (2.3, or 2300 with a dot as group mark): both readings are kept,
    # so the gold value's own place is found too
    assert rent["a"]["gold_snippet"] == "Flat in Wien 1030, rent EUR ⟦2.300⟧ a month."
    assert rent["b"]["span"] == (5, 9) and "Graz ⟦8010⟧, rent" in rent["b"]["snippet"]  # the row's _spans
    assert rent["b"]["gold_span"] == (20, 23)
    missed = found["deposit"][0]
    assert missed["predicted"] is None and missed["snippet"] == "Linz 4020, rent EUR 480, deposit EUR ⟦900⟧."
    assert csv_rows(found)[1] == ("deposit", "invented", "b", "", "5", "", "")  # 5 is not in b's text


def test_snippet_marks_the_value_and_folds_whitespace():
    text = "x" * 100 + "  the\nvalue  " + "y" * 100
    start = text.index("value")
    assert snippet(text, (start, start + 5), chars=8) == "…xx the ⟦value⟧ yyyyyy…"
