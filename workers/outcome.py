"""The outcome contract, in one place: every column name an outcome travels under, from the actor to the
committed tables, and every reason a document can become a dead letter.

Three forms of one document's outcome:
- the **outcome table** an actor returns for a batch (`Col`, `OUTCOME_FIELDS`), staged per unit with the
  run id added (`Col.RUN_ID`), beside the internal columns the reader adds (`Internal`);
- the **rows** table: the input's id, the schema's columns, then the lineage (`ROW_LINEAGE_COLUMNS`);
- the **dead-letters** table: the input's id, then `DEAD_LETTER_COLUMNS`.

The two committed tables describe the same lineage (which run, which schema, when, how many tokens) under
different names: rows prefix theirs with `_` because they sit beside the user's schema fields, dead letters
do not, and their time is `failed_at` where a row's is `_extracted_at`. Those written names are a published
format (docs/outputs.md, users' queries), so they stay as they are; `LINEAGE` is the one vocabulary that
says, for each lineage fact, its name in either table, and `lineage_names(kind)` maps a table's columns
to that vocabulary for a reader that shows both tables side by side (the report).

Column names are written here only: every other module imports them (tests/unit/test_architecture.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import pyarrow as pa

from schemas.arrow import RecordLayout
from workers.confidence import CONFIDENCE_TYPE, SPANS_TYPE

WINDOW_OF_TYPE = pa.map_(pa.string(), pa.int32())  # leaf path → window index (Col.WINDOW_OF)


class DeadLetterReason(StrEnum):
    """Why a document is a dead letter (workers.classify says when each one applies)."""

    INVALID_INPUT = "invalid_input"
    EMPTY_INPUT = "empty_input"
    INPUT_TOO_LONG = "input_too_long"
    TRUNCATED = "truncated"
    INVALID_JSON = "invalid_json"
    SEMANTIC_INVALID = "semantic_invalid"
    SCHEMA_VIOLATION = "schema_violation"
    VALIDATOR_ERROR = "validator_error"
    VALIDATOR_TIMEOUT = "validator_timeout"
    ENGINE_ERROR = "engine_error"
    SCHEMA_INVALID = "schema_invalid"
    SCHEMA_UNSUPPORTED = "schema_unsupported"
    TYPE_OVERFLOW = "type_overflow"
    ACTOR_CRASH = "actor_crash"
    LOW_CONFIDENCE = "low_confidence"


DEAD_LETTER_REASONS = tuple(r.value for r in DeadLetterReason)  # in the order above (the CLI's choices)


class Kind(StrEnum):
    """`Col.KIND`: what an outcome is."""

    ROW = "row"
    DEAD_LETTER = "dead_letter"


class Col:
    """The outcome table's columns, as an actor returns them and a unit is staged."""

    KIND = "_kind"
    RECORD = "_record"  # a row's record, JSON text: staging written before typed staging (read at commit)
    TYPED = "_typed"  # a row's record typed as its columns (`typed_column`): a struct, null for a dead letter
    REASON = "_reason"
    ERROR = "_error"  # JSON text
    RAW_OUTPUT = "_raw_output"
    FINISH_REASON = "_finish_reason"
    PROMPT_TOKENS = "_prompt_tokens"
    OUTPUT_TOKENS = "_output_tokens"
    SCHEMA_HASH = "_schema_hash"
    EXTRACTED_AT = "_extracted_at"
    CONFIDENCE = "_confidence"
    SPANS = "_spans"
    WINDOWS = "_windows"  # how many windows the document was read in (workers.windows): 1 when read whole
    WINDOW_OF = "_window_of"  # a windowed row's leaves: path → the window (0-based) its value came from
    RUN_ID = "_run_id"  # added when a unit is staged (pipeline.output.commit)


OUTCOME_FIELDS = [
    pa.field(Col.KIND, pa.string(), nullable=False),
    pa.field(Col.REASON, pa.string()),
    pa.field(Col.ERROR, pa.string()),
    pa.field(Col.RAW_OUTPUT, pa.string()),
    pa.field(Col.FINISH_REASON, pa.string()),
    pa.field(Col.PROMPT_TOKENS, pa.int64()),
    pa.field(Col.OUTPUT_TOKENS, pa.int64()),
    pa.field(Col.SCHEMA_HASH, pa.string()),
    pa.field(Col.EXTRACTED_AT, pa.timestamp("us", tz="UTC")),
    pa.field(Col.CONFIDENCE, CONFIDENCE_TYPE),
    pa.field(Col.SPANS, SPANS_TYPE),
    pa.field(Col.WINDOWS, pa.int32()),
    pa.field(Col.WINDOW_OF, WINDOW_OF_TYPE),
]


