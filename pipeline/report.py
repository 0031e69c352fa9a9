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
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from pipeline.manifest import committed
from pipeline.storage import S3Settings, Storage, join, storage_for

ROW = "row"
REASON_ORDER = ("truncated", "semantic_invalid", "schema_violation", "invalid_json", "validator_error",
                "engine_error", "schema_invalid", "schema_unsupported", "input_too_long", "empty_input")
COLORS = {ROW: "#2e7d32", "truncated": "#ef6c00", "semantic_invalid": "#c62828", "schema_violation": "#ad1457",
          "invalid_json": "#6a1b9a", "validator_error": "#4527a0", "engine_error": "#37474f",
          "schema_invalid": "#00838f", "schema_unsupported": "#0277bd", "input_too_long": "#f9a825",
          "empty_input": "#90a4ae"}
OTHER_COLOR = "#795548"
NICE_BIN_SECONDS = (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400)
CHART_FILES = ("outcomes.png", "throughput.png", "startup.png", "tokens_prompt.png", "tokens_output.png")


class ReportError(RuntimeError):
    """The output holds nothing to report on (no run records, an unknown run id, no committed data)."""


# ---------------------------------------------------------------- loading


@dataclass
class Outcome:
    """One document's outcome, reduced to what the report needs."""

    doc_id: str
    outcome: str  # ROW or a dead-letter reason
    at: datetime | None
    prompt_tokens: int | None
    output_tokens: int | None
    error: str | None = None  # the dead letter's error JSON
    attempts: int | None = None


@dataclass
class RunData:
    record: dict[str, Any]
    outcomes: list[Outcome]
    output_uri: str
    notes: list[str] = field(default_factory=list)
    rows_have_tokens: bool = False

    @property
    def run_id(self) -> str:
        return str(self.record["run_id"])


def list_runs(storage: Storage, output_uri: str) -> list[dict[str, Any]]:
    """Every run record under OUTPUT/_runs, oldest first."""
    records = []
    for path in storage.list_files(join(output_uri, "_runs")):
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


def committed_manifests(storage: Storage, output_uri: str) -> dict[str, dict[str, Any]]:
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
    fs, path = storage.arrow_fs(), storage.arrow_path(uri)
    schema = pq.read_schema(path, filesystem=fs)
    id_column = schema.names[0]
    present = [c for c in wanted if c in schema.names]
    table = pq.read_table(path, columns=[id_column, *present], filesystem=fs)
    return table.rename_columns(["doc_id", *(wanted[c] for c in present)]), id_column


ROW_COLUMNS = {"_run_id": "run_id", "_extracted_at": "at", "_prompt_tokens": "prompt_tokens",
               "_output_tokens": "output_tokens"}
DEAD_COLUMNS = {"reason": "reason", "error": "error", "run_id": "run_id", "failed_at": "at",
                "prompt_tokens": "prompt_tokens", "output_tokens": "output_tokens", "attempts": "attempts"}


