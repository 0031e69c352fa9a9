"""`extract report`: pure logic (error grouping, time binning, token budget, run choice), reading a
hand-written output (old-format rows, a rewritten partition), and the whole path on a real run of the
sample job, with the HTML rendered by headless Chromium and the screenshot checked for charts."""

from __future__ import annotations

import json
import subprocess
from datetime import datetime, timezone
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipeline.tools.report import (
    ROW,
    RecordOutcome,
    ReportError,
    bin_times,
    bin_width,
    dead_samples,
    error_messages,
    field_errors,
    field_profiles,
    format_loc,
    group_errors,
    list_runs,
    load_run,
    normalise_message,
    pick_run,
    sample_rows,
    token_budget,
    truncate,
)

CHROMIUM = Path("/usr/bin/chromium")


# ---------------------------------------------------------------- error grouping


def semantic(*errors: tuple[list, str]) -> str:
    return json.dumps({"message": errors[0][1], "errors": [{"loc": loc, "msg": msg, "type": "value_error"}
                                                           for loc, msg in errors]})


def test_normalise_message_replaces_per_document_values_only():
    assert normalise_message("Value error, total 12.0 does not appear in the document") == \
        "total <n> does not appear in the document"
    assert normalise_message("Value error, due_date 0450-04-04 is before issue_date 4040-04-04") == \
        "due_date <date> is before issue_date <date>"
    assert normalise_message("prompt of 6207 tokens + max_tokens 512 exceeds max_model_len 4096") == \
        "prompt of <n> tokens + max_tokens <n> exceeds max_model_len <n>"
    # Identifiers that contain digits are the same in every message and stay as they are.
    assert normalise_message("invoice ACM-2026-8077 unknown; object at 0x7f3a2b") == \
        "invoice ACM-2026-8077 unknown; object at <hex>"
    assert normalise_message("String  should have\nat most 40 characters") == \
        "String should have at most <n> characters"


def test_format_loc_hides_list_positions():
    assert format_loc(["items", 3, "name"]) == "items[*].name"
    assert format_loc([]) == ""


def test_error_messages_prefix_field_paths_and_survive_odd_errors():
    assert error_messages(semantic((["total"], "Value error, total 1.0 does not appear"))) == \
        [("total: total <n> does not appear", "Value error, total 1.0 does not appear")]
    assert error_messages(json.dumps({"message": "output hit the token limit after 512 tokens"})) == \
        [("output hit the token limit after <n> tokens", "output hit the token limit after 512 tokens")]
    assert error_messages("not json 42") == [("not json <n>", "not json 42")]
    assert error_messages(None) == [("(no error recorded)", "")]


def test_group_errors_counts_documents_once_per_message_with_examples():
    dead = [
        ("d1", "semantic_invalid", semantic((["total"], "Value error, total 12.0 does not appear"))),
        ("d2", "semantic_invalid", semantic((["total"], "Value error, total 99.5 does not appear"),
                                            (["invoice_number"], "Value error, invoice_number does not appear"))),
        ("d3", "semantic_invalid", semantic((["total"], "Value error, total 1.0 does not appear"),
                                            (["total"], "Value error, total 2.0 does not appear"))),
        ("d4", "semantic_invalid", semantic((["total"], "Value error, total 7 does not appear"))),
        ("t1", "truncated", json.dumps({"message": "output hit the token limit after 512 tokens"})),
    ]
    groups = group_errors(dead, top=5, examples=2)
    assert list(groups) == ["truncated", "semantic_invalid"]  # reasons in their fixed order
    top = groups["semantic_invalid"]
    assert [(g.pattern, g.documents) for g in top] == [("total: total <n> does not appear", 4),
                                                       ("invoice_number: invoice_number does not appear", 1)]
    assert top[0].examples == ["d1", "d2"]  # capped, first seen first
    assert top[0].sample == "Value error, total 12.0 does not appear"  # values intact in the sample
    assert group_errors(dead, top=1)["semantic_invalid"][0].documents == 4


