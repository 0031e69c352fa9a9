"""The terminal: the known-noise filter, worker lines as the driver prints them, live counts, --fail-fast-after,
and the summary's hints (pure logic, no engine)."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest

from pipeline.output.manifest import RunManifest
from pipeline.progress import FailFast, FailFastError, Progress, documents_done, rate_text
from pipeline.summary import commands, in_ray_temp, render_summary
from workers import logs

# Lines a run printed before the terminal was made quiet (a real capture, prefixes as Ray printed them).
SEEN = [
    "(MainProcess pid=5914) WARNING 12-01 02:32:52 [cpu_worker.py:114] libtcmalloc is not found in LD_PRELOAD. "
    "For best performance, please follow the section `set LD_PRELOAD`",
    "(MainProcess pid=5914) WARNING 12-01 02:32:55 [cpu_worker.py:140] CPU backend doesn't allow to use "
    "`torch.set_num_threads` after the thread binding, skip it.",
    "/work/main/.venv/lib/python3.11/site-packages/vllm/triton_utils/dispatcher.py:138: FutureWarning: "
    "`torch.distributed.reduce_op` is deprecated, please use `torch.distributed.ReduceOp` instead",
    "[2026-12-01 02:32:33,169 E 5405 5405] core_worker.cc:2465: Actor with class name: 'MapWorker(MapBatches("
    "ExtractionActor))' and ID: '90ca' has constructor arguments in the object store and max_restarts > 0.",
    "2026-12-01 02:32:33,170\tWARNING __init__.py:28 -- Progress bars disabled. To enable, set "
    "`ray.data.DataContext.get_current().enable_progress_bars = True`.",
    "Loading safetensors checkpoint shards: 100% Completed | 1/1 [00:00<00:00,  7.12it/s]",
]
OURS = [
    "2026-12-01T02:32:55.711035Z [info     ] engine.ready                   mask_kernel=fast seconds=12.84",
    '{"event": "actor.warm", "level": "info", "timestamp": "2026-12-01T02:32:59Z"}',
    "2026-12-01T02:33:11.653179Z [error    ] extract.engine_error           error='RuntimeError()'",
]


def test_known_noise_is_dropped_and_our_lines_are_not():
    assert all(logs.is_noise(line) for line in SEEN)
    assert not any(logs.is_noise(line) for line in OURS)
    assert not logs.is_noise("Traceback (most recent call last):")


def test_worker_lines_lose_rays_prefix_and_become_json_in_json_mode(monkeypatch):
    data = {"pid": 5914, "is_err": True}
    monkeypatch.delenv("EXTRACT_LOG_FORMAT", raising=False)
    assert logs.worker_line(OURS[0], data) == OURS[0]
    assert logs.worker_line("something else", data) == "(pid=5914) something else"
    monkeypatch.setenv("EXTRACT_LOG_FORMAT", "json")
    assert logs.worker_line(OURS[1], data) == OURS[1]
    wrapped = json.loads(logs.worker_line("something else", data))
    assert wrapped["event"] == "worker.output" and wrapped["line"] == "something else" and wrapped["pid"] == 5914


def test_actor_env_is_quiet_unless_verbose(monkeypatch):
    monkeypatch.delenv("EXTRACT_VERBOSE", raising=False)
    assert logs.actor_quiet_env()["VLLM_LOGGING_LEVEL"] == "ERROR"
    monkeypatch.setenv("EXTRACT_VERBOSE", "1")
    assert logs.actor_quiet_env()["VLLM_LOGGING_LEVEL"] != "ERROR"
    assert "PYTHONWARNINGS" not in logs.actor_quiet_env()


def test_verbose_and_log_json_are_accepted_before_or_after_the_subcommand():
    from pipeline.cli.main import parser

    for argv in (["-v", "run", "x.yaml"], ["run", "x.yaml", "-v"], ["run", "x.yaml", "--verbose", "--log-json"]):
        assert parser().parse_args(argv).verbose is True
    assert parser().parse_args(["--log-json", "report", "out"]).log_json is True
    assert parser().parse_args(["run", "x.yaml", "--fail-fast-after", "5"]).fail_fast_after == 5
    assert not getattr(parser().parse_args(["run", "x.yaml"]), "verbose", False)


# ---------------------------------------------------------------- live counts


def test_documents_done_counts_finished_requests_before_their_batch_is_classified():
    assert documents_done({}) == 0
    # 5 requests finished; no batch classified yet
    assert documents_done({"requests": 5, "outcomes": {}, "classified_generated": 0}) == 5
    # a batch of 8 classified: 6 went through the engine, 2 were empty inputs; 3 more requests done since
    assert documents_done({"requests": 9, "outcomes": {"row": 4, "semantic_invalid": 2, "empty_input": 2},
                           "classified_generated": 6}) == 11


def test_progress_takes_stages_and_counts_from_the_board():
    progress = Progress(10, "job", live=False)
    progress.stage("starting Ray")
    progress._take({"stages": {"a": ("loading model", 0.0)}})
    assert progress.stage_name == "loading model"
    progress._take({"stages": {"a": ("ready", 0.0)}, "requests": 3, "outcomes": {}, "classified_generated": 0,
                    "output_tokens": 300, "first_count_unix": progress.started_unix + 1.0})
    assert progress.stage_name == "generating" and progress.documents() == 3
    assert progress.marks["first_count_s"] == pytest.approx(1.0, abs=0.01) and "first_progress_s" in progress.marks
    progress.update(2, 1)  # the driver has seen fewer: the display keeps the board's count
    assert progress.documents() == 3


def test_the_engines_tokens_are_the_first_counts_before_any_document_finishes():
    progress = Progress(10, "job", live=False)
    progress._take({"stages": {"a": ("ready", 0.0)}, "requests": 0, "outcomes": {}, "classified_generated": 0,
                    "output_tokens": 120, "first_tokens_unix": progress.started_unix + 2.0})
    assert progress.documents() == 0 and progress.tokens_rate() > 0
    assert "first_progress_s" in progress.marks and "first_document_s" not in progress.marks
    assert progress.marks["first_count_s"] == pytest.approx(2.0, abs=0.01)
    progress._take({"stages": {"a": ("ready", 0.0)}, "requests": 1, "outcomes": {}, "classified_generated": 0,
                    "output_tokens": 400, "first_tokens_unix": progress.started_unix + 2.0,
                    "first_count_unix": progress.started_unix + 9.0})
    assert progress.documents() == 1 and "first_document_s" in progress.marks
    assert progress.marks["first_count_s"] == pytest.approx(2.0, abs=0.01)  # still the tokens' time


def test_the_board_counts_step_tokens_and_reports_the_most_it_knows():
    from pipeline.stats import Board

    board = Board()
    board.tokens_made(50, 100.0)
    board.tokens_made(30, 101.0)
    snap = board.snapshot()
    assert snap["output_tokens"] == 80 and snap["first_tokens_unix"] == 100.0 and snap["first_count_unix"] is None
    board.requests_done(1, 60, 102.0)  # a finished request's tokens were already counted per step
    assert board.snapshot()["output_tokens"] == 80 and board.snapshot()["first_count_unix"] == 102.0


def test_the_run_desk_keeps_stats_board_and_journal_apart():
    """The run's one bookkeeping actor is the three objects in one: no attribute or method of one may shadow
    another's (a shared name would mix two ledgers, or call the wrong `snapshot`)."""
    from pipeline.stats import Board, Stats, _Desk
    from workers.crashes import Journal

    parts = [Stats(), Board(), Journal()]
    names = [set(vars(p)) | {n for n in vars(type(p)) if not n.startswith("__")} for p in parts]
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            assert not a & b, a & b
    desk = _Desk()
    assert set(vars(desk)) == set().union(*(vars(p) for p in parts))
    desk.record_batch("a", 1.0, 3.0, 4)
    desk.tokens_made(7, 2.0)
    assert desk.begin("k", "a") == (0, {}) and desk.suspect("k")
    assert desk.run_snapshot()["generation_s"] == 2.0 and desk.snapshot()["output_tokens"] == 7


