"""`extract tune` on a real engine: a grid of lever settings, one engine, each scored against gold."""

from __future__ import annotations

import json

import yaml

from tests.conftest import ROOT, run_cli, write_config


def test_tune_scores_each_setting_once_on_one_engine_and_writes_the_best_as_yaml(tmp_path, cli_env):
    config = write_config(tmp_path, **{"model.max_tokens": 160, "model.max_model_len": 2048})
    out = tmp_path / "tune"
    result = run_cli(["tune", str(config), "--gold", str(ROOT / "jobs/sample/invoices_gold.jsonl"), "--limit", "3",
                      "--out", str(out), "--lever", "schema_policy.grounding=marked,off",
                      "--lever", "model.sampling.presence_penalty=1.0,0"], cli_env)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "3 documents with gold; starting one engine" in result.stdout
    report = json.loads((out / "tune.json").read_text())
    trials = report["trials"]
    # marked, then off; then the better grounding with each penalty: three distinct settings, each run once
    assert len(trials) == 3 and len({t["output_hash"] for t in trials}) == 3, trials
    assert all(t["f1"] is not None and t["docs_per_s"] for t in trials), trials
    assert report["engine_starts"] == 1
    best = report["best"]
    assert best["f1"] == max(t["f1"] for t in trials)
    snippet = yaml.safe_load((out / "tune.yaml").read_text()) or {}
    chosen = {"schema_policy.grounding": (snippet.get("schema_policy") or {}).get("grounding", "auto"),
              "model.sampling.presence_penalty": ((snippet.get("model") or {}).get("sampling") or {}).get(
                  "presence_penalty", 1.0)}
    assert chosen == best["setting"], (snippet, best)
    assert "| setting | F1 |" in result.stdout and (out / "tune.md").exists()
    # reach per field before the engine starts, per-field F1 per setting, and each trial against the best before it
    assert report["reach"]["overall"]["gold"] > 0
    assert "| field | gold values | allowed by the grammar |" in result.stdout
    assert all(t["fields"] and "total" in t["fields"] for t in trials), trials
    assert all(t["versus_best_before"] is not None for t in trials[1:]), trials
    assert "Per-field F1, by setting" in result.stdout and "95% bootstrap interval" in result.stdout
    assert not (tmp_path / "out").exists()  # nothing written to the job's output
