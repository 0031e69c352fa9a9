"""The bench arm `naive` (pipeline.tools.bench_naive): its engine arguments, its scoring, its ratios, and the
report's columns. The arm's engine run is `extract bench --naive` (not in the quick bench: one more engine)."""

from __future__ import annotations

import json

import pytest

from pipeline.tools.bench import ratios
from pipeline.tools.bench_naive import LEVERS, naive_engine_arguments, naive_ratios
from pipeline.tools.bench_report import COLUMNS, render_markdown
from pipeline.tools.bench_scoring import leaf_fields, leaf_scores
from pipeline.tools.synthetic import contract_record, make_corpus
from workers.engine import engine_arguments
from workers.memory import GIB, KvShape

SMOL = KvShape(layers=30, kv_heads=3, head_dim=64, dtype_bytes=2)


@pytest.fixture
def model(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"num_hidden_layers": 30, "num_attention_heads": 9,
                                                      "num_key_value_heads": 3, "head_dim": 64,
                                                      "torch_dtype": "bfloat16"}))
    return str(tmp_path)


JOB = {"enforce_eager": True, "speculative_config": {"method": "ngram", "num_speculative_tokens": 8},
       "structured_outputs_config": {"disable_any_whitespace": True}, "max_num_seqs": 4,
       "max_num_batched_tokens": 512, "enable_prefix_caching": False}


def test_naive_engine_has_vllm_defaults_for_the_levers_and_keeps_the_jobs_other_kwargs(model):
    args = naive_engine_arguments(model, 4096, JOB, sequences=16, accelerator=False, free=64 * GIB)
    assert not set(LEVERS) & set(args)  # vLLM's own defaults: speculation off, whitespace allowed, its batching
    assert args["enforce_eager"] is True and args["model"] == model and args["max_model_len"] == 4096
    assert set(args) == {"model", "max_model_len", "enforce_eager", "kv_cache_memory_bytes"}
    # The pipeline's engine sets each lever the naive engine leaves out.
    ours = engine_arguments(model, 4096, 1, {}, accelerator=False, sequences=16, free_memory=64 * GIB)
    assert ours["speculative_config"] and ours["structured_outputs_config"]["disable_any_whitespace"]


def test_naive_kv_cache_is_a_byte_budget_like_the_engine_arms_never_a_share(model, monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "4")  # the engine arm's default max_num_seqs (32) caps nothing here
    args = naive_engine_arguments(model, 4096, {}, sequences=16, accelerator=False, free=64 * GIB)
    engine_arm = engine_arguments(model, 4096, 1, {}, accelerator=False, sequences=16, free_memory=64 * GIB)
    assert args["kv_cache_memory_bytes"] == engine_arm["kv_cache_memory_bytes"]
    assert args["kv_cache_memory_bytes"] >= SMOL.bytes_per_token * 4096  # at least one full context
    assert "gpu_memory_utilization" not in args
    # A job's (or a test's) own budget wins, as it does for every other engine; the job's max_num_seqs, a lever,
    # does not cap the naive budget.
    fixed = naive_engine_arguments(model, 4096, {"kv_cache_memory_bytes": 123 * 2**20, "max_num_seqs": 2}, 16,
                                   accelerator=False, free=64 * GIB)
    assert fixed["kv_cache_memory_bytes"] == 123 * 2**20 and "max_num_seqs" not in fixed
    capped = naive_engine_arguments(model, 4096, {"max_num_seqs": 2}, 16, accelerator=False, free=64 * GIB)
    assert capped["kv_cache_memory_bytes"] == args["kv_cache_memory_bytes"]


def test_on_an_accelerator_the_naive_engine_takes_vllms_own_memory_share(model):
    args = naive_engine_arguments(model, 4096, {"enforce_eager": True}, 16, accelerator=True)
    assert args == {"model": model, "max_model_len": 4096, "enforce_eager": True}


def test_correct_leaves_are_the_scorers_and_per_second_of_the_arms_seconds():
    _, _, golds = make_corpus(3, 7)
    perfect = [{k: v for k, v in contract_record(g).items() if k != "doc_id"} for g in golds]
    total = leaf_scores(perfect, golds).gold
    assert total > 0 and leaf_scores(perfect, golds).correct == total
    wrong_total = {**perfect[1], "total": golds[1]["total"] + 1}
    fields = leaf_fields([perfect[0], wrong_total, None], golds, seconds=2.0)
    own = leaf_scores([perfect[0], None, None], golds).correct  # the first document's leaves alone
    assert own < fields["correct_leaves"] < total  # the second document: all its leaves but one
    assert fields["correct_leaves"] == own + leaf_scores([None, perfect[1], None], golds).correct - 1
    assert fields["correct_leaves_per_s"] == round(fields["correct_leaves"] / 2.0, 3)
    assert fields["field_accuracy"] == round(fields["correct_leaves"] / total, 4)
    assert leaf_fields([None] * 3, golds, 0.0) == {"field_accuracy": 0.0, "correct_leaves": 0,
                                                   "correct_leaves_per_s": None}


def test_pipeline_over_naive_in_docs_and_in_correct_leaves():
    arms = {"pipeline": {"docs_per_s": 2.6, "correct_leaves_per_s": 100.0},
            "naive": {"docs_per_s": 2.0, "correct_leaves_per_s": 8.0}}
    assert naive_ratios(arms) == {"pipeline_over_naive": 1.3, "pipeline_over_naive_correct_leaves": 12.5}
    assert naive_ratios({"pipeline": arms["pipeline"]}) == {"pipeline_over_naive": None,
                                                            "pipeline_over_naive_correct_leaves": None}
    assert naive_ratios({**arms, "naive": {"docs_per_s": 2.0, "correct_leaves_per_s": 0.0}})[
        "pipeline_over_naive_correct_leaves"] is None  # no correct leaf: no finite ratio


def _report(naive: bool) -> dict:
    arm = {"docs_per_s": 2.0, "output_tokens_per_s": 100.0, "correct_leaves": 40, "correct_leaves_per_s": 10.0}
    arms = {"engine": dict(arm), "retry": dict(arm), "pipeline": {**arm, "docs_per_s": 3.0,
                                                                   "correct_leaves_per_s": 120.0}}
    if naive:
        arms["naive"] = dict(arm)
    price = {"rounds": 1, "constrained_decode_ms_per_token": 2.0, "equal_length_unconstrained_decode_ms_per_token":
             2.0, "constrained_s": [1.0], "equal_length_unconstrained_s": [1.0]}
    return {"docs": 2, "model": "m", "arms": arms, "constraint_price": price, "ratios": ratios(arms, price)}


def test_the_report_shows_the_naive_ratios_and_the_correct_leaves_columns():
    with_naive, without = _report(True), _report(False)
    assert with_naive["ratios"]["pipeline_over_naive"] == 1.5
    assert with_naive["ratios"]["pipeline_over_naive_correct_leaves"] == 12.0
    assert without["ratios"]["pipeline_over_naive"] is None  # the quick bench: no naive arm, the keys still there
    markdown = render_markdown(with_naive)
    assert "| pipeline_over_naive | 1.5 | >= 1.3" in markdown
    assert "| pipeline_over_naive_correct_leaves | 12.0 | >= 10" in markdown
    header = markdown.splitlines()[2]
    assert "| correct leaves | correct leaves/s |" in header and ("correct leaves/s", "correct_leaves_per_s") in COLUMNS
    assert "| naive |" in markdown and "| naive |" not in render_markdown(without)
