"""Issue 56 item 5: windows per document in the run's summary, record and report page (a counter, never a list per
document), and a live display that counts a windowed document once, when its merged outcome is classified."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest

from pipeline.output.manifest import RunManifest
from pipeline.progress import documents_done
from pipeline.stats import Board, Reporter, Stats
from pipeline.summary import render_summary
from pipeline.tools.report.extras import windows_cards
from tests.unit.test_windows import WindowEngine, long_nda, nda_spec, table
from workers.actor import windows_of
from workers.engine.outputs import tell_hooks
from workers.extractor import BatchExtractor
from workers.windows import count_windows, windows_figures, windows_text


def test_windows_figures_give_median_max_and_the_share_read_in_more_than_one():
    counts = count_windows([1, 1, None, 3, 1, 7])  # None: a document decided before any request, not counted
    assert counts == {1: 3, 3: 1, 7: 1}
    figures = windows_figures(counts)
    assert figures == {"documents": 5, "median": 1.0, "max": 7, "more_than_one": pytest.approx(0.4),
                       "counts": {"1": 3, "3": 1, "7": 1}}
    assert windows_figures({1: 1, 4: 1})["median"] == 2.5  # an even number: the mean of the two middle ones
    assert windows_figures({"2": 2, "9": 1})["median"] == 2.0  # the record's JSON keys read back
    assert windows_figures({}) is None and windows_text(None) is None
    assert windows_text(figures) == "per document median 1, max 7; 40.0% of 5 documents needed more than one"


def test_the_desk_counts_windows_per_document_into_the_record_summary_and_report():
    outcomes = pa.table({"_kind": ["row", "row", "dead_letter"], "_windows": pa.array([1, 6, None], pa.int32())})
    assert windows_of(outcomes) == {1: 1, 6: 1} and windows_of(pa.table({"_kind": ["row"]})) == {}
    desk = Stats()
    desk.record_batch("a", 0.0, 1.0, 3, None, windows_of(outcomes))
    desk.record_batch("b", 0.0, 1.0, 2, None, {1: 2})
    desk.record_batch("c", 0.0, 1.0, 2)  # an actor that sends no windows
    assert desk.windows == {1: 3, 6: 1}  # a counter: one entry per window count, whatever the documents
    figures = desk.run_snapshot()["windows"]
    assert figures["median"] == 1.0 and figures["max"] == 6 and figures["more_than_one"] == 0.25
    manifest = RunManifest(run_id="r", name="job", config_path="c.yaml", config_hash="h", status="committed",
                           started_at="2026-12-06T00:00:00Z", extra={"windows": figures})
    assert ("  windows    per document median 1, max 6; 25.0% of 4 documents needed more than one"
            in render_summary(manifest))
    record = json.loads(manifest.to_json())
    assert record["windows"] == figures  # the run record carries them as `windows`
    assert [c[:2] for c in windows_cards(record["windows"])] == [
        ("1", "windows per document (median)"), ("6", "windows per document (max)"),
        ("25.0%", "documents in more than one window")]
    assert windows_cards(None) == []
    plain = RunManifest(run_id="r", name="job", config_path="c.yaml", config_hash="h", status="committed",
                        started_at="2026-12-06T00:00:00Z")
    assert "windows    " not in render_summary(plain)


class _Forward:
    """A board method called as Ray would (`.remote`), on a real `Board`."""

    def __init__(self, method) -> None:
        self.remote = method


class _BoardHandle:
    def __init__(self, board: Board) -> None:
        for name in ("stage", "requests_done", "batch_done", "tokens_made"):
            setattr(self, name, _Forward(getattr(board, name)))


class HookedWindowEngine(WindowEngine):
    """`WindowEngine` that calls the live display's hooks per finished request, as every engine does."""

    def __init__(self) -> None:
        super().__init__()
        self.on_tokens = self.on_request_done = None

    def generate(self, prompts, json_schemas, max_tokens, temperature):
        generations = super().generate(prompts, json_schemas, max_tokens, temperature)
        for generation in generations:
            tell_hooks(self, generation)
        return generations