def test_the_live_display_fits_80_columns_and_shows_every_figure():
    import io

    from pipeline.progress import live_display

    out = io.StringIO()
    display = live_display(out, width=80)
    display.console.force_terminal = False  # plain text, no cursor moves: the frame as a user's terminal shows it
    task = display.add_task("[bold]invoices[/bold] · generating", total=52, stats="0.42 docs/s · 85 tok/s",
                            dead=rate_text(12, {"semantic_invalid": 3, "truncated": 1}))
    display.update(task, completed=12)
    display.console.print(display.get_renderable())
    lines = [line for line in out.getvalue().splitlines() if line.strip()]
    assert len(lines) == 2 and all(len(line) <= 80 for line in lines), lines
    assert "invoices · generating" in lines[0] and "12/52" in lines[0] and "ETA" in lines[0]
    assert "0.42 docs/s · 85 tok/s" in lines[1] and "semantic_invalid 25%" in lines[1]


def test_rate_text_names_reasons_commonest_first():
    assert rate_text(0, {}) == "dead letters 0%"
    assert rate_text(10, {"truncated": 1, "semantic_invalid": 3}) == \
        "dead letters 40% (semantic_invalid 30%, truncated 10%)"


def test_the_last_progress_lines_agree_with_the_driver_on_the_dead_letter_rate(capsys):
    # The board lags (or counts a batch redone after an actor restart twice); once every document reached the
    # driver, every line gives the driver's figures, the ones the summary prints.
    progress = Progress(52, "job", live=False)
    progress._take({"stages": {"a": ("ready", 0.0)}, "requests": 52, "outcomes": {"row": 34, "truncated": 2},
                    "classified_generated": 36, "output_tokens": 900})
    assert progress.dead_rate() == pytest.approx(2 / 36)  # mid-run: the board is ahead of the driver
    progress.see(batch(["row"] * 50 + ["dead"] * 2))
    progress.update(52, 2)
    assert progress.dead_rate() == pytest.approx(2 / 52)
    assert progress.dead_by_reason() == {"semantic_invalid": 2}
    progress._take({"stages": {"a": ("ready", 0.0)}, "requests": 54, "outcomes": {"row": 51, "truncated": 3},
                    "classified_generated": 54, "output_tokens": 950})  # close(): the board's last snapshot
    assert progress.dead_rate() == pytest.approx(2 / 52)
    assert "dead letters 4% (semantic_invalid 4%)" in progress.line()