def typed_type(layout: RecordLayout) -> pa.StructType:
    """`Col.TYPED`'s type: the record's columns (`RecordLayout.schema`), each nullable (a dead letter's is null)."""
    return pa.struct([f.with_nullable(True) for f in layout.schema])


def typed_column(layout: RecordLayout, records: list[Any]) -> pa.Array:
    """`Col.TYPED` of a batch: each row's record (JSON form) typed by `layout.to_columns`, once, on the actor; null
    where the record is None (a dead letter). The commit takes its fields as the rows table's columns: no record is
    serialised, parsed or typed again (issue 53)."""
    kind = typed_type(layout)
    rows = [r for r in records if r is not None]
    if not rows:
        return pa.nulls(len(records), kind)
    columns = layout.to_columns(rows)
    struct = pa.StructArray.from_arrays([columns[f.name] for f in kind], fields=list(kind))
    if len(rows) == len(records):
        return struct
    return scatter(struct, [r is not None for r in records])


def scatter(values: pa.Array, present: list[bool]) -> pa.Array:
    """`values` (one per True of `present`, in order) spread over `present`'s positions, null at the others."""
    at = iter(range(len(values)))
    return values.take(pa.array([next(at) if p else None for p in present], pa.int64()))


class Internal:
    """Columns the read stage adds to a batch and the driver drops: never in a committed table."""

    UNIT = "_unit"  # the unit a document belongs to (pipeline.units)
    BACKEND = "_backend"  # which actor pool (structured-output backend) a row is routed to
    INVALID_INPUT = "_invalid_input"  # why the reader could not decode a row, else null
    SLICE = "_slice"  # where the actor stages the batch the row is in (pipeline.output.slices); the actor drops it


INTERNAL_COLUMNS = (Internal.UNIT, Internal.BACKEND, Internal.INVALID_INPUT, Internal.SLICE)

# What an actor returns for a batch it staged as a slice (pipeline.output.slices), per row: what the driver counts,
# shows and stops early on. The outcomes themselves reach the driver only on disk.
RECEIPT_COLUMNS = (Internal.UNIT, Internal.SLICE, Col.KIND, Col.REASON)


def receipt(outcomes: pa.Table, places: pa.ChunkedArray | pa.Array) -> pa.Table:
    """The receipt of a staged batch: its outcomes' unit, kind and reason, and their slice (`places`, row for row).
    Kind and reason are dictionary-encoded: a few distinct values in a batch."""
    return pa.table({Internal.UNIT: outcomes.column(Internal.UNIT),
                     Col.KIND: outcomes.column(Col.KIND).dictionary_encode(),
                     Col.REASON: outcomes.column(Col.REASON).dictionary_encode(), Internal.SLICE: places})


def to_ipc(table: pa.Table) -> bytes:
    """`table` as one Arrow IPC stream, its columns in one chunk each: how an actor returns a unit's outcomes to the
    driver's unit pool (`pipeline.unit_pool`). Ray's own pickling of an Arrow table rebuilds it chunk by chunk in
    Python, about 2 ms of the driver's CPU for a unit's receipt (4 columns of 16 batches' chunks); reading these
    bytes back (`from_ipc`) takes about 0.02 ms."""
    table = table.combine_chunks()
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()


def from_ipc(data: bytes) -> pa.Table:
    """The table `to_ipc` wrote."""
    return pa.ipc.open_stream(pa.BufferReader(data)).read_all()


def is_receipt(table: pa.Table) -> bool:
    """Whether an outcome table (or a unit's piece of one, without `_unit`) is a receipt, not the outcomes."""
    return Internal.SLICE in table.column_names and not set(table.column_names) - set(RECEIPT_COLUMNS)


