"""`extract tune`: a grid of lever settings, one engine, each scored against gold.

Its subject is the search, the scores and what tune writes, not the engine's outputs: it runs on the simulated
engine (`model.path: simulated`, through the same factory as an actor's engine), which answers each document with a
record made from its text, so settings that decode other requests score differently."""

from __future__ import annotations

import json

import pytest
import yaml

from tests.conftest import ROOT, run_main, write_config


def _chosen(snippet: dict) -> dict:
    """The settings tune.yaml gives, with the job's own where it changes nothing."""
    model, policy = snippet.get("model") or {}, snippet.get("schema_policy") or {}
    return {"schema_policy.grounding": policy.get("grounding", "auto"),
            "model.sampling.presence_penalty": (model.get("sampling") or {}).get("presence_penalty", 0.0),
            "input.window_tokens": (snippet.get("input") or {}).get("window_tokens", "auto")}


@pytest.mark.slow
def test_tune_scores_each_setting_once_on_one_engine_and_writes_the_best_as_yaml(tmp_path):
    """`extract tune` in this process (`run_main`): it starts no Ray, and its one engine (here the simulated one)
    and its grammar checks are the same in a CLI process."""
    config = write_config(tmp_path, simulated={"answers": "valid"}, **{"model.max_tokens": 160})
    out = tmp_path / "tune"
    result = run_main(["tune", str(config), "--gold", str(ROOT / "jobs/sample/invoices_gold.jsonl"), "--limit", "3",
                      "--out", str(out), "--lever", "schema_policy.grounding=marked,off",
                      "--lever", "model.sampling.presence_penalty=1.0,0",
                      "--lever", "input.window_tokens=auto,64,512"], env={"RAY_ADDRESS": None})
    assert result.returncode == 0, result.stderr[-3000:]
    assert "3 documents with gold; starting one engine" in result.stdout
    report = json.loads((out / "tune.json").read_text())
    trials = report["trials"]
    # the job's own (grounding auto, which `marked` equals here), off; the best grounding with the other penalty;
    # windows of 64 tokens; 512 is longer than every document: not run, as auto
    assert len(trials) == 4 and len({t["output_hash"] for t in trials}) == 4, trials
    assert [t["setting"]["input.window_tokens"] for t in trials] == ["auto", "auto", "auto", 64], trials
    assert "not run: no document is longer than 512 tokens" in result.stdout
    assert all(t["f1"] is not None and t["docs_per_s"] for t in trials), trials
    assert report["engine_starts"] == 1
    best = report["best"]
    assert best["f1"] == max(t["f1"] for t in trials)
    snippet = yaml.safe_load((out / "tune.yaml").read_text()) or {}
    assert _chosen(snippet) == best["setting"], (snippet, best)
    assert "| setting | F1 |" in result.stdout and (out / "tune.md").exists()
    # reach per field before the engine starts, per-field F1 per setting, and each trial against the best before it
    assert report["reach"]["overall"]["gold"] > 0
    assert "| field | gold values | allowed by the grammar |" in result.stdout
    assert all(t["fields"] and "total" in t["fields"] for t in trials), trials
    assert all(t["versus_best_before"] is not None for t in trials[1:]), trials
    assert "Per-field F1, by setting" in result.stdout and "95% bootstrap interval" in result.stdout
    assert not (tmp_path / "out").exists()  # nothing written to the job's output