def _outcomes(table: pa.Table, outcome: str | None) -> list[Outcome]:
    columns = {name: table.column(name).to_pylist() for name in table.column_names}
    n = table.num_rows
    empty = [None] * n
    return [
        Outcome(
            doc_id=str(columns["doc_id"][i]),
            outcome=outcome or str(columns["reason"][i]),
            at=columns.get("at", empty)[i],
            prompt_tokens=columns.get("prompt_tokens", empty)[i],
            output_tokens=columns.get("output_tokens", empty)[i],
            error=columns.get("error", empty)[i],
            attempts=columns.get("attempts", empty)[i],
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
    manifests = committed_manifests(storage, output_uri)
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
        rows, _ = _read_columns(storage, _relocate(manifest["files"]["rows"], recorded_root, output_uri),
                                ROW_COLUMNS)
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


def token_budget(record: dict[str, Any], outcomes: Sequence[Outcome]) -> TokenBudget:
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


def counts_by_outcome(outcomes: Sequence[Outcome]) -> list[tuple[str, int]]:
    counts = Counter(o.outcome for o in outcomes)
    ordered = sorted((k for k in counts if k != ROW), key=_reason_rank)
    return [(ROW, counts.get(ROW, 0)), *((k, counts[k]) for k in ordered)]


def percentile(values: Sequence[int], q: float) -> float | None:
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
    if first_ready_s is not None and first_ready_s > 0:
        ax.axvspan(0, first_ready_s / divisor, color="#e3f2fd", zorder=0, label="before the first actor was ready")
    ax.set_xlabel(f"{unit} since the run started ({started:%Y-%m-%d %H:%M:%S} UTC); bins of {bins.width_s} s")
    ax.set_ylabel(f"documents per {bins.width_s} s")
    _integer_ticks(ax)
    ax.set_xlim(left=min(0.0, xs[0]) if xs else 0, right=span / divisor * 1.02)
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
    marks = [m for m in marks if m[0] is not None]
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


def build_report(data: RunData, top: int = 5) -> Report:
    record = data.record
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
    )


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
    return (f"p50 {percentile(values, 0.5):.0f} · p95 {percentile(values, 0.95):.0f} · max {max(values)}")


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

CSS = """
body{font-family:-apple-system,'Segoe UI',Roboto,'DejaVu Sans',Arial,sans-serif;color:#212121;margin:0;
  background:#fafafa}
main{max-width:1100px;margin:0 auto;padding:24px}
h1{font-size:22px;margin:0 0 4px} h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #e0e0e0;
  padding-bottom:4px}
.meta{color:#616161;font-size:13px}
.cards{display:flex;flex-wrap:wrap;gap:10px;margin:16px 0}
.card{background:#fff;border:1px solid #e0e0e0;border-radius:6px;padding:10px 12px;flex:1 1 0;min-width:96px}
.card b{display:block;font-size:20px} .card span{color:#616161;font-size:12px}
.card.bad b{color:#c62828} .card.good b{color:#2e7d32} .card.warn b{color:#ef6c00}
table{border-collapse:collapse;width:100%;background:#fff;font-size:13px}
th,td{border:1px solid #e0e0e0;padding:5px 8px;text-align:left;vertical-align:top}
table.narrow{width:auto;min-width:480px;display:inline-table;margin-right:16px}
th{background:#f5f5f5} td.n{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
code{font-size:12px;word-break:break-all}
img.chart{width:100%;height:auto;background:#fff;border:1px solid #e0e0e0;border-radius:6px;display:block;
  margin:8px 0}
.note{background:#fff8e1;border-left:4px solid #ffb300;padding:6px 10px;margin:6px 0;font-size:13px}
.warn{color:#c62828;font-weight:bold}
.dot{display:inline-block;width:10px;height:10px;border-radius:2px;margin-right:6px}
"""

# Marks the page once every chart has decoded (the headless-browser check reads these attributes), and
# puts a visible warning under a chart that failed to decode instead of leaving a silent gap.
SCRIPT = """
window.addEventListener('load', function () {
  var imgs = Array.prototype.slice.call(document.images), ok = 0, boxes = [];
  imgs.forEach(function (img) {
    var r = img.getBoundingClientRect();
    boxes.push([Math.round(r.left + window.scrollX), Math.round(r.top + window.scrollY),
                Math.round(r.width), Math.round(r.height)]);
    if (img.complete && img.naturalWidth > 0) { ok += 1; }
    else { img.insertAdjacentHTML('afterend', '<p class="warn">chart failed to load: ' + img.alt + '</p>'); }
  });
  document.body.setAttribute('data-charts-loaded', ok + '/' + imgs.length);
  document.body.setAttribute('data-chart-boxes', JSON.stringify(boxes));
  document.body.setAttribute('data-page-height', String(document.documentElement.scrollHeight));
});
"""


def _img(path: Path, alt: str) -> str:
    data = base64.b64encode(path.read_bytes()).decode("ascii")
    return f'<img class="chart" alt="{html.escape(alt)}" src="data:image/png;base64,{data}">'


def _card(value: str, label: str, kind: str = "") -> str:
    return f'<div class="card {kind}"><b>{html.escape(value)}</b><span>{html.escape(label)}</span></div>'


def _fmt_s(value: Any) -> str:
    return "—" if value is None else f"{float(value):.1f} s"


def render_html(report: Report, charts: dict[str, Path]) -> str:
    e = html.escape
    record, data = report.data.record, report.data
    total = len(data.outcomes)
    rows = dict(report.counts).get(ROW, 0)
    t = record.get("timings", {})
    hot, measured = near_limit(report)
    truncated = dict(report.counts).get("truncated", 0)
    init = max((s.engine_init_s or 0 for s in report.startups), default=None)
    compile_ = max((s.schema_compile_s for s in report.startups), default=None)
    cards = [
        _card(str(total), "documents"),
        _card(f"{rows} ({100 * rows / (total or 1):.0f}%)", "rows", "good"),
        _card(f"{total - rows} ({100 * (total - rows) / (total or 1):.0f}%)", "dead letters",
              "bad" if total - rows else ""),
        _card(str(truncated), "truncated", "warn" if truncated else ""),
        _card(f"{t['docs_per_s']:.2f}" if t.get("docs_per_s") else "—", "docs / s (whole run)"),
        _card(_fmt_s(init), "engine init (slowest actor)"),
        _card(_fmt_s(compile_), "schema compile"),
        _card(_fmt_s(t.get("total_s")), "run time"),
    ]
    parts = [
        f"<h1>Run report: {e(data.run_id)}</h1>",
        f'<div class="meta">job <b>{e(str(record.get("name")))}</b> · status <b>{e(str(record.get("status")))}</b>'
        f' · model {e(str(record.get("model")))} · schema {e(str(record.get("schema", {}).get("name")))}@'
        f'{e(str(record.get("schema", {}).get("version")))} · started {e(str(record.get("started_at")))} · '
        f'output <code>{e(data.output_uri)}</code></div>',
        f'<div class="cards">{"".join(cards)}</div>',
        *(f'<div class="note">{e(note)}</div>' for note in data.notes),
        "<h2>Outcomes</h2>",
        _img(charts["outcomes.png"], "outcomes by reason"),
        "<h2>Top error messages per reason</h2>",
        '<p class="meta">Numbers, dates and hex ids are replaced by &lt;n&gt;, &lt;date&gt;, &lt;hex&gt; so '
        "that one cause groups together; a document with several errors counts under each. Look an example up "
        "with <code>extract query</code> on the dead_letters view.</p>",
        _errors_table(report),
        "<h2>Throughput over time</h2>",
        _img(charts["throughput.png"], "throughput over time"),
        "<h2>Start-up: engine initialisation and schema compilation</h2>",
        _img(charts["startup.png"], "start-up times"),
        _timings_table(report),
        "<h2>Tokens</h2>",
        f'<p class="meta">max_tokens <b>{e(str(report.budget.max_tokens))}</b> (from {e(report.budget.source)});'
        f" {hot} of {measured} outputs used at least 90% of it. Outputs piled against the line were cut off "
        "or nearly so: raise <code>model.max_tokens</code>, or bound the schema's strings and arrays.</p>",
        _img(charts["tokens_output.png"], "output token histogram"),
        _img(charts["tokens_prompt.png"], "prompt token histogram"),
        "<h2>Partitions</h2>",
        _partitions_table(record),
        f'<p class="meta">generated {datetime.now(timezone.utc):%Y-%m-%d %H:%M:%S} UTC by <code>extract report'
        f"</code> from <code>{e(data.output_uri)}/_runs/{e(data.run_id)}.json</code></p>",
    ]
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{e(data.run_id)}: run report</title><style>{CSS}</style></head>\n"
            f"<body><main>\n{chr(10).join(parts)}\n</main><script>{SCRIPT}</script></body></html>\n")


