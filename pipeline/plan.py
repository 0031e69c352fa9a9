"""The old name of `pipeline.dataflow` (the Ray Data graph a run streams through), kept for its importers: it is
that very module. "Plan" now means one thing, `pipeline.planning`: what a run does with each partition."""

import sys

from pipeline import dataflow as _dataflow

sys.modules[__name__] = _dataflow
