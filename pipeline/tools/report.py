"""`extract report`: what one run did, for the person who runs the job every night.

A run record (`_runs/<run_id>.json`) says how many documents went where; the committed Parquet files
say which ones, why, when and at what token cost. The report joins the two:
  - counts by outcome (rows, and each dead-letter reason);
  - the commonest error messages per reason, grouped after normalising away the values that differ
    from document to document (numbers, dates, hex ids), with example document ids to look up;
  - throughput over time (documents per time bin, from `_extracted_at` and `failed_at`);
  - engine start-up and schema compile times, per actor;
  - prompt and output token histograms, with the `max_tokens` line, so truncation pressure shows.

It prints a terminal summary (rich) and writes DIR/report.html (self-contained: charts are inline
PNG data URIs, CSS is inline, nothing is fetched) and the charts as PNG files beside it.

Which records belong to a run: every record of each partition the run committed, as long as that
partition's current manifest is still the run's (resumed units staged by an earlier, interrupted
run are part of the commit). If the partition was since rewritten (`--force`, a retry), only the
records that still carry the run's id are shown, and the report says so.
"""

from __future__ import annotations

import base64
import html
import json
import math
import os
import re
import shlex
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pyarrow as pa

from pipeline.output.layout import OutputLayout
from pipeline.output.manifest import OutputCorruptError, committed
from pipeline.output.tables import column_names, read_columns
from pipeline.storage import S3Settings, Storage, StorageError, join, storage_for
from pipeline.tools.least_sure import Unsure, least_sure, read_texts, with_text

ROW = "row"
REASON_ORDER = ("truncated", "semantic_invalid", "schema_violation", "invalid_json", "validator_error",
                "engine_error", "schema_invalid", "schema_unsupported", "input_too_long", "empty_input",
                "type_overflow", "actor_crash", "low_confidence")
COLORS = {ROW: "#2e7d32", "truncated": "#ef6c00", "semantic_invalid": "#c62828", "schema_violation": "#ad1457",
          "invalid_json": "#6a1b9a", "validator_error": "#4527a0", "engine_error": "#37474f",
          "schema_invalid": "#00838f", "schema_unsupported": "#0277bd", "input_too_long": "#f9a825",
          "empty_input": "#90a4ae", "type_overflow": "#5d4037", "actor_crash": "#b71c1c",
          "low_confidence": "#ffb300"}
OTHER_COLOR = "#795548"
NICE_BIN_SECONDS = (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400)
TEMPLATES = Path(__file__).parent / "templates"
CHART_FILES = ("outcomes.png", "throughput.png", "startup.png", "tokens_prompt.png", "tokens_output.png")


class ReportError(RuntimeError):
    """The output holds nothing to report on (no run records, an unknown run id, no committed data)."""


PLAIN_RUN_ID = re.compile(r"[A-Za-z0-9_.-]{1,200}")


def plain_run_id(record: dict[str, Any], where: str) -> str:
    """The record's run id, which names a folder of the report (OUT/<run_id>/report.html): a plain name, or
    OutputCorruptError (a run record that names `../x`, an absolute path or a second line is tampered with)."""
    run_id = str(record.get("run_id"))
    if not PLAIN_RUN_ID.fullmatch(run_id) or run_id in (".", ".."):
        raise OutputCorruptError(f"a run record under {where}/_runs has run_id {run_id[:80]!r}, not a plain name "
                                 "(letters, digits, _ . -): the output's run records are tampered with; remove "
                                 "that record to report on the others")
    return run_id


# ---------------------------------------------------------------- loading


@dataclass
class RecordOutcome:
    """One document's outcome, reduced to what the report needs."""

    doc_id: str
    outcome: str  # ROW or a dead-letter reason
    at: datetime | None
    prompt_tokens: int | None
    output_tokens: int | None
    error: str | None = None  # the dead letter's error JSON
    attempts: int | None = None
    raw_output: str | None = None  # a dead letter's model output, as generated


@dataclass
class RunData:
    record: dict[str, Any]
    outcomes: list[RecordOutcome]
    output_uri: str
    notes: list[str] = field(default_factory=list)
    rows_have_tokens: bool = False
    row_tables: list[pa.Table] = field(default_factory=list)  # the run's rows, every column (for field profiles)
    input_files: list[str] = field(default_factory=list)  # the shown partitions' input files (least sure values)

    @property
    def run_id(self) -> str:
        return str(self.record["run_id"])


def list_runs(storage: Storage, output_uri: str) -> list[dict[str, Any]]:
    """Every run record under OUTPUT/_runs, oldest first."""
    records = []
    for path in storage.list_files(OutputLayout(output_uri).runs_root()):
        if path.endswith(".json"):
            try:
                records.append(json.loads(storage.read_text(path)))
            except json.JSONDecodeError:
                continue  # a record being written by a live run; it is not a finished run yet
    return sorted(records, key=lambda r: (str(r.get("started_at", "")), str(r.get("run_id", ""))))


def pick_run(records: Sequence[dict[str, Any]], run_id: str | None, where: str) -> tuple[dict[str, Any], str | None]:
    """The run to report on and, when the default skipped newer runs, a note saying so.

    Default: the newest run that processed documents. A nightly rerun of a committed partition is a
    no-op with an empty record, and reporting on it would hide the run that did the work."""
    if not records:
        raise ReportError(f"no run records under {where}/_runs: is {where} a job's output folder?")
    if run_id:
        exact = [r for r in records if r.get("run_id") == run_id]
        matches = exact or [r for r in records if str(r.get("run_id", "")).startswith(run_id)]
        if len(matches) == 1:
            return matches[0], None
        known = ", ".join(str(r.get("run_id")) for r in records[-5:])
        problem = "is ambiguous" if matches else "not found"
        raise ReportError(f"run {run_id!r} {problem} under {where}/_runs (newest: {known})")
    newest = records[-1]
    for record in reversed(records):
        if record.get("input_rows"):
            if record is newest:
                return record, None
            return record, (f"newest run {newest.get('run_id')} processed no documents "
                            f"({_partition_states(newest)}); reporting on {record.get('run_id')}")
    return newest, None


def _partition_states(record: dict[str, Any]) -> str:
    states = Counter(str(p.get("status")) for p in record.get("partitions", []))
    return ", ".join(f"{n} {s}" for s, n in states.items()) or "no partitions"


def committed_by_partition(storage: Storage, output_uri: str) -> dict[str, dict[str, Any]]:
    """Partition label → manifest (`pipeline.manifest.committed`), its files resolved under `output_uri`."""
    return {m.partition: {**asdict(m), "files": {k: m.uri(k, output_uri) for k in m.files}}
            for m in committed(storage, output_uri)}


def _relocate(path: str, recorded_root: str, output_uri: str) -> str:
    """A manifest names files by the URI the run wrote to; read them under OUTPUT as given (the folder
    may have been copied or synced since)."""
    recorded_root = recorded_root.rstrip("/")
    if recorded_root and path.startswith(recorded_root + "/"):
        return join(output_uri, path[len(recorded_root) + 1:])
    return path


def _read_columns(storage: Storage, uri: str, wanted: dict[str, str]) -> tuple[pa.Table, str]:
    """The `wanted` columns that the file has (renamed to their report names), and its id column's name
    (the first column: the input's id column, whatever it is called)."""
    names = column_names(storage, uri)
    id_column = names[0]
    present = [c for c in wanted if c in names]
    table = read_columns(storage, uri, [id_column, *present])
    return table.rename_columns(["doc_id", *(wanted[c] for c in present)]), id_column


