"""`extract conformance`: the aggregation logic on hand-made records, and one quick slice of the real
harness (2 benchmark subsets x 3 schemas with generation on the bundled model, 3 test-suite categories)."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from pipeline.tools import conformance as c
from tests.fixtures.corpora import ROOTS, TINY
from workers.engine import Generation

# -- pure logic ----------------------------------------------------------------------------------------

def test_percentile_is_nearest_rank():
    values = [float(v) for v in range(100, 0, -1)]
    assert c.nearest_rank(values, 0.5) == 50.0
    assert c.nearest_rank(values, 0.99) == 99.0
    assert c.nearest_rank([0.3], 0.99) == 0.3
    assert c.nearest_rank([], 0.5) is None


def test_verdict_from_rejected_invalid_instances():
    assert c.verdict(0, 0) == "n/a"
    assert c.verdict(4, 4) == "enforced"
    assert c.verdict(0, 4) == "not enforced"
    assert c.verdict(1, 4) == "partly"


def test_agreement_tally_counts_each_side_and_errors():
    tally = c.agreement_tally([(True, True), (True, False), (False, False), (False, None), (False, True)])
    assert tally == {"n": 5, "agree": 2, "valid_n": 2, "valid_agree": 1, "invalid_n": 3, "invalid_agree": 1,
                     "errors": 1, "share": 0.4}


def _item(subset: str, status: str, backend: str | None = "xgrammar", emitted: bool = False,
          revalidated: bool | None = None, xgr_ok: bool = True, guid_ok: bool = True, seconds: float = 0.1):
    generation = {"status": status, "emitted": emitted, "revalidated_valid": revalidated}
    if status in c.GENERATED:
        generation["backend"] = backend
    return {"subset": subset, "id": f"o{status}", "limit_error": None, "schema_invalid": None,
            "compile": {"xgrammar": {"ok": xgr_ok, "seconds": seconds, "error": None},
                        "guidance": {"ok": guid_ok, "seconds": seconds / 10, "error": None}},
            "backend": backend, "unenforced": [["not", "/not"]] if backend else [],
            "instances": c.agreement_tally([(True, True), (False, status == "valid")]),
            "instance_disagreements": [], "generation": generation}


def test_summarize_bench_counts_add_up():
    items = [
        _item("A", "valid", emitted=True, revalidated=True, seconds=0.2),
        _item("A", "schema_violation", seconds=0.4),
        _item("A", "truncated", backend="guidance", xgr_ok=False),
        _item("A", "not_compiled", backend=None, xgr_ok=False, guid_ok=False),
    ]
    s = c.summarize_bench(items)
    assert s["schemas"] == 4
    assert s["compiled"] == {"xgrammar": 2, "guidance": 3, "fallback": 3}
    assert s["coverage"] == {"xgrammar": 0.5, "guidance": 0.75, "fallback": 0.75}
    assert s["generated"] == 3 and sum(s["statuses"].values()) == 4
    assert s["compliance"] == round(1 / 3, 4)
    assert s["empirical_coverage"] == 0.25
    assert s["compliance_by_backend"]["xgrammar"] == {"generated": 2, "valid": 1, "compliance": 0.5}
    assert s["compliance_by_backend"]["guidance"] == {"generated": 1, "valid": 0, "compliance": 0.0}
    assert s["emitted"] == 1 and s["emitted_valid_share"] == 1.0
    assert s["compile_s"]["xgrammar"] == {"n": 2, "p50": 0.2, "p99": 0.4}
    assert s["instances"]["n"] == 8 and s["instances"]["agree"] == 7  # the "valid" item accepts its invalid one


def test_generation_sample_and_empirical_coverage_over_it():
    items = [c.BenchSchema(subset, f"o{n}", {}) for subset in ("A", "B") for n in range(3)]
    assert c.generation_sample(items, 2) == {"A/o0", "A/o1", "B/o0", "B/o1"}
    assert len(c.generation_sample(items, None)) == 6
    s = c.summarize_bench([_item("A", "valid", emitted=True, revalidated=True), _item("A", "truncated"),
                           _item("A", "skipped")])
    assert s["empirical_coverage"] == 0.5 and s["generated"] == 2


def test_an_emitted_row_that_fails_revalidation_shows_below_one():
    s = c.summarize_bench([_item("A", "valid", emitted=True, revalidated=True),
                           _item("A", "valid", emitted=True, revalidated=False)])
    assert s["emitted_valid_share"] == 0.5


def test_summarize_category_engine_and_post_check_verdicts():
    def case(compiled, tests):
        return {"description": "", "compiled": compiled, "compile_error": None,
                "tests": [{"description": "", "valid": v, "ours": o, "why": "", "grammar_accepts": g if compiled
                           else None} for v, o, g in tests]}

    partly = c.summarize_category("k", [case(True, [(True, True, True), (False, False, False),
                                                    (False, False, True)])])
    assert partly["engine"] == "partly" and partly["post_check"] == "enforced"
    assert partly["engine_invalid_rejected"] == 1 and partly["engine_valid_accepted"] == 1
    assert partly["agreement"]["share"] == 1.0
    none = c.summarize_category("k", [case(False, [(False, True, None)])])
    assert none["engine"] == "does not compile" and none["post_check"] == "not enforced"
    assert none["agreement"]["agree"] == 0


def test_build_report_merges_parts_of_two_runs():
    run1 = {"id": "r1", "started": "2026-01-01T00:00:00", "seconds": 10.0, "corpora": [c.BENCH], "stages": {},
            "options": {}}
    run2 = {**run1, "id": "r2", "started": "2026-01-01T01:00:00", "seconds": 5.0}
    parts = [{"corpus": c.BENCH, "subset": "A", "run": run1, "items": [_item("A", "valid", emitted=True,
                                                                             revalidated=True)]},
             {"corpus": c.BENCH, "subset": "B", "run": run2, "items": [_item("B", "truncated")]}]
    report = c.build_report(parts)
    assert report["wall_seconds"] == 15.0 and [r["id"] for r in report["runs"]] == ["r1", "r2"]
    bench = report[c.BENCH]
    assert set(bench["subsets"]) == {"A", "B"} and bench["all"]["schemas"] == 2
    assert bench["unenforced_keywords"] == {"not": 2}
    markdown = c.render_markdown(report)
    assert "| **all** | 2 |" in markdown and c.SUITE not in report


def _gen(text: str, finish: str = "stop") -> Generation:
    return Generation(text=text, finish_reason=finish, prompt_tokens=10, output_tokens=5)


@pytest.mark.parametrize(
    ("text", "finish", "status", "emitted"),
    [('{"name":"abcd"}', "stop", "valid", True),
     ('{"name":"ab"}', "stop", "schema_violation", False),
     ('{"name":"abcd"}', "length", "truncated", False),
     ('{"name":', "stop", "invalid_json", False)],
)
def test_judge_compliance_then_post_check(text, finish, status, emitted):
    schema = {"type": "object", "properties": {"name": {"type": "string", "minLength": 3}}, "required": ["name"]}
    from schemas.validation import full_validator

    item = c.BenchSchema("S", "o1", schema)
    result = c.judge(item, full_validator(schema), {"generation": _gen(text, finish), "backend": "xgrammar"})
    assert result["status"] == status and result["emitted"] is emitted
    assert result["revalidated_valid"] is (True if emitted else None)
    if status == "schema_violation":
        assert result["violations"][0]["keyword"] == "minLength" and result["violations"][0]["loc"] == "/name"


class _RefusingEngine:
    """An engine double: vLLM validates every request first, so one refused schema fails the whole call."""

    def __init__(self):
        self.calls = []

    def generate(self, prompts, schemas, max_tokens, temperature):
        from workers.engine import Generation

        self.calls.append(len(prompts))
        if any(s.get("bad") for s in schemas):
            raise ValueError("The provided JSON schema contains features not supported by xgrammar.")
        return [Generation(str(s["n"]), "stop", len(p), max_tokens) for p, s in zip(prompts, schemas, strict=True)]


def test_generate_batch_isolates_requests_vllm_refuses():
    engine = _RefusingEngine()
    jobs = [c.Job(f"k{i}", {"n": i, "bad": i == 1}, ["xgrammar"], prompt_ids=[i]) for i in range(3)]
    results = c.generate_batch(engine, jobs, max_tokens=7)
    assert isinstance(results[1], ValueError)
    assert [r.text for r in (results[0], results[2])] == ["0", "2"]
    assert results[0].output_tokens == 7
    # the whole batch, one probe per request, then the accepted ones together
    assert engine.calls == [3, 1, 1, 1, 2]


class _RefusingPerRequestEngine:
    """An engine double shaped as ours now are: a refused request comes back alone, finish_reason "refused"."""

    def __init__(self):
        self.calls = []

    def generate(self, prompts, schemas, max_tokens, temperature):
        from workers.engine import REFUSED, Generation

        self.calls.append(len(prompts))
        return [Generation("", REFUSED, len(p), 0, "features not supported by xgrammar") if s.get("bad")
                else Generation(str(s["n"]), "stop", len(p), max_tokens) for p, s in zip(prompts, schemas, strict=True)]


def test_a_request_refused_on_its_own_is_a_refusal_rerouted_to_the_next_backend():
    engine = _RefusingPerRequestEngine()
    jobs = [c.Job(f"k{i}", {"n": i, "bad": i == 1}, ["xgrammar", "guidance"], prompt_ids=[i]) for i in range(3)]
    results = c.generate_batch(engine, jobs, max_tokens=7)
    assert isinstance(results[1], Exception) and "not supported by xgrammar" in str(results[1])
    assert [r.text for r in (results[0], results[2])] == ["0", "2"]
    assert engine.calls == [3]  # one call: no probing needed when the engine refuses per request


class _CharTokenizer:
    def encode(self, text, add_special_tokens=False):
        return [ord(ch) for ch in text]

    def decode(self, ids):
        return "".join(chr(i) for i in ids)


def test_fit_prompt_cuts_a_long_schema_and_refuses_what_cannot_fit():
    tok = _CharTokenizer()
    engine = SimpleNamespace(tokenizer=tok, prompt_token_ids=lambda text: tok.encode(text))
    small = {"type": "object"}
    ids, capped = c.fit_prompt(engine, small, max_tokens=100, max_model_len=1000)
    assert not capped and tok.decode(ids).endswith(c.compact_json(small))
    large = {"type": "object", "description": "x" * 5000}
    ids, capped = c.fit_prompt(engine, large, max_tokens=100, max_model_len=1000)
    assert capped and len(ids) + 100 <= 1000 and tok.decode(ids).endswith(c.PROMPT_CAP_MARKER)
    assert c.fit_prompt(engine, large, max_tokens=950, max_model_len=1000) == (None, True)


@pytest.mark.parametrize("root", ROOTS)
def test_resolve_corpora(root):
    assert c.resolve_corpora(["all"]) == list(c.CORPORA)
    assert c.resolve_corpora([str(root / c.SUITE), c.SUITE]) == [c.SUITE]
    with pytest.raises(c.ConformanceError, match="nope"):
        c.resolve_corpora(["nope"])


def user_folder(tmp_path: Path) -> Path:
    """A user's own folder of schemas, under a name of its own, with instances (no subset column)."""
    folder = tmp_path / "receipts v2"
    folder.mkdir()
    (folder / "receipt.json").write_text(json.dumps({"type": "object", "properties": {"total": {"type": "number"}},
                                                     "required": ["total"]}))
    (folder / "tag.json").write_text(json.dumps({"type": "string", "enum": ["a", "b"]}))
    (folder / "instances.jsonl").write_text(json.dumps({"id": "tag", "tests": [
        {"description": "a", "valid": True, "data": "a"}, {"description": "c", "valid": False, "data": "c"}]}) + "\n")
    return folder