def batch(kinds: list[str]) -> pa.Table:
    return pa.table({"_kind": kinds, "_reason": [None if k == "row" else "semantic_invalid" for k in kinds]})


def test_fail_fast_stops_when_the_first_n_outcomes_are_all_dead_letters():
    guard = FailFast(3)
    guard.see(["dead_letter", "dead_letter"], ["semantic_invalid", "truncated"])
    with pytest.raises(FailFastError, match="first 3 outcomes were all dead letters"):
        guard.see(["dead_letter", "row"], ["semantic_invalid", None])


def test_fail_fast_disarms_at_the_first_row_and_is_off_by_default():
    guard = FailFast(3)
    guard.see(["dead_letter", "row", "dead_letter", "dead_letter"], ["x", None, "x", "x"])
    guard.see(["dead_letter"] * 10, ["x"] * 10)  # a row came first: never stops
    assert not guard.armed
    progress = Progress(10, "job", live=False)
    progress.see(batch(["dead_letter"] * 10))  # no --fail-fast-after
    with pytest.raises(FailFastError):
        Progress(10, "job", live=False, fail_fast_after=4).see(batch(["dead_letter"] * 4))


# ---------------------------------------------------------------- the summary's hints


def manifest(output_uri: str, partitions: list[dict] | None = None) -> RunManifest:
    return RunManifest(run_id="inv-1", name="inv", config_path="/abs/jobs/extract.yaml", config_hash="h",
                       status="committed", started_at="2026-12-01T00:00:00+00:00", output_uri=output_uri,
                       input_rows=8, rows=2, dead_letters=6, dead_letters_by_reason={"semantic_invalid": 6},
                       partitions=partitions or [{"partition": "all", "status": "committed"}])


def test_summary_commands_name_the_output_written_and_the_overrides_that_locate_it():
    cmds = commands(manifest("/tmp/x"), "jobs/extract.yaml",
                    ["model.max_tokens=64", "storage.endpoint_url=http://127.0.0.1:5000"])
    assert cmds["query"].startswith("extract query jobs/extract.yaml --set storage.endpoint_url=http://127.0.0.1:5000"
                                    " --set output.uri=/tmp/x ")
    assert "max_tokens" not in cmds["query"]  # not where the output is
    assert cmds["report"] == "extract report /tmp/x --run inv-1"
    assert cmds["retry"].startswith("extract retry jobs/extract.yaml --reason semantic_invalid")