ROW_COLUMNS = {"_run_id": "run_id", "_extracted_at": "at", "_prompt_tokens": "prompt_tokens",
               "_output_tokens": "output_tokens"}
DEAD_COLUMNS = {"reason": "reason", "error": "error", "run_id": "run_id", "failed_at": "at",
                "prompt_tokens": "prompt_tokens", "output_tokens": "output_tokens", "attempts": "attempts",
                "raw_output": "raw_output"}


def _outcomes(table: pa.Table, outcome: str | None) -> list[RecordOutcome]:
    columns = {name: table.column(name).to_pylist() for name in table.column_names}
    n = table.num_rows
    empty = [None] * n
    return [
        RecordOutcome(
            doc_id=str(columns["doc_id"][i]),
            outcome=outcome or str(columns["reason"][i]),
            at=columns.get("at", empty)[i],
            prompt_tokens=columns.get("prompt_tokens", empty)[i],
            output_tokens=columns.get("output_tokens", empty)[i],
            error=columns.get("error", empty)[i],
            attempts=columns.get("attempts", empty)[i],
            raw_output=columns.get("raw_output", empty)[i],
        )
        for i in range(n)
    ]


def load_run(output_uri: str, run_id: str | None = None, settings: S3Settings | None = None) -> RunData:
    """The chosen run's record and the outcomes of the partitions it committed (local or S3)."""
    output_uri = output_uri.rstrip("/")
    storage = storage_for(output_uri, settings)
    record, note = pick_run(list_runs(storage, output_uri), run_id, output_uri)
    data = RunData(record=record, outcomes=[], output_uri=output_uri, notes=[note] if note else [])
    if record.get("error"):
        data.notes.append(f"the run failed: {record['error']}")
    manifests = committed_by_partition(storage, output_uri)
    recorded_root = str(record.get("output_uri", ""))
    for part in record.get("partitions", []):
        label = str(part.get("partition"))
        if part.get("status") != "committed":
            data.notes.append(f"partition {label}: {part.get('status')}"
                              + (f" ({part['error']})" if part.get("error") else ""))
            continue
        manifest = manifests.get(label)
        if manifest is None:
            data.notes.append(f"partition {label}: no longer committed, so its records cannot be shown")
            continue
        rows_uri = _relocate(manifest["files"]["rows"], recorded_root, output_uri)
        rows, _ = _read_columns(storage, rows_uri, ROW_COLUMNS)
        dead, _ = _read_columns(storage, _relocate(manifest["files"]["dead_letters"], recorded_root, output_uri),
                                DEAD_COLUMNS)
        data.rows_have_tokens = data.rows_have_tokens or "output_tokens" in rows.column_names
        if record.get("kind") == "retry":
            rows, dead = _own(rows, data.run_id), _own(dead, data.run_id)
            data.notes.append(f"partition {label}: a retry; showing the {rows.num_rows} recovered rows and "
                              f"{dead.num_rows} documents still dead after it")
        elif manifest.get("run_id") != data.run_id:
            rows, dead = _own(rows, data.run_id), _own(dead, data.run_id)
            data.notes.append(f"partition {label}: since rewritten by {manifest.get('run_id')}; showing the "
                              f"{rows.num_rows + dead.num_rows} records that still carry this run's id")
        elif manifest.get("retries"):
            ids = ", ".join(str(r.get("run_id")) for r in manifest["retries"])
            data.notes.append(f"partition {label}: shown as it is now, after retries ({ids}); the run record "
                              "counts what this run wrote")
        data.outcomes += _outcomes(rows, ROW) + _outcomes(dead, None)
        data.row_tables.append(_full_rows(storage, rows_uri, rows.column("doc_id")))
        data.input_files += [str(f) for f in manifest.get("input_files") or ()]
    if not data.rows_have_tokens and any(o.outcome == ROW for o in data.outcomes):
        data.notes.append("rows carry no token counts (_prompt_tokens/_output_tokens): token histograms "
                          "show dead letters only")
    found = Counter(o.outcome for o in data.outcomes)
    expected = {ROW: int(record.get("rows", 0)), **{k: int(v) for k, v in
                                                      record.get("dead_letters_by_reason", {}).items()}}
    if not any(n.startswith("partition") for n in data.notes) and dict(found) != {k: v for k, v in
                                                                                   expected.items() if v}:
        data.notes.append(f"the committed files hold {dict(found)}, the run record says {expected}")
    return data


def _full_rows(storage: Storage, uri: str, doc_ids: pa.ChunkedArray) -> pa.Table:
    """Every column of a rows file, for the documents in `doc_ids` (the rows this report shows)."""
    import pyarrow.compute as pc

    table = read_columns(storage, uri)
    ids = table.column(0).cast(pa.string())
    return table.filter(pc.is_in(ids, value_set=doc_ids.combine_chunks().cast(pa.string())))


def _own(table: pa.Table, run_id: str) -> pa.Table:
    if "run_id" not in table.column_names:
        return table.slice(0, 0)
    import pyarrow.compute as pc

    return table.filter(pc.equal(table.column("run_id"), run_id))


# ---------------------------------------------------------------- error grouping (pure)

_DATE = re.compile(r"\b\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?)?\b")
_HEX = re.compile(r"\b0x[0-9a-fA-F]+\b")
_NUMBER = re.compile(r"(?<![\w.-])-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?(?![\w.])")
_WRAPPERS = ("Value error, ", "Assertion failed, ")
MAX_MESSAGE = 160


def normalise_message(message: str) -> str:
    """The message with its per-document values replaced, so that "total 12.0 does not appear" and
    "total 1562.0 does not appear" group together. Pydantic's "Value error, " wrapper is dropped."""
    text = " ".join(str(message).split())
    for wrapper in _WRAPPERS:
        if text.startswith(wrapper):
            text = text[len(wrapper):]
    text = _DATE.sub("<date>", text)
    text = _HEX.sub("<hex>", text)
    text = _NUMBER.sub("<n>", text)
    return text if len(text) <= MAX_MESSAGE else text[: MAX_MESSAGE - 1] + "…"


