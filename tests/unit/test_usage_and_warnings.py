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


# -- issue 57: the end of a run reads its rows a batch at a time -----------------------------------------------------


def _reference_warnings(rows: pa.Table, share: float = 0.9) -> list[str]:
    """The rule as it was, over every row in Python objects at once: what the batched `field_warnings` must match."""
    import json
    from collections import Counter

    def key(value):
        return json.dumps(value, sort_keys=True, default=str, ensure_ascii=False)

    out = []
    n = rows.num_rows
    if n < 3:
        return out
    for name in rows.column_names[1:]:
        if name.startswith("_"):
            continue
        values = rows.column(name).to_pylist()
        nulls = sum(v is None or v == [] for v in values)
        if nulls / n > share:
            out.append(f"{name} is null in {nulls} of {n} rows ({100 * nulls / n:.0f}%)")
            continue
        top, count = Counter(key(v) for v in values if v is not None).most_common(1)[0]
        if count / n > share:
            out.append(f"{name} holds the same value {top[:60]} in {count} of {n} rows ({100 * count / n:.0f}%)")
    return out


def test_batched_field_warnings_match_the_whole_table_rule_over_many_batches():
    import random

    from pipeline import field_warnings as module

    rng = random.Random(57)
    common = {"s": "EUR", "i": 7, "f": 2.5, "b": True, "list": ["a"], "struct": {"a": 1}}
    flagged = 0
    for _ in range(40):
        n = rng.choice([3, 12, 100, 100, 2 * module.BATCH_ROWS + 5])

        def column(kind: str, n: int = n) -> list:
            p_null, p_top = rng.choice([0, 0.05, 0.5, 0.95, 1.0]), rng.choice([0, 0.5, 0.92, 0.97, 1.0])
            other = {"s": lambda: f"x{rng.randrange(50)}", "i": lambda: rng.randrange(50), "f": rng.random,
                     "b": lambda: rng.random() < 0.5, "list": lambda: [str(rng.randrange(3))],
                     "struct": lambda: {"a": rng.randrange(5)}}[kind]
            return [(None if kind != "list" or rng.random() < 0.5 else []) if rng.random() < p_null else
                    common[kind] if rng.random() < p_top else other() for _ in range(n)]

        rows = pa.table({"id": [str(i) for i in range(n)], **{k: column(k) for k in common}, "_run_id": ["r"] * n})
        expected = _reference_warnings(rows)
        flagged += len(expected)
        assert field_warnings(rows) == expected
    assert flagged > 30  # the draws flag fields, null and constant, not only pass them


def test_run_field_warnings_read_at_most_a_batch_at_a_time():
    from pipeline import field_warnings as module

    seen = []
    tallies = module._Tallies(["id", "city"])

    def batches():
        for start in range(0, 50_000, module.BATCH_ROWS):
            batch = pa.record_batch({"id": [str(i) for i in range(start, min(start + module.BATCH_ROWS, 50_000))],
                                     "city": ["Graz"] * (min(start + module.BATCH_ROWS, 50_000) - start)})
            seen.append(batch.num_rows)
            yield batch

    assert tallies.warnings(batches) == ['city holds the same value "Graz" in 50000 of 50000 rows (100%)']
    assert max(seen) == module.BATCH_ROWS and sum(seen) == 2 * 50_000  # two passes, never the whole table


def test_token_figures_from_histograms_are_those_of_the_lists():
    import random
    from collections import Counter

    rng = random.Random(3)
    for _ in range(200):
        prompt = [rng.randrange(0, 40) for _ in range(rng.randrange(0, 60))]
        output = [rng.randrange(0, 9) for _ in range(rng.randrange(0, 60))]
        assert token_figures(Counter(prompt), Counter(output), 2.0) == token_figures(prompt, output, 2.0)
        for q in (0, 1, 50, 99, 100):
            ordered = sorted(prompt)
            assert percentile(Counter(prompt), q) == (int(ordered[max(0, -(-q * len(ordered) // 100) - 1)])
                                                      if ordered else None)