def test_any_folder_of_schemas_is_a_corpus_under_its_own_name_and_through_a_link(tmp_path):
    folder = user_folder(tmp_path)
    link = tmp_path / "my-link"
    link.symlink_to(folder)
    for given in (folder, link):
        assert c.resolve_corpora([str(given)]) == [c.BENCH]
        root = c.corpora_root_for([str(given)], TINY)
        items = c.load_bench(root, None, None)
        assert [(i.subset, i.id) for i in items] == [(given.name, "receipt"), (given.name, "tag")]
        assert [t["valid"] for t in c.load_instances(root)["*/tag"]] == [True, False]
        c.check_selection([c.BENCH], c.Options(corpora_root=root))


def test_a_folder_without_schemas_is_refused_in_one_line(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(c.ConformanceError, match="no \\*.json schemas"):
        c.resolve_corpora([str(tmp_path / "empty")])


@pytest.mark.parametrize("root", ROOTS)
def test_the_bundled_corpora_work_by_name_and_through_a_link_of_another_name(tmp_path, root):
    assert c.resolve_corpora([c.BENCH, c.SUITE]) == [c.BENCH, c.SUITE]
    assert c.corpora_root_for([c.BENCH], root) == root
    bench, suite = tmp_path / "bench-link", tmp_path / "suite-link"
    bench.symlink_to(root / c.BENCH)
    suite.symlink_to(root / c.SUITE)
    assert c.resolve_corpora([str(bench), str(suite)]) == [c.BENCH, c.SUITE]
    linked = c.corpora_root_for([str(bench), str(suite)], tmp_path / "nowhere")
    assert c.bench_subsets(linked) == c.bench_subsets(root)
    assert c.suite_categories(linked) == c.suite_categories(root)
    assert c.load_instances(linked) == c.load_instances(root) != {}
    assert c.load_suite(linked, ["minLength"]) == c.load_suite(root, ["minLength"])


@pytest.mark.parametrize("root", ROOTS)
def test_load_bench_takes_the_first_n_in_id_order_and_names_unknown_subsets(root):
    items = c.load_bench(root, ["Github_easy"], 3)
    every = sorted(p.stem for p in (root / c.BENCH / "schemas" / "Github_easy").glob("*.json"))
    assert len(every) > 3 and [i.id for i in items] == every[:3]
    with pytest.raises(c.ConformanceError, match="Github_nope"):
        c.check_selection([c.BENCH], c.Options(corpora_root=root, subsets=["Github_nope"]))


# -- the quick slice, on the real engine ----------------------------------------------------------------