def format_loc(loc: Iterable[Any]) -> str:
    """`["items", 3, "name"]` → `items[*].name`: list positions differ per document, the path does not."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += "[*]"
        else:
            out += ("." if out else "") + str(part)
    return out


def error_messages(error_json: str | None) -> list[tuple[str, str]]:
    """(group key, raw message) for each error a dead letter records: every Pydantic/JSON Schema error
    (prefixed with its field path) when there is a list, else the one message."""
    if not error_json:
        return [("(no error recorded)", "")]
    try:
        error = json.loads(error_json)
    except json.JSONDecodeError:
        return [(normalise_message(error_json), error_json)]
    if not isinstance(error, dict):
        return [(normalise_message(str(error)), str(error))]
    items = error.get("errors")
    if isinstance(items, list) and items:
        out = []
        for item in items:
            msg = str(item.get("msg", "")) if isinstance(item, dict) else str(item)
            loc = format_loc(item.get("loc") or []) if isinstance(item, dict) else ""
            key = normalise_message(msg)
            out.append((f"{loc}: {key}" if loc else key, msg))
        return out
    message = str(error.get("message", "")) or json.dumps(error)
    return [(normalise_message(message), message)]


@dataclass
class ErrorGroup:
    reason: str
    pattern: str
    documents: int
    examples: list[str]  # document ids
    sample: str  # one raw message, values intact


def group_errors(dead: Iterable[tuple[str, str, str | None]], top: int = 5, examples: int = 3
                 ) -> dict[str, list[ErrorGroup]]:
    """Per reason, the `top` commonest normalised messages with the number of documents showing each
    (a document counts once per message, however many times it repeats) and a few example ids."""
    groups: dict[tuple[str, str], ErrorGroup] = {}
    for doc_id, reason, error_json in dead:
        seen: set[str] = set()
        for key, raw in error_messages(error_json):
            if key in seen:
                continue
            seen.add(key)
            group = groups.setdefault((reason, key), ErrorGroup(reason, key, 0, [], raw))
            group.documents += 1
            if len(group.examples) < examples:
                group.examples.append(doc_id)
    by_reason: dict[str, list[ErrorGroup]] = {}
    for group in sorted(groups.values(), key=lambda g: (-g.documents, g.pattern)):
        bucket = by_reason.setdefault(group.reason, [])
        if len(bucket) < top:
            bucket.append(group)
    return dict(sorted(by_reason.items(), key=lambda kv: _reason_rank(kv[0])))


def _reason_rank(reason: str) -> tuple[int, str]:
    return (REASON_ORDER.index(reason) if reason in REASON_ORDER else len(REASON_ORDER), reason)


# ---------------------------------------------------------------- time binning (pure)


def bin_width(span_s: float, target_bins: int = 30) -> int:
    """The smallest round width (1 s, 2 s, 5 s, … 1 day) giving at most `target_bins` bins over `span_s`."""
    for width in NICE_BIN_SECONDS:
        if span_s / width <= target_bins:
            return width
    return int(math.ceil(span_s / target_bins / 86400)) * 86400


@dataclass
class TimeBins:
    width_s: int
    starts: list[float]  # seconds since the origin, one per bin
    counts: dict[str, list[int]]  # category → documents per bin


def bin_times(offsets: dict[str, Sequence[float]], target_bins: int = 30) -> TimeBins:
    """Documents per time bin for each category; `offsets` are seconds since the run started. Bins are
    aligned on multiples of the width, so the same run always bins the same way."""
    every = [t for values in offsets.values() for t in values]
    if not every:
        return TimeBins(1, [], {k: [] for k in offsets})
    low, high = min(every), max(every)
    width = bin_width(max(high - low, 1e-9), target_bins)
    first = math.floor(low / width)
    n = math.floor(high / width) - first + 1
    counts = {}
    for category, values in offsets.items():
        per_bin = [0] * n
        for t in values:
            per_bin[math.floor(t / width) - first] += 1
        counts[category] = per_bin
    return TimeBins(width, [(first + i) * width for i in range(n)], counts)


def time_unit(span_s: float) -> tuple[float, str]:
    """Divisor and label for an axis spanning `span_s` seconds."""
    if span_s <= 600:
        return 1.0, "s"
    if span_s <= 10 * 3600:
        return 60.0, "min"
    return 3600.0, "h"


# ---------------------------------------------------------------- token budget


@dataclass
class TokenBudget:
    max_tokens: int | None
    source: str
    max_model_len: int | None = None


def token_budget(record: dict[str, Any], outcomes: Sequence[RecordOutcome]) -> TokenBudget:
    """The run's `max_tokens`: from the run record when it has it; else from an `input_too_long` dead
    letter (its error names the budget); else the length of a truncated output (truncation means the
    output reached the limit); else only the largest output seen, which is a lower bound."""
    max_model_len = record.get("max_model_len")
    budget: TokenBudget | None = None
    if record.get("max_tokens"):
        budget = TokenBudget(int(record["max_tokens"]), "run record")
    for o in outcomes:
        if o.outcome == "input_too_long" and o.error:
            try:
                error = json.loads(o.error)
            except json.JSONDecodeError:
                continue
            max_model_len = max_model_len or error.get("max_model_len")
            if budget is None and error.get("max_tokens"):
                budget = TokenBudget(int(error["max_tokens"]), "input_too_long dead letters")
    if budget is None:
        truncated = [o.output_tokens for o in outcomes if o.outcome == "truncated" and o.output_tokens]
        observed = [o.output_tokens for o in outcomes if o.output_tokens]
        if truncated:
            budget = TokenBudget(max(truncated), "length of truncated outputs")
        elif observed:
            budget = TokenBudget(max(observed), "largest output seen (limit unknown)")
        else:
            budget = TokenBudget(None, "unknown")
    budget.max_model_len = int(max_model_len) if max_model_len else None
    return budget


# ---------------------------------------------------------------- summary numbers


def _parse_time(text: Any) -> datetime | None:
    if not text:
        return None
    try:
        value = datetime.fromisoformat(str(text))
    except ValueError:
        return None
    return value if value.tzinfo else value.replace(tzinfo=timezone.utc)


def _as_utc(value: datetime) -> datetime:
    return value if value.tzinfo else value.replace(tzinfo=timezone.utc)


def counts_by_outcome(outcomes: Sequence[RecordOutcome]) -> list[tuple[str, int]]:
    counts = Counter(o.outcome for o in outcomes)
    ordered = sorted((k for k in counts if k != ROW), key=_reason_rank)
    return [(ROW, counts.get(ROW, 0)), *((k, counts[k]) for k in ordered)]


def interpolated_percentile(values: Sequence[int], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    position = (len(ordered) - 1) * q
    low, high = math.floor(position), math.ceil(position)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


@dataclass
class Startup:
    actor: str
    engine_init_s: float | None
    schema_compile_s: float
    schemas: int
    ready_s: float | None = None  # when the actor was warm, seconds after the run started (if recorded)
    backend: str | None = None

    @property
    def began_s(self) -> float | None:
        """When the actor started its engine: its ready time less its init and compile times."""
        if self.ready_s is None:
            return None
        return max(0.0, self.ready_s - (self.engine_init_s or 0) - self.schema_compile_s)


def startup_times(record: dict[str, Any], started: datetime | None = None) -> list[Startup]:
    out = []
    for actor in record.get("actors", []):
        compiles = actor.get("schema_compile_s") or {}
        if isinstance(compiles, dict):
            total, schemas = float(sum(v for v in compiles.values() if v)), len(compiles)
        else:
            total, schemas = float(compiles or 0), 1
        ready = actor.get("ready_unix")
        ready_s = float(ready) - started.timestamp() if ready and started else None
        out.append(Startup(str(actor.get("actor", "?")), actor.get("engine_init_s"), total, schemas, ready_s,
                           actor.get("backend")))
    return out


# ---------------------------------------------------------------- charts


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _label(outcome: str) -> str:
    return "rows" if outcome == ROW else outcome


def chart_outcomes(counts: list[tuple[str, int]], path: Path) -> None:
    plt = _plt()
    fig, ax = plt.subplots(figsize=(10, 0.45 * len(counts) + 1.2))
    labels = [_label(k) for k, _ in counts][::-1]
    values = [v for _, v in counts][::-1]
    bars = ax.barh(labels, values, color=[COLORS.get(k, OTHER_COLOR) for k, _ in counts][::-1])
    total = sum(values) or 1
    for bar, value in zip(bars, values, strict=True):
        ax.text(bar.get_width(), bar.get_y() + bar.get_height() / 2, f" {value} ({100 * value / total:.0f}%)",
                va="center", fontsize=9)
    ax.set_xlim(0, max(values + [1]) * 1.18)
    from matplotlib.ticker import MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("documents")
    ax.set_title("Outcomes: rows and dead letters by reason")
    ax.spines[["top", "right"]].set_visible(False)
    _save(fig, path)


def chart_throughput(bins: TimeBins, started: datetime, first_ready_s: float | None, path: Path) -> None:
    """Documents finished per bin (bars, by outcome) and the running total (line). Actors stamp a whole
    batch at once, so the bars come in bursts; the running total's slope is the throughput."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(10, 3.8))
    span = (bins.starts[-1] + bins.width_s) if bins.starts else 1
    divisor, unit = time_unit(span)
    xs = [s / divisor for s in bins.starts]
    bottom = [0] * len(bins.starts)
    for category, per_bin in bins.counts.items():
        ax.bar(xs, per_bin, width=bins.width_s / divisor, bottom=bottom, align="edge",
               color=COLORS.get(category, OTHER_COLOR), label=f"{_label(category)} per bin", edgecolor="white",
               linewidth=0.5)
        bottom = [b + c for b, c in zip(bottom, per_bin, strict=True)]
    # The axis starts shortly before the first actor was ready: the start-up before it is the start-up chart's
    # subject, and on a short run it would take most of this one.
    left = min(0.0, xs[0]) if xs else 0.0
    note = ""
    if first_ready_s is not None and first_ready_s > 0:
        left = max(left, min(first_ready_s, bins.starts[0] if bins.starts else first_ready_s) - 0.05 * span)
        ax.axvline(first_ready_s / divisor, color="#1565c0", linestyle=":", linewidth=1.2,
                   label=f"first actor ready ({first_ready_s:.1f} s)")
        note = f"; axis starts {left:.0f} s in (start-up before it)" if left > 0 else ""
    ax.set_xlabel(f"{unit} since the run started ({started:%Y-%m-%d %H:%M:%S} UTC); bins of {bins.width_s} s{note}")
    ax.set_ylabel(f"documents per {bins.width_s} s")
    _integer_ticks(ax)
    ax.set_xlim(left=left / divisor, right=span / divisor * 1.02)
    ax.spines[["top"]].set_visible(False)
    handles, labels = ax.get_legend_handles_labels()
    if bins.starts:
        running = ax.twinx()
        total, edges, cumulative = 0, [], []
        for x, count in zip(xs, bottom, strict=True):
            edges += [x, x + bins.width_s / divisor]
            cumulative += [total, total + count]
            total += count
        running.plot(edges, cumulative, color="#212121", linewidth=1.5, label="documents done (running total)")
        running.set_ylabel("documents done")
        running.set_ylim(bottom=0)
        _integer_ticks(running)
        running.spines[["top"]].set_visible(False)
        more_handles, more_labels = running.get_legend_handles_labels()
        handles, labels = handles + more_handles, labels + more_labels
    ax.set_title("Throughput over time")
    ax.legend(handles, labels, loc="upper left", fontsize=8, frameon=False)
    _save(fig, path)