def test_a_windowed_document_counts_once_in_the_live_progress_when_its_batch_is_classified():
    board = Board()
    reporter = Reporter(_BoardHandle(board), "actor-1", every_s=3600)  # its own thread never flushes: the test does
    engine = HookedWindowEngine()
    engine.on_request_done, engine.on_tokens = reporter.request_done, reporter.tokens
    extractor = BatchExtractor(engine, nda_spec(), 120)
    extractor.on_windows = reporter.windows_planned  # as the actor wires it
    out = extractor(table(["short: Acme Inc. 2020-03-04", long_nda()]))
    windows = out.column("_windows").to_pylist()[1]
    assert windows > 3 and engine.calls == [1 + windows]  # every window went to the engine and finished
    reporter.flush()
    snapshot = board.snapshot()
    assert snapshot["requests"] == 1 + windows and snapshot["window_requests"] == windows
    assert documents_done(snapshot) == 1  # the short document; the long one's windows are not documents
    reporter.batch_done(out)
    assert documents_done(board.snapshot()) == 2  # the long document, once, with its merged outcome


def test_planned_windows_not_yet_finished_never_make_progress_run_ahead():
    # 3 short documents and a 10-window one in flight: 2 short and 4 windows finished, nothing classified.
    assert documents_done({"requests": 6, "window_requests": 10, "outcomes": {}, "classified_generated": 0}) == 0
    # Classified: 3 short rows and the windowed one; its 10 requests are not a short document's.
    assert documents_done({"requests": 13, "window_requests": 10, "outcomes": {"row": 4},
                           "classified_generated": 3}) == 4
    # A board of before windows (no `window_requests`) counts as it did.
    assert documents_done({"requests": 5, "outcomes": {}, "classified_generated": 0}) == 5


def test_the_reporter_sends_planned_windows_with_the_requests_and_leaves_windowed_documents_out_of_generated():
    calls: list = []

    class Handle:
        def __getattr__(self, name):
            return _Forward(lambda *args: calls.append((name, *args)))

    reporter = Reporter(Handle(), "actor-1", every_s=3600)
    reporter.windows_planned(5)
    reporter.flush()  # planned windows alone are sent, before any of their requests finishes
    assert [c[0] for c in calls] == ["requests_done"] and calls[0][1] == 0 and calls[0][4] == 5
    reporter.batch_done(pa.table({"_kind": ["row", "row", "dead_letter"], "_reason": [None, None, "engine_error"],
                                  "_finish_reason": ["stop", "stop", None], "_output_tokens": [10, 90, None],
                                  "_windows": pa.array([1, 5, 3], pa.int32())}))
    batch = calls[-1]
    assert batch[0] == "batch_done" and batch[1] == {"row": 2, "engine_error": 1} and batch[2] == 1


def test_the_run_page_shows_the_windows_cards_of_its_record():
    from types import SimpleNamespace

    from pipeline.tools.report.render import _cards

    figures = windows_figures({1: 3, 4: 1})
    report = SimpleNamespace(data=SimpleNamespace(record={"timings": {}, "windows": figures}, outcomes=[0] * 4),
                             counts=[("row", 4)], startups=[], scores=None)
    cards = {c["label"]: c["value"] for c in _cards(report)}
    assert cards["windows per document (max)"] == "4" and cards["documents in more than one window"] == "25.0%"
    report.data.record = {"timings": {}}  # a run of before windows: no windows cards
    assert not any("window" in c["label"] for c in _cards(report))


def test_the_reports_terminal_summary_prints_the_windows_line(tmp_path):
    import io
    from types import SimpleNamespace

    from rich.console import Console

    from pipeline.tools.report.terminal import print_summary

    def printed(record: dict) -> str:
        report = SimpleNamespace(data=SimpleNamespace(run_id="r", record=record, notes=[], outcomes=[0] * 4),
                                 counts=[("row", 4)], errors={}, startups=[],
                                 tokens={"prompt": {}, "output": {}}, budget=SimpleNamespace(max_tokens=0, source="x"))
        out = io.StringIO()
        print_summary(report, tmp_path, Console(file=out, width=200))
        return out.getvalue()

    assert "windows  per document median 1, max 4; 25.0% of 4 documents" in printed(
        {"timings": {}, "windows": windows_figures({1: 3, 4: 1})})
    assert "windows  " not in printed({"timings": {}})