def test_field_errors_count_documents_per_field_path_with_their_messages():
    dead = [
        ("d1", "semantic_invalid", semantic((["total"], "Value error, total 12.0 does not appear"))),
        ("d2", "semantic_invalid", semantic((["total"], "Value error, total 9.5 does not appear"),
                                            (["items", 3, "name"], "String should have at most 40 characters"),
                                            (["items", 4, "name"], "String should have at most 40 characters"))),
        ("d3", "schema_violation", semantic((["items", 0, "name"], "Field required"))),
        ("t1", "truncated", json.dumps({"message": "output hit the token limit after 512 tokens"})),
    ]
    fields = field_errors(dead)
    assert [(f.path, f.documents) for f in fields] == [("items[*].name", 2), ("total", 2)]
    items = fields[0]
    assert items.reasons == {"semantic_invalid": 1, "schema_violation": 1}
    # d2's two list positions are one document, but each error is one message
    assert items.messages == [("String should have at most <n> characters", 2), ("Field required", 1)]
    assert fields[1].examples == ["d1", "d2"]


def test_dead_samples_keep_raw_output_per_reason_truncated_with_a_marker():
    long = "{" + "x" * 2000
    outcomes = [RecordOutcome("a", "truncated", None, 1, 512, json.dumps({"message": "cut"}), raw_output=long),
                RecordOutcome("b", "truncated", None, 1, 512, None, raw_output="<script>alert(1)</script>"),
                RecordOutcome("c", ROW, None, 1, 10),
                RecordOutcome("d", "empty_input", None, None, None, json.dumps({"message": "no text"}))]
    samples = dead_samples(outcomes, per_reason=5)
    assert list(samples) == ["truncated", "empty_input"]
    first = samples["truncated"][0]
    assert first.raw_output.startswith("{xxx") and first.raw_output.endswith("[truncated: 1401 more characters]")
    assert samples["truncated"][1].message == "(no error recorded)"
    assert samples["empty_input"][0].raw_output == "" and samples["empty_input"][0].message == "no text"
    assert truncate("short") == "short" and truncate(None) == ""


def test_field_profiles_give_null_rates_top_values_and_ranges():
    from datetime import date

    table = pa.table({
        "doc_id": ["a", "b", "c", "d"],
        "currency": ["USD", "USD", "EUR", None],
        "total": [10.0, 30.0, 20.0, 40.0],
        "issue_date": [date(2026, 1, 2), None, None, date(2026, 3, 1)],
        "items": [["x"], ["x", "y"], [], None],
        "_run_id": ["r"] * 4,
    })
    profiles = {p.name: p for p in field_profiles(table)}
    assert set(profiles) == {"currency", "total", "issue_date", "items"}  # no id, no lineage
    assert profiles["currency"].null_rate == 0.25 and profiles["currency"].summary.startswith("USD ×2 · EUR ×1")
    assert profiles["total"].summary == "min 10.0 · median 30.0 · max 40.0"
    assert profiles["issue_date"].nulls == 2 and "min 2026-01-02" in profiles["issue_date"].summary
    assert profiles["items"].summary == "length min 0 · median 1 · max 2"
    names, rows = sample_rows(table, 2)
    assert names == ["doc_id", "currency", "total", "issue_date", "items"] and rows[0][4] == '["x"]'
    assert rows[1][3] == "null"


# ---------------------------------------------------------------- time binning


def test_bin_width_picks_the_smallest_round_width_within_the_target():
    assert bin_width(20, target_bins=30) == 1
    assert bin_width(59, target_bins=30) == 2
    assert bin_width(3600, target_bins=30) == 120
    assert bin_width(8 * 3600, target_bins=30) == 1800
    assert bin_width(90 * 86400, target_bins=30) == 3 * 86400