def chart_startup(startups: list[Startup], timings: dict[str, Any], first_stamp_s: float | None,
                  path: Path) -> None:
    """Per actor, engine init then schema compile, placed on the run's clock when the actor recorded
    when it was ready; with the first outcome and the run's end for scale."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(10, 0.5 * max(len(startups), 1) + 2.2))
    names = [s.actor + (f" ({s.backend})" if s.backend else "") for s in startups] or ["(no actor started)"]
    placed = bool(startups) and all(s.began_s is not None for s in startups)
    began = [(s.began_s or 0.0) if placed else 0.0 for s in startups] or [0.0]
    init = [s.engine_init_s or 0 for s in startups] or [0]
    compile_ = [s.schema_compile_s for s in startups] or [0]
    schemas = max((s.schemas for s in startups), default=1)
    if placed:
        ax.barh(names, began, color="#e0e0e0", label="before engine start (Ray start-up, actor placement)")
    ax.barh(names, init, left=began, color="#1565c0", label="engine init")
    ax.barh(names, compile_, left=[b + a for b, a in zip(began, init, strict=True)], color="#64b5f6",
            label="schema compile" + (f" ({schemas} schemas)" if schemas > 1 else ""))
    for y, (b, a, c) in enumerate(zip(began, init, compile_, strict=True)):
        ax.text(b + a + c, y, f" {a:.1f} s + {c:.1f} s", va="center", fontsize=9)
    marks = [(first_stamp_s, "first outcome (actor)", ":"),
             (timings.get("first_output_s"), "first output at driver", "-."),
             (timings.get("total_s"), "run end", "--")]
    marks = [m for m in marks if m[0] is not None and float(m[0]) >= 0]  # a stamp before the start: skewed clocks
    top = len(names) - 0.5
    for i, (value, label, style) in enumerate(marks):
        ax.axvline(float(value), color="#424242", linestyle=style, linewidth=1)
        ax.text(float(value), top + 0.28 * (i + 1), f"{label} {float(value):.1f} s ", fontsize=8, ha="right",
                va="center", color="#424242")
    ax.set_ylim(-0.6, top + 0.28 * (len(marks) + 1))
    ends = [b + a + c for b, a, c in zip(began, init, compile_, strict=True)]
    ax.set_xlim(0, max(ends + [float(m[0]) for m in marks] + [1]) * 1.04)
    ax.set_xlabel("seconds since the run started" if placed else
                  "seconds (bars: durations, from 0; lines: times since the run started)")
    ax.set_title("Start-up per actor: engine initialisation and schema compilation")
    ax.legend(loc="lower right", fontsize=8, frameon=True, framealpha=0.9)
    ax.spines[["top", "right"]].set_visible(False)
    _save(fig, path)


def chart_tokens(by_outcome: dict[str, list[int]], title: str, xlabel: str, lines: list[tuple[float, str]],
                 path: Path, empty_note: str) -> None:
    plt = _plt()
    fig, ax = plt.subplots(figsize=(10, 3.6))
    present = {k: v for k, v in by_outcome.items() if v}
    values = [x for v in present.values() for x in v]
    if values:
        high = max(values + [x for x, _ in lines])
        low = min(values)
        log = low > 0 and high / low > 20
        if log:
            import numpy as np
            from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

            edges = list(np.geomspace(max(low, 1) * 0.95, high * 1.05, 41))
            ax.set_xscale("log")
            ax.xaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
            ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: f"{x:g}"))
            ax.xaxis.set_minor_formatter(NullFormatter())
            xlabel += " (log scale)"
        else:
            # Bins end just past the limit, so outputs cut off at exactly max_tokens share the last bin.
            step = max(1, math.ceil(high / 40))
            top = int(high) + 1
            edges = [top - step * k for k in range(math.ceil(top / step), -1, -1)]
        ax.hist(list(present.values()), bins=edges, stacked=True, label=[_label(k) for k in present],
                color=[COLORS.get(k, OTHER_COLOR) for k in present])
        ax.legend(loc="best", fontsize=8, frameon=True, framealpha=0.9)
        _integer_ticks(ax)
    else:
        ax.text(0.5, 0.5, empty_note, transform=ax.transAxes, ha="center", va="center", color="#616161")
    for x, label in lines:
        ax.axvline(x, color="#b71c1c", linestyle="--", linewidth=1.5)
        ax.text(x, 0.97, f" {label} ", transform=ax.get_xaxis_transform(), color="#b71c1c", fontsize=9,
                va="top", ha="right" if values and x >= max(values) else "left",
                bbox={"facecolor": "white", "alpha": 0.85, "edgecolor": "none", "pad": 1})
    ax.set_xlabel(xlabel)
    ax.set_ylabel("documents")
    ax.set_title(title)
    ax.spines[["top", "right"]].set_visible(False)
    _save(fig, path)


def _integer_ticks(ax: Any) -> None:
    from matplotlib.ticker import MaxNLocator

    ax.yaxis.set_major_locator(MaxNLocator(integer=True))


def _save(fig: Any, path: Path) -> None:
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    _plt().close(fig)


# ---------------------------------------------------------------- per-field view, samples, profiles (pure)

RAW_LIMIT = 600  # characters of a dead letter's raw output shown before the truncation marker
LINEAGE = ("_run_id", "_schema_name", "_schema_version", "_schema_hash", "_model", "_extracted_at",
           "_prompt_tokens", "_output_tokens")


def truncate(text: str | None, limit: int = RAW_LIMIT) -> str:
    """`text` cut at `limit` characters, with a marker saying how much was cut (escaping is the template's)."""
    if text is None:
        return ""
    if len(text) <= limit:
        return text
    return text[:limit] + f" … [truncated: {len(text) - limit} more characters]"


@dataclass
class FieldError:
    path: str  # `items[*].name`; "(document)" for errors with no field path
    documents: int
    reasons: dict[str, int]
    messages: list[tuple[str, int]]  # normalised message → documents, commonest first
    examples: list[str]


def field_errors(dead: Iterable[tuple[str, str, str | None]], top: int = 3, examples: int = 3) -> list[FieldError]:
    """Which field paths fail (`error.errors[].loc`), in how many documents, why and with which messages;
    commonest first. Dead letters without a per-field error list do not appear here."""
    found: dict[str, FieldError] = {}
    messages: dict[str, Counter[str]] = {}
    for doc_id, reason, error_json in dead:
        seen: set[str] = set()
        for loc, message in _located_errors(error_json):
            path = format_loc(loc) or "(document)"
            entry = found.setdefault(path, FieldError(path, 0, {}, [], []))
            messages.setdefault(path, Counter())[normalise_message(message)] += 1
            if path in seen:
                continue
            seen.add(path)
            entry.documents += 1
            entry.reasons[reason] = entry.reasons.get(reason, 0) + 1
            if len(entry.examples) < examples:
                entry.examples.append(doc_id)
    for path, entry in found.items():
        entry.messages = messages[path].most_common(top)
    return sorted(found.values(), key=lambda e: (-e.documents, e.path))


def _located_errors(error_json: str | None) -> list[tuple[list[Any], str]]:
    try:
        error = json.loads(error_json) if error_json else None
    except json.JSONDecodeError:
        return []
    items = error.get("errors") if isinstance(error, dict) else None
    if not isinstance(items, list):
        return []
    return [(list(item.get("loc") or []), str(item.get("msg", ""))) for item in items if isinstance(item, dict)]


@dataclass
class DeadSample:
    doc_id: str
    message: str
    raw_output: str  # truncated, with a marker
    output_tokens: int | None


def dead_samples(outcomes: Sequence[RecordOutcome], per_reason: int = 3) -> dict[str, list[DeadSample]]:
    """For each reason, the first few dead letters with their raw output."""
    out: dict[str, list[DeadSample]] = {}
    for o in outcomes:
        if o.outcome == ROW:
            continue
        bucket = out.setdefault(o.outcome, [])
        if len(bucket) < per_reason:
            message = error_messages(o.error)[0][1] or "(no error recorded)"
            bucket.append(DeadSample(o.doc_id, truncate(message, 300), truncate(o.raw_output), o.output_tokens))
    return dict(sorted(out.items(), key=lambda kv: _reason_rank(kv[0])))


@dataclass
class FieldProfile:
    name: str
    type: str
    nulls: int
    total: int
    summary: str  # top values, or min / median / max, or list lengths

    @property
    def null_rate(self) -> float:
        return self.nulls / self.total if self.total else 0.0


def field_profiles(table: pa.Table | None, top: int = 3) -> list[FieldProfile]:
    """Per schema field (top-level column of the rows, lineage columns and the id left out): null rate and a
    value summary: top values for strings, min / median / max for numbers and dates, lengths for lists."""
    if table is None or table.num_columns < 2:
        return []
    profiles = []
    for name in table.column_names[1:]:
        if name in LINEAGE:
            continue
        column = table.column(name)
        values = [v for v in column.to_pylist() if v is not None]
        profiles.append(FieldProfile(name, str(column.type), table.num_rows - len(values), table.num_rows,
                                     value_summary(column.type, values, top)))
    return profiles


def value_summary(kind: pa.DataType, values: list[Any], top: int = 3) -> str:
    if not values:
        return "—"
    if pa.types.is_list(kind) or pa.types.is_large_list(kind):
        lengths = sorted(len(v) for v in values)
        return f"length min {lengths[0]} · median {lengths[len(lengths) // 2]} · max {lengths[-1]}"
    if pa.types.is_struct(kind) or pa.types.is_map(kind):
        return f"{len(values)} objects"
    if pa.types.is_boolean(kind) or pa.types.is_string(kind) or pa.types.is_large_string(kind):
        counts = Counter(str(v) for v in values).most_common(top)
        return " · ".join(f"{truncate(v, 40)} ×{n}" for v, n in counts) + \
            (f" ({len(set(map(str, values)))} distinct)" if len(values) > 1 else "")
    ordered = sorted(values)
    return f"min {ordered[0]} · median {ordered[len(ordered) // 2]} · max {ordered[-1]}"


def sample_rows(table: pa.Table | None, n: int = 5) -> tuple[list[str], list[list[str]]]:
    """The first `n` rows: column names (id and fields, lineage left out) and their values as short text."""
    if table is None or not table.num_rows:
        return [], []
    names = [c for c in table.column_names if c not in LINEAGE]
    rows = table.select(names).slice(0, n).to_pylist()
    return names, [[_cell(r[c]) for c in names] for r in rows]


def _cell(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, (dict, list)):
        return truncate(json.dumps(value, default=str, ensure_ascii=False), 200)
    return truncate(str(value), 200)


def all_rows(data: RunData) -> pa.Table | None:
    tables = [t for t in data.row_tables if t.num_rows]
    if not tables:
        return None
    try:
        return pa.concat_tables(tables, promote_options="default")
    except (pa.ArrowInvalid, TypeError):
        return tables[-1]  # partitions written under different schemas: profile the newest


# ---------------------------------------------------------------- run context and eval scores


@dataclass
class RunContext:
    prompt: str | None
    config_text: str | None
    config_note: str
    schema: dict[str, Any]
    model: str | None
    settings: list[tuple[str, str]]
    text_column: str = "text"  # the job's input.text_column, where its config still loads (else the usual name)


def run_context(record: dict[str, Any]) -> RunContext:
    """The prompt, schema, model and config the run used. The run record names its config file; that file is
    read as it is now, and said to be unchanged only when its hash still matches the record's."""
    settings = [(k, str(record.get(k))) for k in ("model", "max_tokens", "constrained", "config_hash", "input_uri",
                                                  "output_uri") if record.get(k) is not None]
    path = Path(str(record.get("config_path", "")))
    prompt = text = None
    text_column = "text"
    note = f"the config file {path} is not readable from here"
    if record.get("config_path") and path.is_file():
        text = path.read_text()
        try:
            from pipeline.config import load_config

            loaded = load_config(str(path))
            prompt, text_column = loaded.config.prompt, loaded.config.input.text_column
            same = loaded.config_hash == record.get("config_hash")
            note = (f"{path}: unchanged since the run (config hash {loaded.config_hash})" if same else
                    f"{path} as it is now, which is not what the run used: the file changed since, or the run had "
                    f"overrides (--set, --limit, --output); hash {loaded.config_hash}, the run's "
                    f"{record.get('config_hash')}")
        except Exception as exc:  # noqa: BLE001 - a config that no longer loads is still worth showing
            note = f"{path} as it is now (it no longer loads: {exc})"
    return RunContext(prompt, text, note, dict(record.get("schema") or {}), record.get("model"), settings,
                      text_column)


def eval_scores(storage: Storage, output_uri: str, run_id: str) -> dict[str, Any] | None:
    """`extract eval`'s result for the run (OUTPUT/_eval/RUN_ID/eval.json), if it was evaluated."""
    path = join(output_uri, "_eval", run_id, "eval.json")
    try:
        if not storage.exists(path):
            return None
        return json.loads(storage.read_text(path))
    except (OSError, json.JSONDecodeError, StorageError):
        return None


# ---------------------------------------------------------------- the report


@dataclass
class Report:
    data: RunData
    counts: list[tuple[str, int]]
    errors: dict[str, list[ErrorGroup]]
    bins: TimeBins
    started: datetime
    budget: TokenBudget
    startups: list[Startup]
    tokens: dict[str, dict[str, list[int]]]  # "prompt"/"output" → outcome → values
    first_stamp_s: float | None  # the earliest outcome's stamp, seconds after the run started
    field_errors: list[FieldError] = field(default_factory=list)
    dead_samples: dict[str, list[DeadSample]] = field(default_factory=dict)
    profiles: list[FieldProfile] = field(default_factory=list)
    sample: tuple[list[str], list[list[str]]] = ([], [])
    context: RunContext | None = None
    scores: dict[str, Any] | None = None
    unsure: list[Unsure] = field(default_factory=list)  # the least confident values, beside their documents


def build_report(data: RunData, top: int = 5, scores: dict[str, Any] | None = None) -> Report:
    record = data.record
    rows = all_rows(data)
    context = run_context(record)
    started = _parse_time(record.get("started_at"))
    stamps = [_as_utc(o.at) for o in data.outcomes if o.at is not None]
    if started is None:
        started = min(stamps) if stamps else datetime.now(timezone.utc)
    offsets: dict[str, list[float]] = {ROW: [], "dead letters": []}
    for o in data.outcomes:
        if o.at is not None:
            offsets[ROW if o.outcome == ROW else "dead letters"].append((_as_utc(o.at) - started).total_seconds())
    tokens: dict[str, dict[str, list[int]]] = {"prompt": {}, "output": {}}
    for o in data.outcomes:
        for kind, value in (("prompt", o.prompt_tokens), ("output", o.output_tokens)):
            if value is not None:
                tokens[kind].setdefault(o.outcome, []).append(int(value))
    for kind in tokens:
        tokens[kind] = dict(sorted(tokens[kind].items(), key=lambda kv: (kv[0] != ROW, _reason_rank(kv[0]))))
    dead = [(o.doc_id, o.outcome, o.error) for o in data.outcomes if o.outcome != ROW]
    return Report(
        data=data, counts=counts_by_outcome(data.outcomes), errors=group_errors(dead, top=top),
        bins=bin_times(offsets), started=started, budget=token_budget(record, data.outcomes),
        startups=startup_times(record, started), tokens=tokens,
        first_stamp_s=min((t for values in offsets.values() for t in values), default=None),
        field_errors=field_errors(dead), dead_samples=dead_samples(data.outcomes),
        profiles=field_profiles(rows), sample=sample_rows(rows), context=context, scores=scores,
        unsure=_unsure(data, rows, context.text_column),
    )


def _unsure(data: RunData, rows: pa.Table | None, text_column: str) -> list[Unsure]:
    """The run's least confident values with their documents' text (read from the input, when it is reachable)."""
    items = least_sure(rows)
    if not items or not data.input_files or rows is None:
        return items
    try:
        texts = read_texts(data.input_files, str(data.record.get("input_uri", "")), rows.column_names[0],
                           text_column, {i.doc_id for i in items})
    except (OSError, StorageError, pa.ArrowException, ValueError):
        return items  # the input moved: the values without their text
    return with_text(items, texts)


def write_charts(report: Report, out_dir: Path) -> dict[str, Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {name: out_dir / name for name in CHART_FILES}
    chart_outcomes(report.counts, paths["outcomes.png"])
    ready = [s.ready_s for s in report.startups if s.ready_s is not None]
    chart_throughput(report.bins, report.started, min(ready) if ready else None, paths["throughput.png"])
    chart_startup(report.startups, report.data.record.get("timings", {}), report.first_stamp_s,
                  paths["startup.png"])
    budget = report.budget
    prompt_lines = []
    if budget.max_model_len and budget.max_tokens:
        prompt_lines.append((budget.max_model_len - budget.max_tokens,
                             f"prompt budget {budget.max_model_len - budget.max_tokens} "
                             f"(max_model_len − max_tokens)"))
    chart_tokens(report.tokens["prompt"], "Prompt tokens per document", "prompt tokens", prompt_lines,
                 paths["tokens_prompt.png"], "no prompt token counts recorded")
    output_lines = [(budget.max_tokens, f"max_tokens {budget.max_tokens}")] if budget.max_tokens else []
    chart_tokens(report.tokens["output"], "Output tokens per document (truncation pressure: mass near the line)",
                 "output tokens", output_lines, paths["tokens_output.png"], "no output token counts recorded")
    return paths


def token_stats(values: Sequence[int]) -> str:
    if not values:
        return "—"
    p50, p95 = interpolated_percentile(values, 0.5), interpolated_percentile(values, 0.95)
    return f"p50 {p50:.0f} · p95 {p95:.0f} · max {max(values)}"


def near_limit(report: Report, share: float = 0.9) -> tuple[int, int]:
    """(documents whose output used at least `share` of max_tokens, documents with an output count)."""
    outputs = [x for values in report.tokens["output"].values() for x in values]
    if not report.budget.max_tokens:
        return 0, len(outputs)
    return sum(1 for x in outputs if x >= share * report.budget.max_tokens), len(outputs)


# ---------------------------------------------------------------- terminal


def print_summary(report: Report, out_dir: Path, console: Any = None) -> None:
    from rich.console import Console
    from rich.table import Table

    console = console or Console()
    record, total = report.data.record, len(report.data.outcomes) or 1
    console.print(f"[bold]run {report.data.run_id}[/bold]: {record.get('status')}  "
                  f"({record.get('name')}, model {record.get('model')}, schema "
                  f"{record.get('schema', {}).get('name')}@{record.get('schema', {}).get('version')})")
    console.print(f"  started {record.get('started_at')}  finished {record.get('finished_at')}")
    for note in report.data.notes:
        console.print(f"  [yellow]note[/yellow]: {note}")

    outcomes = Table(title="Outcomes", title_justify="left")
    outcomes.add_column("outcome")
    outcomes.add_column("documents", justify="right")
    outcomes.add_column("share", justify="right")
    for outcome, n in report.counts:
        style = "green" if outcome == ROW else None
        outcomes.add_row(_label(outcome), str(n), f"{100 * n / total:.1f}%", style=style)
    console.print(outcomes)

    if report.errors:
        errors = Table(title="Top error messages per reason", title_justify="left", show_lines=False)
        errors.add_column("reason")
        errors.add_column("message (values normalised)", overflow="fold")
        errors.add_column("docs", justify="right")
        errors.add_column("examples", overflow="fold")
        for reason, groups in report.errors.items():
            for i, g in enumerate(groups):
                errors.add_row(reason if i == 0 else "", g.pattern, str(g.documents), ", ".join(g.examples))
        console.print(errors)

    t = record.get("timings", {})
    timing = ", ".join(f"{label} {float(t[key]):.1f}s" for label, key in
                       (("engine init", "engine_init_s"), ("schema compile", "schema_compile_s"),
                        ("first output", "first_output_s"), ("generation", "generation_s"), ("total", "total_s"))
                       if t.get(key) is not None)
    console.print(f"  time     {timing or '—'}" + (f", {t['docs_per_s']:.2f} docs/s" if t.get("docs_per_s") else ""))
    console.print(f"  actors   {len(report.startups)}" + "".join(
        f"\n    {s.actor}: init {s.engine_init_s or 0:.1f}s, compile {s.schema_compile_s:.1f}s "
        f"({s.schemas} schema{'s' if s.schemas != 1 else ''})"
        + (f", ready at {s.ready_s:.1f}s" if s.ready_s is not None else "") for s in report.startups))
    prompts = [x for v in report.tokens["prompt"].values() for x in v]
    outputs = [x for v in report.tokens["output"].values() for x in v]
    hot, measured = near_limit(report)
    console.print(f"  tokens   prompt {token_stats(prompts)};  output {token_stats(outputs)}")
    console.print(f"           max_tokens {report.budget.max_tokens} ({report.budget.source}); "
                  f"{hot} of {measured} outputs used ≥90% of it")
    console.print(f"  report   {out_dir / 'report.html'}  (+ {', '.join(CHART_FILES)})")


# ---------------------------------------------------------------- HTML


def _fmt_s(value: Any) -> str:
    return "—" if value is None else f"{float(value):.1f} s"


def _env() -> Any:
    import jinja2

    return jinja2.Environment(loader=jinja2.FileSystemLoader(str(TEMPLATES)), autoescape=True,
                              undefined=jinja2.ChainableUndefined, trim_blocks=True, lstrip_blocks=True)


def _data_uri(path: Path) -> str:
    return "data:image/png;base64," + base64.b64encode(path.read_bytes()).decode("ascii")


try:
    from jinja2 import UndefinedError
except ImportError:  # pragma: no cover - jinja2 is a dependency
    UndefinedError = TypeError  # type: ignore[misc,assignment]


def _fmt_score(value: Any) -> str:
    try:
        return f"{float(value):.3f}"
    except (TypeError, ValueError, AttributeError, UndefinedError):
        return "—"  # not scored, or missing from an older eval.json


def _cards(report: Report) -> list[dict[str, str]]:
    record, total = report.data.record, len(report.data.outcomes)
    rows = dict(report.counts).get(ROW, 0)
    t = record.get("timings", {})
    truncated = dict(report.counts).get("truncated", 0)
    init = max((s.engine_init_s or 0 for s in report.startups), default=None)
    compile_ = max((s.schema_compile_s for s in report.startups), default=None)
    f1 = (report.scores or {}).get("overall", {}).get("f1")
    cards = [
        (str(total), "documents", ""),
        (f"{rows} ({100 * rows / (total or 1):.0f}%)", "rows", "good"),
        (f"{total - rows} ({100 * (total - rows) / (total or 1):.0f}%)", "dead letters", "bad" if total - rows else ""),
        (str(truncated), "truncated", "warn" if truncated else ""),
        (f"{t['docs_per_s']:.2f}" if t.get("docs_per_s") else "—", "docs / s (whole run)", ""),
        (_fmt_s(init), "engine init (slowest actor)", ""),
        (_fmt_s(compile_), "schema compile", ""),
        (_fmt_s(t.get("total_s")), "run time", ""),
    ]
    if report.scores is not None:
        cards.append((_fmt_score(f1), "F1 (extract eval)", ""))
    return [{"value": v, "label": label, "kind": kind} for v, label, kind in cards]


def query_hint(report: Report) -> str:
    """A command that runs wherever it is pasted: the job's config (for its storage settings) where it is still a
    file, with the output as an absolute path or URI; else the output folder itself."""
    record = report.data.record
    reason = next(iter(report.dead_samples), "truncated")
    sql = f"SELECT * FROM dead_letters WHERE reason = '{reason}' LIMIT 20"  # any id column, any output format
    output = report.data.output_uri if "://" in report.data.output_uri else os.path.abspath(report.data.output_uri)
    config = str(record.get("config_path") or "")
    if config and Path(config).is_absolute() and Path(config).is_file():
        return shlex.join(["extract", "query", config, "--set", f"output.uri={output}", sql])
    return shlex.join(["extract", "query", output, sql])


def render_html(report: Report, charts: dict[str, Path], index_href: str | None = None) -> str:
    from markupsafe import Markup

    data = report.data
    hot, measured = near_limit(report)
    record = {**data.record, "schema": data.record.get("schema") or {}}
    return _env().get_template("run.html.j2").render(
        run_id=data.run_id, record=record, output_uri=data.output_uri, cards=_cards(report), notes=data.notes,
        charts={name: _data_uri(path) for name, path in charts.items()}, field_errors=report.field_errors,
        dead_total=max(1, sum(n for k, n in report.counts if k != ROW)), errors=report.errors, colors=COLORS,
        other_color=OTHER_COLOR, dead_samples=report.dead_samples, query_hint=query_hint(report),
        sample_columns=report.sample[0], sample_rows=report.sample[1], profiles=report.profiles,
        scores=report.scores, fmt=_fmt_score, budget=report.budget, hot=hot, measured=measured,
        timings_table=Markup(_timings_table(report)), partitions_table=Markup(_partitions_table(data.record)),
        context=report.context, index_href=index_href, unsure=report.unsure,
        generated=f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M:%S}",
    )


def _timings_table(report: Report) -> str:
    t = report.data.record.get("timings", {})
    cells = "".join(f"<tr><td>{label}</td><td class=\"n\">{_fmt_s(t.get(key))}</td></tr>" for label, key in
                    (("engine init", "engine_init_s"), ("schema compile", "schema_compile_s"),
                     ("first output reached the driver", "first_output_s"),
                     ("generation (sum over batches)", "generation_s"), ("total", "total_s")))
    if report.first_stamp_s is not None:
        cells += (f"<tr><td>first outcome stamped by an actor</td>"
                  f"<td class=\"n\">{_fmt_s(report.first_stamp_s)}</td></tr>")
    actors = "".join(f"<tr><td>{html.escape(s.actor)}</td><td>{html.escape(s.backend or '')}</td>"
                     f"<td class=\"n\">{_fmt_s(s.engine_init_s)}</td>"
                     f"<td class=\"n\">{_fmt_s(s.schema_compile_s)}</td><td class=\"n\">{s.schemas}</td>"
                     f"<td class=\"n\">{_fmt_s(s.ready_s)}</td></tr>" for s in report.startups)
    return (f'<table class="narrow"><tr><th>run timing</th><th>seconds</th></tr>{cells}</table>'
            '<table class="narrow"><tr><th>actor</th><th>backend</th><th>engine init</th><th>schema compile</th>'
            "<th>schemas</th><th>ready at</th></tr>"
            f"{actors or '<tr><td colspan=6>no actor started (nothing to generate)</td></tr>'}</table>")


def _partitions_table(record: dict[str, Any]) -> str:
    e = html.escape
    rows = "".join(
        f"<tr><td>{e(str(p.get('partition')))}</td><td>{e(str(p.get('status')))}</td>"
        f"<td class=\"n\">{p.get('input_rows', '')}</td><td class=\"n\">{p.get('rows', '')}</td>"
        f"<td class=\"n\">{p.get('dead_letters', '')}</td><td class=\"n\">{_fmt_s(p.get('seconds'))}</td>"
        f"<td>{e(str(p.get('error') or ''))}</td></tr>" for p in record.get("partitions", []))
    return ("<table><tr><th>partition</th><th>status</th><th>input</th><th>rows</th><th>dead</th><th>seconds</th>"
            f"<th>note</th></tr>{rows}</table>")


def default_out(output_uri: str) -> Path:
    """Where the pages go without --out: ./out/report, unless that lies inside a local output (an output named
    ./out), then a folder beside the output, OUTPUT-report. Never inside the output it reports on."""
    default = Path(os.path.abspath(os.path.join("out", "report")))
    if "://" in output_uri:
        return default
    output = Path(os.path.abspath(output_uri))
    if default == output or output in default.parents:
        return output.parent / f"{output.name}-report"
    return default


def write_report(output_uri: str, out_dir: Path | None = None, run_id: str | None = None,
                 settings: S3Settings | None = None, top: int = 5, index_href: str | None = None
                 ) -> tuple[Report, Path]:
    """Load the run, write the charts and report.html into `out_dir` (default `default_out`/<run_id>)."""
    data = load_run(output_uri, run_id, settings)
    plain_run_id(data.record, data.output_uri)
    scores = eval_scores(storage_for(data.output_uri, settings), data.output_uri, data.run_id)
    report = build_report(data, top=top, scores=scores)
    out_dir = out_dir or default_out(output_uri) / data.run_id
    charts = write_charts(report, out_dir)
    (out_dir / "report.html").write_text(render_html(report, charts, index_href))
    return report, out_dir


# ---------------------------------------------------------------- the index of every run


@dataclass
class RunLine:
    run_id: str
    started: str
    status: str
    documents: int
    rows: int
    dead: int
    dead_rate: str
    reasons: str
    f1: str
    href: str | None = None
    note: str = ""
    dead_rate_value: float | None = None
    f1_value: float | None = None


def run_line(record: dict[str, Any], scores: dict[str, Any] | None) -> RunLine:
    documents = int(record.get("input_rows") or 0)
    dead = int(record.get("dead_letters") or 0)
    reasons = sorted((record.get("dead_letters_by_reason") or {}).items(), key=lambda kv: -kv[1])
    f1 = (scores or {}).get("overall", {}).get("f1")
    rate = dead / documents if documents else None
    return RunLine(
        run_id=str(record.get("run_id")), started=str(record.get("started_at", ""))[:19].replace("T", " "),
        status=str(record.get("status")), documents=documents, rows=int(record.get("rows") or 0), dead=dead,
        dead_rate="—" if rate is None else f"{100 * rate:.1f}%",
        reasons=", ".join(f"{r} {n}" for r, n in reasons[:3]) or "—", f1=_fmt_score(f1),
        note="" if documents else f"no documents processed ({_partition_states(record)})",
        dead_rate_value=rate, f1_value=None if f1 is None else float(f1))


def chart_trend(lines: list[RunLine], path: Path) -> None:
    """Oldest to newest: documents per run (bars), dead-letter rate and F1 (lines, where known)."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(10, 3.6))
    xs = list(range(len(lines)))
    ax.bar(xs, [line.documents for line in lines], color="#cfd8dc", label="documents")
    ax.set_ylabel("documents")
    _integer_ticks(ax)
    rates = ax.twinx()
    known = [(x, line.dead_rate_value) for x, line in zip(xs, lines, strict=True) if line.dead_rate_value is not None]
    if known:
        rates.plot([x for x, _ in known], [100 * v for _, v in known], "o-", color=COLORS["semantic_invalid"],
                   label="dead-letter rate %")
    scored = [(x, line.f1_value) for x, line in zip(xs, lines, strict=True) if line.f1_value is not None]
    if scored:
        rates.plot([x for x, _ in scored], [100 * v for _, v in scored], "s--", color=COLORS[ROW], label="F1 × 100")
    rates.set_ylim(0, 105)
    rates.set_ylabel("percent")
    ax.set_xticks(xs)
    ax.set_xticklabels([line.started[5:16] for line in lines], rotation=30, ha="right", fontsize=8)
    ax.set_xlabel("run start (UTC), oldest to newest")
    handles, labels = ax.get_legend_handles_labels()
    more_handles, more_labels = rates.get_legend_handles_labels()
    ax.legend(handles + more_handles, labels + more_labels, loc="upper left", fontsize=8, frameon=False)
    ax.set_title("Runs over time: documents, dead-letter rate and F1")
    _save(fig, path)


def write_index(output_uri: str, out_dir: Path | None = None, settings: S3Settings | None = None, top: int = 5
                ) -> tuple[Path, list[RunLine], Report | None]:
    """OUT/index.html: every run in the output, newest first, each linking to its page OUT/<run_id>/report.html
    (written here for every run that processed documents). Returns the index, its lines, and the report of
    the newest run that did work (for the terminal summary)."""
    output_uri = output_uri.rstrip("/")
    storage = storage_for(output_uri, settings)
    records = list_runs(storage, output_uri)
    if not records:
        raise ReportError(f"no run records under {output_uri}/_runs: is {output_uri} a job's output folder?")
    for record in records:
        plain_run_id(record, output_uri)
    out_dir = out_dir or default_out(output_uri)
    out_dir.mkdir(parents=True, exist_ok=True)
    lines, newest = [], None
    for record in records:
        run_id = str(record.get("run_id"))
        line = run_line(record, eval_scores(storage, output_uri, run_id))
        if line.documents:
            try:
                report, _ = write_report(output_uri, out_dir / run_id, run_id, settings, top, "../index.html")
                line.href = f"{run_id}/report.html"
                newest = report
            except ReportError as exc:
                line.note = str(exc)
        lines.append(line)
    trend = out_dir / "trend.png"
    chart_trend(lines, trend)
    page = _env().get_template("index.html.j2").render(
        output_uri=output_uri, runs=list(reversed(lines)), trend=_data_uri(trend),
        generated=f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M:%S}")
    (out_dir / "index.html").write_text(page)
    return out_dir / "index.html", lines, newest