def test_the_retry_hint_keeps_the_runs_own_settings_except_those_it_changes():
    """A run made with `--set model.path=...` is retried with that model, not the file's; the hint's own
    setting (twice the token budget) replaces the run's."""
    truncated = manifest("/tmp/x")
    truncated.dead_letters_by_reason, truncated.max_tokens = {"truncated": 3}, 64
    cmds = commands(truncated, "jobs/extract.yaml", ["model.path=/models/m", "model.max_tokens=64",
                                                     "model.engine_kwargs.hf_token=hf_abcdefghijklmnopqrstuvwxyz",
                                                     "output.uri=/tmp/x"])
    retry = cmds["retry"]
    assert "--set model.path=/models/m" in retry and "--set model.max_tokens=128" in retry
    assert "model.max_tokens=64" not in retry and retry.count("output.uri=") == 1
    assert "hf_abcdefghijklmnopqrstuvwxyz" not in retry and "model.engine_kwargs.hf_token=***" in retry


def test_the_summary_suggests_only_a_retry_that_can_succeed():
    empty_first = manifest("/tmp/x")
    empty_first.dead_letters_by_reason, empty_first.max_tokens = {"empty_input": 5, "truncated": 1}, 256
    cmds = commands(empty_first, "jobs/extract.yaml")
    assert "empty_input" not in cmds["retry"]  # an empty document stays empty, whatever the settings
    assert cmds["retry"].startswith("extract retry jobs/extract.yaml --reason truncated --set model.max_tokens=512")
    assert "--set model.retry.attempts=3" in commands(manifest("/tmp/x"), "x.yaml")["retry"]  # not the same settings
    hopeless = manifest("/tmp/x")
    hopeless.dead_letters_by_reason = {"empty_input": 4, "input_too_long": 2}
    assert "retry" not in commands(hopeless, "x.yaml")
    assert "extract retry" not in render_summary(hopeless, "x.yaml")


def test_summary_hints_never_repeat_a_secret_set_value():
    cmds = commands(manifest("/tmp/x"), "jobs/extract.yaml",
                    ["storage.endpoint_url=https://admin:S3cretPW@s3.internal", "storage.region=eu-west-1"])
    assert "S3cretPW" not in " ".join(cmds.values())
    assert "storage.endpoint_url=https://admin:***@s3.internal" in cmds["query"]
    assert "--set storage.region=eu-west-1" in cmds["query"]


def test_summary_names_the_dated_partition_and_flags_rays_temporary_dir():
    dated = render_summary(manifest("s3://b/out", [{"partition": "2026-11-02", "status": "committed"}]), "x.yaml")
    assert "s3://b/out/rows/dt=2026-11-02" in dated and "--date 2026-11-02" in dated
    assert "warning" not in dated
    temp = "/tmp/ray/session_2026/runtime_resources/working_dir_files/_ray_pkg_1/out"
    assert in_ray_temp(temp)
    assert "Ray's temporary working dir" in render_summary(manifest(temp), "extract.yaml")


class _Method:
    def __init__(self, calls: list, name: str) -> None:
        self.calls, self.name = calls, name

    def remote(self, *args):
        self.calls.append((self.name, *args))


class _Board:
    def __init__(self) -> None:
        self.calls: list = []
        for name in ("stage", "requests_done", "batch_done"):
            setattr(self, name, _Method(self.calls, name))


def test_reporter_sends_finished_requests_in_one_call_and_batches_by_reason():
    import threading
    from types import SimpleNamespace

    from pipeline.stats import Reporter

    board = _Board()
    reporter = Reporter(board, "actor-1", every_s=3600)  # its own thread never flushes here: the test does
    output = SimpleNamespace(outputs=[SimpleNamespace(token_ids=[1, 2, 3])])
    threads = [threading.Thread(target=reporter.request_done, args=(output,)) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    reporter.flush()
    reporter.flush()  # nothing new: no second call
    sent = [c for c in board.calls if c[0] == "requests_done"]
    assert len(sent) == 1 and sent[0][1:3] == (4, 12)
    reporter.batch_done(pa.table({"_kind": ["row", "dead_letter", "dead_letter"],
                                  "_reason": [None, "truncated", "empty_input"],
                                  "_finish_reason": ["stop", "length", None], "_output_tokens": [10, 64, None]}))
    (batch_call,) = [c for c in board.calls if c[0] == "batch_done"]
    assert batch_call[1] == {"row": 1, "truncated": 1, "empty_input": 1} and batch_call[2:4] == (2, 74)


def test_the_engine_thread_calls_its_hook_and_survives_a_failing_one():
    from workers.engine import EngineThread

    thread = EngineThread.__new__(EngineThread)  # no engine: only the hook's dispatch
    seen: list = []
    thread.on_request_done = seen.append
    thread._request_done("out")
    thread.on_request_done = lambda _: 1 / 0
    thread._request_done("out")  # swallowed: serving goes on
    assert seen == ["out"]