def _errors_table(report: Report) -> str:
    if not report.errors:
        return '<p class="meta">No dead letters.</p>'
    e = html.escape
    out = ["<table><tr><th>reason</th><th>message (values normalised)</th><th>docs</th><th>example ids</th>"
           "<th>one message as written</th></tr>"]
    for reason, groups in report.errors.items():
        for i, g in enumerate(groups):
            cell = (f'<td rowspan="{len(groups)}"><span class="dot" style="background:'
                    f'{COLORS.get(reason, OTHER_COLOR)}"></span>{e(reason)}</td>') if i == 0 else ""
            out.append(f"<tr>{cell}<td><code>{e(g.pattern)}</code></td><td class=\"n\">{g.documents}</td>"
                       f"<td>{e(', '.join(g.examples))}</td><td>{e(g.sample[:MAX_MESSAGE])}</td></tr>")
    out.append("</table>")
    return "".join(out)


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


def write_report(output_uri: str, out_dir: Path | None = None, run_id: str | None = None,
                 settings: S3Settings | None = None, top: int = 5) -> tuple[Report, Path]:
    """Load the run, write the charts and report.html into `out_dir` (default ./out/report/<run_id>)."""
    data = load_run(output_uri, run_id, settings)
    report = build_report(data, top=top)
    out_dir = out_dir or Path("out") / "report" / data.run_id
    charts = write_charts(report, out_dir)
    (out_dir / "report.html").write_text(render_html(report, charts))
    return report, out_dir
