"""Issue 57 item 4: the actor's CPU per document beside the engine, by stage (workers.stages): nested stages
counted once, histograms that merge and hold no document, p50/p99 per stage and the cores a GPU needs."""

from __future__ import annotations

import pytest

from pipeline.output.manifest import RunManifest
from pipeline.stats import Stats
from pipeline.summary import render_summary
from workers.stages import (
    STAGES,
    TOTAL,
    Histogram,
    StageHistograms,
    TimedCalibrator,
    batch_clock,
    cores_per_gpu,
    stage_lines,
    summarize,
    timed,
)


def spin(n: int) -> int:
    return sum(i * i for i in range(n))


def test_a_nested_stage_is_counted_in_the_inner_one_only():
    with batch_clock() as clock:
        with timed("classify_validate"):
            spin(20_000)
            with timed("calibration"):
                spin(200_000)
    assert clock.seconds["calibration"] > 0 and clock.seconds["classify_validate"] > 0
    assert clock.seconds["calibration"] > clock.seconds["classify_validate"]  # 10x the work, not added to the outer
    assert set(clock.seconds) == set(STAGES)


def test_outside_a_batch_nothing_is_timed_and_the_calibrator_keeps_its_answers():
    class Calibrator:
        scale = 2

        def row(self, confidence, *_):
            return {k: v / self.scale for k, v in confidence.items()}

    wrapped = TimedCalibrator(Calibrator())
    with timed("prompt"):  # no batch clock: a no-op
        assert wrapped.row({"a": 1.0}) == {"a": 0.5} and wrapped.scale == 2
    with batch_clock() as clock:
        wrapped.row({"a": 1.0})
    assert clock.seconds["calibration"] >= 0 and clock.seconds["prompt"] == 0


def test_histograms_merge_and_give_quantiles_within_a_bucket():
    h = Histogram()
    for ms in range(1, 101):
        h.add(ms / 1000)
    assert h.documents == 100
    assert h.quantile(0.5) == pytest.approx(0.050, rel=0.26)
    assert h.quantile(0.99) == pytest.approx(0.099, rel=0.26)
    other = Histogram.from_json(h.to_json())
    other.merge(h)
    assert other.documents == 200 and other.mean() == pytest.approx(h.mean())
    assert len(h.counts) == len(Histogram().counts)  # fixed buckets: no memory per document


def test_a_batch_is_shared_among_its_documents_and_summed_per_document():
    stages = StageHistograms()
    stages.add({"prompt": 0.016, "staging": 0.016}, 16)  # 1 ms each per document
    stages.add({"prompt": 0.0, "staging": 0.0}, 0)  # an empty batch adds nothing
    summary = summarize(stages.to_json())
    assert summary["prompt"]["documents"] == 16
    assert summary["prompt"]["mean_ms"] == pytest.approx(1.0)
    assert summary[TOTAL]["mean_ms"] == pytest.approx(2.0)
    assert cores_per_gpu(summary, 50) == pytest.approx(0.1)  # 2 ms × 50 documents/s
    assert cores_per_gpu({}, 50) is None
    lines = stage_lines(summary)
    assert lines[0].startswith("CPU ms per document beside the engine, p50/p99: prompt ")
    assert "cores per GPU" in lines[1] and "0.10 at 50 documents/s" in lines[1]


def test_the_desk_collects_stages_and_the_summary_prints_them():
    desk = Stats()
    desk.record_batch("a", 0.0, 1.0, 4, {"classify_validate": 0.004})
    desk.record_batch("b", 0.0, 1.0, 4)  # an actor that sends no stages
    snapshot = desk.run_snapshot()
    assert snapshot["stage_cpu_ms"]["classify_validate"]["documents"] == 4
    manifest = RunManifest(run_id="r", name="job", config_path="c.yaml", config_hash="h", status="committed",
                           started_at="2026-12-06T00:00:00Z", extra={"stage_cpu_ms": snapshot["stage_cpu_ms"]})
    assert "cpu        CPU ms per document beside the engine" in render_summary(manifest)


def test_a_batch_through_the_extractor_is_timed_in_its_stages():
    from tests.unit.test_extractor import ScriptedEngine, batch, spec
    from workers.extractor import BatchExtractor

    extractor = BatchExtractor(ScriptedEngine(), spec(), 100)
    with batch_clock() as clock:
        extractor(batch([f"my kettle {i} leaks, please help" for i in range(8)]))
    for stage in ("prompt", "grounding", "classify_validate", "staging"):
        assert clock.seconds[stage] > 0, stage
    assert clock.seconds["calibration"] == 0  # the job has no calibration


def test_a_long_documents_windows_are_planned_in_the_prompt_stage(monkeypatch):
    """Every prompt a windowed document's planning tokenizes (its pieces counted, each window's prompt) is made
    inside the `prompt` stage: before, planning ran in no stage and its CPU was counted nowhere."""
    from contextlib import contextmanager

    import workers.extractor as extractor_module
    from tests.unit.test_windows import WindowEngine, long_nda, nda_spec, table
    from workers.extractor import BatchExtractor

    open_stages: list[str] = []
    real = extractor_module.timed

    @contextmanager
    def naming(stage):
        open_stages.append(stage)
        try:
            with real(stage):
                yield
        finally:
            open_stages.pop()

    monkeypatch.setattr(extractor_module, "timed", naming)
    seen: list[tuple[str, ...]] = []

    class Recording(WindowEngine):
        def prompt_token_ids(self, prompt):
            seen.append(tuple(open_stages))
            return super().prompt_token_ids(prompt)

    with batch_clock():
        out = BatchExtractor(Recording(), nda_spec(), 120)(table([long_nda()]))
    assert out.column("_windows")[0].as_py() > 3
    assert len(seen) > 4 and all(stages[-1:] == ("prompt",) for stages in seen), seen