def test_bin_times_aligns_bins_and_counts_each_category():
    bins = bin_times({"row": [0.5, 1.2, 9.9, 10.0], "dead letters": [3.0, 59.0]}, target_bins=30)
    assert bins.width_s == 2
    assert bins.starts[0] == 0 and bins.starts[-1] == 58 and len(bins.starts) == 30
    assert bins.counts["row"][0] == 2 and bins.counts["row"][4] == 1 and bins.counts["row"][5] == 1
    assert bins.counts["dead letters"][1] == 1 and bins.counts["dead letters"][29] == 1
    assert sum(bins.counts["row"]) == 4 and sum(bins.counts["dead letters"]) == 2


def test_bin_times_handles_times_before_the_start_and_empty_input():
    bins = bin_times({"row": [-3.5, 0.0, 2.0]}, target_bins=30)
    assert bins.width_s == 1 and bins.starts[0] == -4 and sum(bins.counts["row"]) == 3
    assert bin_times({"row": []}).starts == []
    single = bin_times({"row": [42.0, 42.0]})
    assert single.starts == [42] and single.counts["row"] == [2]


# ---------------------------------------------------------------- token budget and run choice


def outcome(kind: str, output_tokens: int | None = None, error: dict | None = None) -> RecordOutcome:
    return RecordOutcome("d", kind, None, 100, output_tokens, json.dumps(error) if error else None)


def test_token_budget_prefers_the_record_then_the_error_then_truncation():
    too_long = outcome("input_too_long", error={"message": "x", "max_tokens": 256, "max_model_len": 2048})
    assert token_budget({"max_tokens": 300}, [too_long]).max_tokens == 300
    budget = token_budget({}, [too_long, outcome("truncated", 200)])
    assert (budget.max_tokens, budget.max_model_len) == (256, 2048)
    assert token_budget({}, [outcome(ROW, 90), outcome("truncated", 200)]).max_tokens == 200
    observed = token_budget({}, [outcome(ROW, 90), outcome("semantic_invalid", 120)])
    assert observed.max_tokens == 120 and "unknown" in observed.source
    assert token_budget({}, []).max_tokens is None


def test_pick_run_defaults_to_the_newest_run_that_did_work():
    records = [{"run_id": "job-a", "started_at": "2026-11-01T00:00:00", "input_rows": 5},
               {"run_id": "job-b", "started_at": "2026-11-02T00:00:00", "input_rows": 7},
               {"run_id": "job-c", "started_at": "2026-11-03T00:00:00", "input_rows": 0,
                "partitions": [{"status": "skipped"}]}]
    chosen, note = pick_run(records, None, "/o")
    assert chosen["run_id"] == "job-b" and "job-c processed no documents" in note
    assert pick_run(records, "job-a", "/o")[0]["run_id"] == "job-a"
    assert pick_run(records, "job-c", "/o")[0]["run_id"] == "job-c"
    with pytest.raises(ReportError, match="ambiguous"):
        pick_run(records, "job-", "/o")
    with pytest.raises(ReportError, match="'nope' not found under /o/_runs"):
        pick_run(records, "nope", "/o")
    with pytest.raises(ReportError, match="no run records under /o/_runs"):
        pick_run([], None, "/o")


# ---------------------------------------------------------------- reading an output (real Parquet, no engine)


def _write_partition(root: Path, label: str, run_id: str, rows: pa.Table, dead: pa.Table) -> None:
    key = "" if label == "all" else f"dt={label}"
    files = {}
    for kind, table in (("rows", rows), ("dead_letters", dead)):
        path = root / kind / key / "part-0.parquet"
        path.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(table, path)
        files[kind] = str(path).replace(str(root), "/somewhere/else/out")  # the run wrote elsewhere
    meta = root / "_partitions" / (key or "all")
    meta.mkdir(parents=True)
    (meta / "manifest.json").write_text(json.dumps({"partition": label, "run_id": run_id, "files": files}))
    (meta / "_SUCCESS").write_text("")


