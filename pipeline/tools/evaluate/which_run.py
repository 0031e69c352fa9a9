"""Which run `extract eval` scores, and so under which run id its eval.json is filed.

Without `--run` and without `--force`, an output whose partitions for this job are all committed already is
scored as it stands: the runs that committed those partitions are the ones scored, and the eval is filed under
them (a run id, or several joined by `+`). No run is started, so no empty run record appears. When some
partition is not committed yet, `extract eval` runs the job and files the eval under that real run."""

from __future__ import annotations

from datetime import date

from pipeline.config import LoadedConfig
from pipeline.output.committed import CommittedOutput
from pipeline.partition import partition_for
from pipeline.tools.evaluate.output import RunOutput, output_of_labels


def already_committed(loaded: LoadedConfig, days: list[date | None]) -> RunOutput | None:
    """The committed output of every partition `days` names, or None if one of them still needs a run.

    A partition committed under another model, prompt or schema raises `EvalError` (as a fresh run that skips it
    would): score it with `--run`, redo it with `--force`, or write elsewhere with `--output`."""
    output = CommittedOutput.of(loaded)
    labels = set()
    for day in days:
        p = partition_for(loaded.input_uri, day)
        if output.manifest(p, check=False) is None:
            return None
        labels.add(p.label)
    return output_of_labels(loaded, labels, run_id="")


def eval_run_id(output: RunOutput) -> str:
    """The id an eval of `output` is filed under: its one run's id, or its runs' ids joined by `+`."""
    return "+".join(output.run_ids)
