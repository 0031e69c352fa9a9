"""`extract conformance`: the aggregation logic on hand-made records, and one quick slice of the real
harness (2 benchmark subsets x 3 schemas with generation on the bundled model, 3 test-suite categories)."""

from __future__ import annotations

import json

import pytest

from pipeline.tools import conformance as c
from tests.conftest import run_main
from tests.fixtures.corpora import PRESENT, ROOTS, SHARED, TINY
from tests.unit.test_conformance import user_folder

# -- pure logic ----------------------------------------------------------------------------------------

@pytest.mark.engine
def test_the_cli_checks_a_users_folder(tmp_path):
    out = tmp_path / "report"
    done = run_main(["conformance", user_folder(tmp_path), "--no-generate", "--out", out])  # in this process
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads((out / "conformance.json").read_text())
    assert "receipts v2" in json.dumps(report)


# -- the quick slice, on the real engine ----------------------------------------------------------------

SUBSETS = ("Github_trivial", "Glaiveai2K")
CATEGORIES = ("minLength", "enum", "required")
LIMIT = 3


# The slice on the real engine runs once, on the external corpora when they are present and on the tiny ones
# (tests/fixtures/corpora) when not: each run is an engine start and a generation per schema, and the harness is
# the same code on either root (loading both roots is tested below, and in tests/unit/test_conformance.py).
QUICK_ROOT = pytest.param(SHARED, id="shared") if PRESENT else pytest.param(TINY, id="tiny")


@pytest.fixture(scope="module", params=[QUICK_ROOT])
def quick_run(request, tmp_path_factory):
    """The quick slice, `extract conformance` in this process (`run_main`): its compile child and each backend's
    engine are child processes of their own either way, so only a CLI process's start is left out."""
    root = request.param
    out = tmp_path_factory.mktemp("conformance")
    args = ["conformance", c.BENCH, c.SUITE, "--limit", str(LIMIT), "--max-tokens", "128", "--out", str(out),
            "--corpora-root", str(root)]  # in-process, the root is named on the command line (as below)
    for subset in SUBSETS:
        args += ["--subset", subset]
    for category in CATEGORIES:
        args += ["--category", category]
    result = run_main(args, env={"RAY_ADDRESS": None})
    return root, out, result


def _corpus_instances(root, subset: str) -> int:
    ids = {i.id for i in c.load_bench(root, [subset], LIMIT)}
    with open(root / c.BENCH / "instances.jsonl") as handle:
        rows = [json.loads(line) for line in handle]
    return sum(len(r["tests"]) for r in rows if r["subset"] == subset and r["id"] in ids)


@pytest.mark.engine
def test_quick_slice_writes_a_consistent_report(quick_run):
    root, out, result = quick_run
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads((out / "conformance.json").read_text())
    bench = report[c.BENCH]
    assert set(bench["subsets"]) == set(SUBSETS) and bench["all"]["schemas"] == LIMIT * len(SUBSETS)
    for subset, s in bench["subsets"].items():
        assert s["schemas"] == LIMIT and sum(s["statuses"].values()) == LIMIT
        assert "skipped" not in s["statuses"]
        assert s["generated"] == sum(s["statuses"].get(k, 0) for k in c.GENERATED)
        mine = [i for i in bench["items"] if i["subset"] == subset]
        assert s["compiled"]["fallback"] == sum(
            (i["compile"]["xgrammar"]["ok"] or i["compile"]["guidance"]["ok"]) and i["limit_error"] is None
            for i in mine)
        assert s["instances"]["n"] == _corpus_instances(root, subset)
        assert s["emitted"] <= s["statuses"].get("valid", 0)
        for backend in c.BACKENDS:
            assert 0 <= s["compiled"][backend] <= LIMIT
    overall = bench["all"]
    assert overall["emitted"] >= 1, "the quick slice should emit at least one row to re-validate"
    assert overall["emitted_valid_share"] == 1.0
    for i in bench["items"]:
        status = i["generation"]["status"]
        if i["backend"] is None:
            assert status in ("not_compiled", "schema_invalid")
        else:  # the fallback takes xgrammar whenever it compiles, and generates under the backend it took
            assert i["compile"][i["backend"]]["ok"]
            assert i["backend"] == ("xgrammar" if i["compile"]["xgrammar"]["ok"] else "guidance")
            assert status in (*c.GENERATED, "not_attempted", "schema_invalid")
        if i["generation"]["emitted"]:
            assert i["generation"]["revalidated_valid"] is True and status == "valid"

    suite = report[c.SUITE]
    assert [cat["category"] for cat in suite["categories"]] == sorted(CATEGORIES)
    folder = root / c.SUITE / "tests" / c.SUITE_DRAFT
    for cat in suite["categories"]:
        cases = json.loads((folder / f"{cat['category']}.json").read_text())
        assert cat["cases"] == len(cases) and cat["instances"] == sum(len(x["tests"]) for x in cases)
        assert cat["agreement"]["n"] == cat["instances"]
        assert cat["engine"] in ("enforced", "partly", "not enforced", "does not compile", "n/a")
        assert cat["post_check"] == "enforced", cat  # our validator refuses every invalid instance here

    markdown = (out / "conformance.md").read_text()
    for subset in SUBSETS:
        assert f"| {subset} | {LIMIT} |" in markdown
    assert "| minLength |" in markdown and "emitted valid" in markdown


@pytest.mark.parametrize("root", ROOTS)
def test_unknown_subset_fails_in_one_line_before_anything_starts(tmp_path, root):
    # in-process, the corpora's root is named on the command line (EXTRACT_CORPORA is read at import)
    result = run_main(["conformance", c.BENCH, "--subset", "Github_nope", "--out", tmp_path,
                       "--corpora-root", str(root)])
    assert result.returncode == 2
    assert result.stderr.strip().splitlines()[-1].startswith("error: --subset 'Github_nope'")
    assert not (tmp_path / "conformance.json").exists()