def write_output(tmp_path: Path) -> Path:
    """Two days written by run r1; day 2 then rewritten by run r2. Rows in the old format (no token
    columns), and manifests naming the folder the runs wrote to, not where the output is now."""
    at = pa.array([datetime(2026, 11, 1, 3, 0, 5, tzinfo=timezone.utc)] * 2, pa.timestamp("us", tz="UTC"))
    old_rows = pa.table({"ticket": ["a", "b"], "_run_id": ["r1", "r1"], "_extracted_at": at})  # no token columns
    dead = pa.table({"ticket": ["c", "d"], "reason": ["truncated", "semantic_invalid"],
                     "error": ['{"message": "output hit the token limit after 64 tokens"}', None],
                     "raw_output": ['{"ticket": "<b>bold</b>', None],
                     "prompt_tokens": [50, 60], "output_tokens": [64, 30], "run_id": ["r1", "r2"],
                     "failed_at": at})
    _write_partition(tmp_path, "2026-11-01", "r1", old_rows, dead.slice(0, 1))
    _write_partition(tmp_path, "2026-11-02", "r2", old_rows.slice(0, 1), dead.slice(1, 1))  # rewritten by r2
    runs = tmp_path / "_runs"
    runs.mkdir()
    for run_id, day in (("r1", 1), ("r2", 2)):
        (runs / f"{run_id}.json").write_text(json.dumps({
            "run_id": run_id, "name": "tickets", "config_path": "extract.yaml", "config_hash": "h",
            "status": "committed", "started_at": f"2026-11-0{day}T03:00:00+00:00", "input_rows": 3,
            "output_uri": "/somewhere/else/out", "rows": 2, "dead_letters_by_reason": {"truncated": 1},
            "partitions": [{"partition": "2026-11-01", "status": "committed"},
                           {"partition": "2026-11-02", "status": "committed"}] if run_id == "r1" else
                          [{"partition": "2026-11-02", "status": "committed"}]}))
    return tmp_path


def check_r1(data) -> None:
    got = sorted((o.doc_id, o.outcome) for o in data.outcomes)
    # Day 1 is r1's commit: everything. Day 2 was rewritten by r2: only records still carrying r1's id.
    assert got == [("a", ROW), ("a", ROW), ("b", ROW), ("c", "truncated")]
    assert any("since rewritten by r2" in n for n in data.notes)
    assert any("no token counts" in n for n in data.notes)
    assert not data.rows_have_tokens


def test_load_run_reads_old_rows_relocated_files_and_rewritten_partitions(tmp_path):
    root = write_output(tmp_path)
    check_r1(load_run(str(root), "r1"))
    assert load_run(str(root)).run_id == "r2"  # the newest by default


def test_a_record_a_live_run_is_still_writing_is_left_out(tmp_path):
    from pipeline.storage import LocalStorage

    root = write_output(tmp_path)
    record = (root / "_runs" / "r2.json").read_text()
    (root / "_runs" / "r3.json").write_text(record.replace('"r2"', '"r3"')[: len(record) // 2])  # half written
    runs = list_runs(LocalStorage(), str(root))
    assert [r["run_id"] for r in runs] == ["r1", "r2"]
    written = json.loads((root / "_runs" / "r1.json").read_text())
    assert {k: runs[0][k] for k in written} == written  # each record as written (with RunManifest's defaults)
    assert load_run(str(root)).run_id == "r2"


# ---------------------------------------------------------------- the whole path, real engine and browser

# Sample invoices that give, with the bundled model, validator refusals (0000-0002), rows (0006, 0007) and
# a run-away output (0031, cut off at any budget); plus the empty scan and the too-long contract.
def chromium(args: list[str], profile: Path) -> subprocess.CompletedProcess:
    if not CHROMIUM.exists():
        pytest.fail(f"{CHROMIUM} is missing: run `bash infra/install-chromium.sh` (as root) to install Debian's "
                    "chromium for the report rendering check")
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             "--hide-scrollbars", "--force-device-scale-factor=1", f"--user-data-dir={profile}"]
    return subprocess.run([str(CHROMIUM), *flags, *args], capture_output=True, text=True, timeout=120)