class RowCol:
    """The rows table's lineage columns (after the id and the schema's fields)."""

    RUN_ID = Col.RUN_ID
    SCHEMA_NAME = "_schema_name"
    SCHEMA_VERSION = "_schema_version"
    SCHEMA_HASH = Col.SCHEMA_HASH
    MODEL = "_model"
    EXTRACTED_AT = Col.EXTRACTED_AT
    PROMPT_TOKENS = Col.PROMPT_TOKENS
    OUTPUT_TOKENS = Col.OUTPUT_TOKENS
    CONFIDENCE = Col.CONFIDENCE  # null where the run asked for none (output.confidence: false)
    MIN_CONFIDENCE = "_min_confidence"  # the row's least confident leaf
    SPANS = Col.SPANS
    WINDOWS = Col.WINDOWS
    WINDOW_OF = Col.WINDOW_OF


ROW_LINEAGE_COLUMNS = (RowCol.RUN_ID, RowCol.SCHEMA_NAME, RowCol.SCHEMA_VERSION, RowCol.SCHEMA_HASH, RowCol.MODEL,
                       RowCol.EXTRACTED_AT, RowCol.PROMPT_TOKENS, RowCol.OUTPUT_TOKENS, RowCol.CONFIDENCE,
                       RowCol.MIN_CONFIDENCE, RowCol.SPANS, RowCol.WINDOWS, RowCol.WINDOW_OF)


class DeadCol:
    """The dead-letters table's columns (after the id)."""

    REASON = "reason"
    ERROR = "error"
    RAW_OUTPUT = "raw_output"
    FINISH_REASON = "finish_reason"
    PROMPT_TOKENS = "prompt_tokens"
    OUTPUT_TOKENS = "output_tokens"
    RUN_ID = "run_id"
    SCHEMA_NAME = "schema_name"
    SCHEMA_VERSION = "schema_version"
    SCHEMA_HASH = "schema_hash"
    FAILED_AT = "failed_at"
    ATTEMPTS = "attempts"  # 1, raised by each `extract retry`


DEAD_LETTER_COLUMNS = (DeadCol.REASON, DeadCol.ERROR, DeadCol.RAW_OUTPUT, DeadCol.FINISH_REASON, DeadCol.PROMPT_TOKENS,
                       DeadCol.OUTPUT_TOKENS, DeadCol.RUN_ID, DeadCol.SCHEMA_NAME, DeadCol.SCHEMA_VERSION,
                       DeadCol.SCHEMA_HASH, DeadCol.FAILED_AT, DeadCol.ATTEMPTS)


@dataclass(frozen=True)
class LineageName:
    """One lineage fact: its name in the shared vocabulary, in the rows table, and in the dead-letters table."""

    name: str
    row: str
    dead_letter: str


LINEAGE = (
    LineageName("run_id", RowCol.RUN_ID, DeadCol.RUN_ID),
    LineageName("schema_name", RowCol.SCHEMA_NAME, DeadCol.SCHEMA_NAME),
    LineageName("schema_version", RowCol.SCHEMA_VERSION, DeadCol.SCHEMA_VERSION),
    LineageName("schema_hash", RowCol.SCHEMA_HASH, DeadCol.SCHEMA_HASH),
    LineageName("at", RowCol.EXTRACTED_AT, DeadCol.FAILED_AT),  # when the outcome was made
    LineageName("prompt_tokens", RowCol.PROMPT_TOKENS, DeadCol.PROMPT_TOKENS),
    LineageName("output_tokens", RowCol.OUTPUT_TOKENS, DeadCol.OUTPUT_TOKENS),
)

ROWS, DEAD_LETTERS = "rows", "dead_letters"  # the two committed tables


def lineage_names(kind: str) -> dict[str, str]:
    """`kind`'s ("rows" or "dead_letters") lineage columns → their names in the shared vocabulary."""
    if kind not in (ROWS, DEAD_LETTERS):
        raise ValueError(f"no committed table {kind!r}")
    return {(n.row if kind == ROWS else n.dead_letter): n.name for n in LINEAGE}


# An input's id column may not take these names: they sit beside it in the committed tables, or in the batches.
RESERVED_ID_COLUMNS = frozenset((*ROW_LINEAGE_COLUMNS, *DEAD_LETTER_COLUMNS, Internal.UNIT, Internal.SLICE))
