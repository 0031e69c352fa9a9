"""`extract eval`: score a run's rows against gold records, per field and overall.

Valid is not correct: a row that passed the grammar and every validator can still hold the wrong
vendor. This module compares each row with the expected record of the same document id and reports,
per field path (`vendor.name`, `line_items[].amount`, `items[]`) and overall, precision, recall,
exact-match rate, coverage (the share of gold documents that got a row at all) and the dead-letter
rate by reason.

Scoring rules (eval.md repeats them):
- Leaves are the scalars of a record. Objects recurse by key, lists by element.
- Strings are equal after normalisation: Unicode NFKC, casefold, every whitespace run collapsed to
  one space, ends stripped. So "ACME  Ltd" equals "acme ltd" and "ﬁle" equals "file".
- Numbers are equal within a relative tolerance (1e-6) or an absolute one (0.01), whichever is
  looser. Booleans are not numbers: true never equals 1.
- Dates and datetimes are compared as ISO 8601 strings: a Parquet `date32` equals "2026-01-30";
  datetimes are converted to UTC first (a naive one is read as UTC), so "...T10:00:00Z" equals
  "...T10:00:00+00:00". A string field whose schema says `format: date`/`date-time` is read the same way.
- Other mixed types (the string "5" against the number 5) are never equal.
- Missing vs null: a key that is absent and a key holding null both mean "no value". A gold value
  with no predicted value is *missed* (the report also counts how often the key was absent outright,
  not null); a predicted value where the gold has none is *spurious*; both without a value is a
  *null agreement*, which counts for the exact match but not for precision or recall.
- Lists match by position, unless the schema marks the list a set (`uniqueItems: true`) or the path
  is given as unordered (`--unordered PATH`, or `--all-lists-unordered`). A set is matched greedily:
  the pair of elements sharing the most correct leaves first (ties: nearest positions), and elements
  sharing none stay unmatched (their leaves are missed or spurious).
- Gold keys that the schema does not declare (an object schema with `properties` and no
  `additionalProperties`/`patternProperties` schema) are not scored: the job never asked for them.
  They are listed under "not in the schema".

Metrics over the gold documents the run processed (those with a row or a dead letter; gold
documents outside the run, e.g. past `--limit`, are counted but not scored):
- precision: of the predicted non-null leaves, the share that are correct;
- recall: of the gold non-null leaves, the share predicted correctly (a document without a row
  contributes its gold leaves as missed);
- exact-match rate: documents whose row equals the gold record on every leaf (no wrong, missed or
  spurious leaf), over the gold documents (and, separately, over those with a row);
- coverage: the share of gold documents with a row at all;
- dead-letter rate by reason: the share of gold documents dead-lettered for that reason.

The run's output is read from its committed partitions: the partitions whose manifest names the run
(so rows resumed from an earlier run's staging are included, as that run committed them), files
read exactly as the manifests name them.

One concern per module: `options`, `leaves` (leaf equality), `schema_view`, `compare` (record against gold),
`scores` (aggregation), `gold` (reading gold files), `output` (reading a run's committed output) and `report`
(eval.json and eval.md). This package re-exports their public names.
"""

from __future__ import annotations

from pipeline.tools.evaluate.compare import KINDS, Comparer, Event, maybe_json
from pipeline.tools.evaluate.gold import load_gold
from pipeline.tools.evaluate.leaves import TEMPORAL_FORMATS, canonical, iso, leaf_equal, normalize_text
from pipeline.tools.evaluate.options import DEFAULT_OPTIONS, DEFAULT_TOLERANCE, EvalError, EvalOptions, Tolerance
from pipeline.tools.evaluate.output import (
    RunOutput,
    evaluate,
    output_of_labels,
    output_of_run,
    per_row_schemas,
    read_output,
    rows_to_records,
)
from pipeline.tools.evaluate.report import RULES, build_report, render_markdown, write_report
from pipeline.tools.evaluate.schema_view import SchemaView
from pipeline.tools.evaluate.scores import DocResult, FieldStats, Scores, score

__all__ = [
    "DEFAULT_OPTIONS", "DEFAULT_TOLERANCE", "KINDS", "RULES", "TEMPORAL_FORMATS", "Comparer", "DocResult",
    "EvalError", "EvalOptions", "Event", "FieldStats", "RunOutput", "SchemaView", "Scores", "Tolerance",
    "build_report", "canonical", "evaluate", "iso", "leaf_equal", "load_gold",
    "maybe_json", "normalize_text", "output_of_labels", "output_of_run", "per_row_schemas", "read_output",
    "render_markdown", "rows_to_records", "score", "write_report",
]
