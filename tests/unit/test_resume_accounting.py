"""lab/experiments/resume_at_scale.py's accounting: the JSON log lines it reads and what it counts as redone."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "lab" / "experiments" / "resume_at_scale.py"


def _script():
    spec = importlib.util.spec_from_file_location("resume_at_scale", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_events_reads_our_json_lines_and_skips_the_rest():
    events = _script().events
    text = "\n".join([
        json.dumps({"event": "actor.batch", "actor": "h:1", "documents": 500, "timestamp": "2026-12-02T12:00:01Z"}),
        ":actor_name:MapWorker(MapBatches(ExtractionActor))",
        json.dumps({"event": "actor.batch_x", "documents": 7, "timestamp": "2026-12-02T12:00:02Z"}),
        '{"event": "actor.batch", "documents": 5',  # cut off by the SIGKILL
        json.dumps({"event": "driver.batch", "rows": 500, "timestamp": "2026-12-02T12:00:03.5Z"}),
        "  " + json.dumps({"event": "actor.batch", "actor": "h:2", "documents": 20}),
        # two streams into one file: the driver's line and a forwarded actor line, with no line break between
        json.dumps({"event": "driver.batch", "rows": 7, "timestamp": "2026-12-02T12:00:04Z"})
        + json.dumps({"event": "actor.batch", "actor": "h:3", "documents": 30, "timestamp": "2026-12-02T12:00:04Z"}),
    ])
    batches = events(text, "actor.batch")
    assert [(b["actor"], b["documents"]) for b in batches] == [("h:1", 500), ("h:2", 20), ("h:3", 30)]
    assert batches[0]["unix"] == 1796212801.0 and batches[1]["unix"] is None
    assert [e["rows"] for e in events(text, "driver.batch")] == [500, 7]
    assert events(text, "driver.batch")[0]["unix"] == 1796212803.5


def _batch(actor, documents, unix):
    return {"actor": actor, "documents": documents, "unix": unix}


def test_redone_bounds_what_was_in_flight_by_what_each_actor_finished_after_the_kill():
    redone = _script().redone
    batches = [_batch("a", 500, 1.0), _batch("a", 500, 2.0), _batch("b", 500, 1.5), _batch("b", 500, 11.0)]
    got = redone(batches, kill_unix=10.0, kept=1500, actors=3, batches_in_flight=1, batch_size=500)
    # finished 2000, kept 1500: 500 redone for sure (b's batch, finished after the kill). a may have had one
    # batch cut off; b had none left (its one in flight finished); c never logged, so one batch at most.
    assert got["finished_by_actors"] == 2000 and got["finished_after_kill"] == 500
    assert got["finished_not_kept"] == got["redone_at_least"] == 500
    assert got["interrupted_at_most"] == 1000 and got["redone_at_most"] == 1500
    assert got["goal_at_most"] == 1500 and got["goal_met"]


def test_redone_misses_the_goal_when_finished_batches_were_lost_beyond_one_an_actor():
    redone = _script().redone
    batches = [_batch("a", 500, float(t)) for t in range(6)]
    got = redone(batches, kill_unix=10.0, kept=1500, actors=1, batches_in_flight=2, batch_size=500)
    assert got["finished_not_kept"] == 1500 and got["interrupted_at_most"] == 1000
    assert got["redone_at_most"] == 2500 and not got["goal_met"]


def test_redone_is_exact_with_the_batch_start_lines():
    redone = _script().redone
    # a: 3 started, 2 finished (one cut off in flight); b: 2 started, 2 finished; c: 1 started, none finished.
    starts = [_batch("a", 500, 0.5), _batch("a", 500, 1.5), _batch("a", 500, 2.5), _batch("b", 500, 0.5),
              _batch("b", 500, 1.6), _batch("c", 200, 0.7)]
    batches = [_batch("a", 500, 1.0), _batch("a", 500, 2.0), _batch("b", 500, 1.5), _batch("b", 500, 11.0)]
    got = redone(batches, kill_unix=10.0, kept=1500, actors=3, batches_in_flight=1, batch_size=500, starts=starts)
    assert got["interrupted"] == 700 and got["interrupted_batches"] == 2
    assert got["interrupted_per_actor"] == {"a": {"documents": 500, "batches": 1},
                                            "c": {"documents": 200, "batches": 1}}
    assert got["redone"] == 500 + 700 and got["goal_at_most"] == 1500 and got["goal_met"]
    # the bounds stay, for comparison with logs that have no start lines
    assert got["redone_at_least"] == 500 and got["redone_at_most"] == 1500
    over = redone(batches, 10.0, 1500, 3, 1, 500, starts + [_batch("b", 500, 9.0), _batch("b", 500, 9.5)])
    assert over["redone"] == 2200 and not over["goal_met"]
