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
"""

from __future__ import annotations

import json
import math
import unicodedata
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from datetime import date, datetime, time, timezone
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from pipeline.config import LoadedConfig
from pipeline.output.layout import OutputLayout
from pipeline.output.manifest import committed
from pipeline.output.tables import read_columns
from pipeline.storage import Storage, join, storage_for
from pipeline.tools.calibration import Calibration, Calibrator, calibration, cross_fitted
from pipeline.tools.calibration import markdown as calibration_markdown
from schemas.contract import RECORD_COLUMN
from schemas.refs import resolve_ref
from schemas.spans import join_path

TEMPORAL_FORMATS = {"date", "date-time", "time"}
KINDS = ("correct", "wrong", "missed", "spurious", "null_agree")


class EvalError(ValueError):
    """The gold file, the run or the output cannot be evaluated; the message names the problem."""


# --------------------------------------------------------------------------------------------------
# Leaf comparison


@dataclass(frozen=True)
class Tolerance:
    rel: float = 1e-6
    abs: float = 0.01


@dataclass(frozen=True)
class EvalOptions:
    tolerance: Tolerance = Tolerance()
    unordered: frozenset[str] = frozenset()  # list paths matched as sets, e.g. "items" or "order.lines"
    all_lists_unordered: bool = False

    def is_unordered(self, path: str) -> bool:
        return self.all_lists_unordered or path in self.unordered or path.removesuffix("[]") in self.unordered


def normalize_text(value: str) -> str:
    """NFKC, casefold, whitespace runs collapsed to one space, ends stripped."""
    return " ".join(unicodedata.normalize("NFKC", value).casefold().split())


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def iso(value: Any) -> str | None:
    """A date, datetime or time (or an ISO string of one) as a canonical ISO 8601 string; else None."""
    if isinstance(value, datetime):
        aware = value if value.tzinfo is not None else value.replace(tzinfo=timezone.utc)
        return aware.astimezone(timezone.utc).isoformat()
    if isinstance(value, (date, time)):
        return value.isoformat()
    if not isinstance(value, str):
        return None
    text = value.strip()
    for parse in (date.fromisoformat, datetime.fromisoformat, time.fromisoformat):
        try:
            return iso(parse(text))
        except ValueError:
            continue
    return None


def _decimal_as_float(value: Any) -> Any:
    """A Decimal, or the text of one (Pydantic writes a Decimal as "12.50"), as a float; anything else as it is."""
    if isinstance(value, (Decimal, str)):
        try:
            number = float(Decimal(value.strip() if isinstance(value, str) else value))
        except (InvalidOperation, ValueError):
            return value
        return number if math.isfinite(number) else value
    return value


def _is_temporal(value: Any) -> bool:
    return isinstance(value, (date, datetime, time))


def canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def leaf_equal(pred: Any, gold: Any, tolerance: Tolerance = Tolerance(), fmt: str | None = None) -> bool:
    """Two non-null scalars under the module's rules (text normalisation, numeric tolerance, ISO dates)."""
    if isinstance(pred, bool) or isinstance(gold, bool):
        return isinstance(pred, bool) and isinstance(gold, bool) and pred == gold
    if isinstance(pred, Decimal) or isinstance(gold, Decimal):  # a decimal column; its gold a number or "12.50"
        pred, gold = _decimal_as_float(pred), _decimal_as_float(gold)
    if _is_number(pred) and _is_number(gold):
        return math.isclose(pred, gold, rel_tol=tolerance.rel, abs_tol=tolerance.abs)
    if _is_temporal(pred) or _is_temporal(gold) or fmt in TEMPORAL_FORMATS:
        p, g = iso(pred), iso(gold)
        if p is not None and g is not None:
            return p == g
    if isinstance(pred, str) and isinstance(gold, str):
        return normalize_text(pred) == normalize_text(gold)
    return canonical(pred) == canonical(gold)


# --------------------------------------------------------------------------------------------------
# The schema, as far as scoring needs it


class SchemaView:
    """Looks up the subschema at a record path: local `$ref`s followed, `anyOf`/`oneOf`/`allOf` merged.

    Only what scoring needs: the declared keys of an object, the item schema of a list, whether a
    list is a set, and a string's `format`. Anything unresolvable reads as "unknown" (`{}`).
    """

    MAX_DEPTH = 32

    def __init__(self, root: dict[str, Any] | None) -> None:
        self.root = root if isinstance(root, dict) else {}

    def _pointer(self, ref: str) -> Any:
        node = resolve_ref(self.root, ref)
        return {} if node is None else node

    def branches(self, node: Any, depth: int = 0) -> list[dict[str, Any]]:
        """`node` and every schema it is combined with, each with its `$ref` followed."""
        if not isinstance(node, dict) or depth > self.MAX_DEPTH:
            return []
        out = [node]
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#"):
            out += self.branches(self._pointer(ref), depth + 1)
        for key in ("anyOf", "oneOf", "allOf"):
            for sub in node.get(key) or []:
                out += self.branches(sub, depth + 1)
        return out

    def declared(self, node: Any) -> set[str] | None:
        """The keys an object schema names, or None when it names none or admits others by schema."""
        keys: set[str] = set()
        named = False
        for branch in self.branches(node):
            if isinstance(branch.get("additionalProperties"), dict) or branch.get("additionalProperties") is True \
                    or branch.get("patternProperties"):
                return None
            if isinstance(branch.get("properties"), dict):
                named = True
                keys.update(branch["properties"])
        return keys if named else None

    def child(self, node: Any, key: str) -> dict[str, Any]:
        for branch in self.branches(node):
            props = branch.get("properties")
            if isinstance(props, dict) and isinstance(props.get(key), dict):
                return props[key]
        for branch in self.branches(node):
            if isinstance(branch.get("additionalProperties"), dict):
                return branch["additionalProperties"]
        return {}

    def items(self, node: Any) -> dict[str, Any]:
        for branch in self.branches(node):
            if isinstance(branch.get("items"), dict):
                return branch["items"]
        return {}

    def is_set(self, node: Any) -> bool:
        return any(branch.get("uniqueItems") is True for branch in self.branches(node))

    def format(self, node: Any) -> str | None:
        for branch in self.branches(node):
            if isinstance(branch.get("format"), str):
                return branch["format"]
        return None


# --------------------------------------------------------------------------------------------------
# Record comparison: a list of leaf events, aggregated per field path


@dataclass(frozen=True)
class Event:
    path: str
    kind: str  # one of KINDS
    absent: bool = False  # a missed value whose key the prediction lacked outright (not null)
    at: str | None = None  # the predicted leaf's concrete path (`items[2].sku`), as `_confidence` names it


def _maybe_json(value: Any) -> Any:
    """Free-form schema values are stored as JSON text in typed rows; read them back for comparison."""
    if isinstance(value, str):
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            return value
    return value


class Comparer:
    """Compares one predicted record with its gold record under one schema."""

    def __init__(self, schema: dict[str, Any] | None, options: EvalOptions) -> None:
        self.view = SchemaView(schema)
        self.options = options
        self.not_in_schema: Counter[str] = Counter()  # gold paths the schema does not declare
        self.pred_not_in_schema: Counter[str] = Counter()  # predicted paths it does not declare (not scored)

    def record(self, pred: dict[str, Any] | None, gold: dict[str, Any]) -> list[Event]:
        return self.compare(pred, gold, self.view.root, "", absent=pred is None)

    def compare(self, pred: Any, gold: Any, node: Any, path: str, absent: bool = False,
                at: str = "") -> list[Event]:
        if isinstance(gold, (dict, list)) and isinstance(pred, str):
            pred = _maybe_json(pred)
        if isinstance(pred, dict) or isinstance(gold, dict):
            if _fits(pred, dict) and _fits(gold, dict):
                return self._objects(pred, gold, node, path, absent, at)
            return self._mismatch(pred, gold, node, path, at)
        if isinstance(pred, list) or isinstance(gold, list):
            if _fits(pred, list) and _fits(gold, list):
                return self._lists(pred, gold, node, path, absent, at)
            return self._mismatch(pred, gold, node, path, at)
        if gold is None:
            return [Event(path, "null_agree" if pred is None else "spurious", at=at)]
        if pred is None:
            return [Event(path, "missed", absent)]
        equal = leaf_equal(pred, gold, self.options.tolerance, self.view.format(node))
        return [Event(path, "correct" if equal else "wrong", at=at)]

    def _mismatch(self, pred: Any, gold: Any, node: Any, path: str, at: str = "") -> list[Event]:
        """Different shapes (an object against a scalar, say): every gold leaf missed, every predicted one spurious."""
        events = [e for e in self.compare(None, gold, node, path) if e.kind != "null_agree"]
        return events + [e for e in self.compare(pred, None, node, path, at=at) if e.kind != "null_agree"]

    def _objects(self, pred: dict | None, gold: dict | None, node: Any, path: str, absent: bool,
                 at: str = "") -> list[Event]:
        declared = self.view.declared(node)
        keys = list(dict.fromkeys([*(gold or {}), *(pred or {})]))
        events: list[Event] = []
        for key in keys:
            child_path = join_path(path, key)
            if declared is not None and key not in declared:
                if gold is not None and key in gold:
                    self.not_in_schema[child_path] += 1
                if pred is not None and key in pred:
                    self.pred_not_in_schema[child_path] += 1
                continue
            key_absent = absent if pred is None else key not in pred
            events += self.compare((pred or {}).get(key), (gold or {}).get(key), self.view.child(node, key),
                                   child_path, key_absent, join_path(at, key))
        return events

    def _lists(self, pred: list | None, gold: list | None, node: Any, path: str, absent: bool,
               at: str = "") -> list[Event]:
        item_node, item_path = self.view.items(node), path + "[]"
        if pred is None or gold is None:
            return [e for i, (p, g) in enumerate(_pad(pred or [], gold or [], pred is None, gold is None))
                    for e in self.compare(p, g, item_node, item_path, absent, f"{at}[{i}]")]
        if self.view.is_set(node) or self.options.is_unordered(path):
            pairs = self._match_set(pred, gold, item_node, item_path, at)
        else:
            pairs = [(pred[i] if i < len(pred) else None, gold[i] if i < len(gold) else None, None, i)
                     for i in range(max(len(pred), len(gold)))]
        events: list[Event] = []
        for p, g, known, i in pairs:
            events += known if known is not None else self.compare(p, g, item_node, item_path, at=f"{at}[{i}]")
        return events

    def _match_set(self, pred: list, gold: list, node: Any, path: str,
                   at: str = "") -> list[tuple[Any, Any, list[Event] | None, int]]:
        """Greedy matching: the pair sharing the most correct leaves first; pairs sharing none stay apart."""
        trials: list[tuple[int, int, int, int, list[Event]]] = []
        for i, p in enumerate(pred):
            for j, g in enumerate(gold):
                events = self.compare(p, g, node, path, at=f"{at}[{i}]")
                score = sum(e.kind == "correct" for e in events)
                if score:
                    trials.append((-score, abs(i - j), i, j, events))
        trials.sort(key=lambda t: t[:4])
        used_p: set[int] = set()
        used_g: set[int] = set()
        pairs: list[tuple[Any, Any, list[Event] | None, int]] = []
        for _, _, i, j, events in trials:
            if i not in used_p and j not in used_g:
                used_p.add(i)
                used_g.add(j)
                pairs.append((pred[i], gold[j], events, i))
        pairs += [(None, g, None, -1) for j, g in enumerate(gold) if j not in used_g]
        pairs += [(p, None, None, i) for i, p in enumerate(pred) if i not in used_p]
        return pairs


def _fits(value: Any, kind: type) -> bool:
    return value is None or isinstance(value, kind)


def _pad(pred: list, gold: list, pred_none: bool, gold_none: bool) -> Iterable[tuple[Any, Any]]:
    if pred_none:
        return [(None, g) for g in gold]
    return [(p, None) for p in pred]


# --------------------------------------------------------------------------------------------------
# Aggregation


@dataclass
class FieldStats:
    gold: int = 0  # non-null gold leaves
    predicted: int = 0  # non-null predicted leaves
    correct: int = 0
    wrong: int = 0
    missed: int = 0
    spurious: int = 0
    null_agree: int = 0
    absent: int = 0  # of the missed: the prediction lacked the key (rather than holding null)

    def add(self, event: Event) -> None:
        setattr(self, event.kind, getattr(self, event.kind) + 1)
        if event.kind in ("correct", "wrong", "missed"):
            self.gold += 1
        if event.kind in ("correct", "wrong", "spurious"):
            self.predicted += 1
        if event.absent:
            self.absent += 1

    def merge(self, other: FieldStats) -> None:
        for name, value in asdict(other).items():
            setattr(self, name, getattr(self, name) + value)

    @property
    def precision(self) -> float | None:
        return _ratio(self.correct, self.predicted)

    @property
    def recall(self) -> float | None:
        return _ratio(self.correct, self.gold)

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "precision": self.precision, "recall": self.recall}


def _ratio(num: int, den: int) -> float | None:
    return round(num / den, 4) if den else None


@dataclass
class DocResult:
    doc_id: str
    status: str  # row | dead_letter
    reason: str | None
    gold: int
    predicted: int
    correct: int
    exact: bool


@dataclass
class Scores:
    """Everything `extract eval` reports, before it is written."""

    fields: dict[str, FieldStats]
    overall: FieldStats
    documents: list[DocResult]
    gold_total: int
    gold_not_in_run: list[str]
    rows_without_gold: int
    dead_letters_without_gold: int
    not_in_schema: dict[str, int]
    pred_not_in_schema: dict[str, int] = field(default_factory=dict)
    run_dead_letters_by_reason: dict[str, int] = field(default_factory=dict)
    calibration: Calibration | None = None  # leaf confidence against correctness (pipeline.tools.calibration)
    calibrated: Calibration | None = None  # the same after a per-field calibration, cross-fitted on the gold
    confidence_points: list[tuple[str, str, float, bool]] = field(default_factory=list)

    def fit_calibration(self) -> Calibrator:
        """A per-field calibrator fitted on every scored leaf (`extract eval --fit-calibration`)."""
        by_field: dict[str, list[tuple[float, bool]]] = {}
        for _, name, conf, ok in self.confidence_points:
            by_field.setdefault(name, []).append((conf, ok))
        return Calibrator.fit(by_field)

    @property
    def scored(self) -> int:
        return len(self.documents)

    def summary(self) -> dict[str, Any]:
        n = self.scored
        with_row = [d for d in self.documents if d.status == "row"]
        exact = sum(d.exact for d in self.documents)
        reasons = Counter(d.reason for d in self.documents if d.status == "dead_letter")
        o = self.overall
        f1 = (round(2 * o.precision * o.recall / (o.precision + o.recall), 4)
              if o.precision and o.recall else (0.0 if o.precision is not None and o.recall is not None else None))
        return {
            "documents": {
                "gold": self.gold_total, "scored": n, "with_row": len(with_row), "dead_letters": n - len(with_row),
                "gold_not_in_run": len(self.gold_not_in_run), "rows_without_gold": self.rows_without_gold,
                "dead_letters_without_gold": self.dead_letters_without_gold,
            },
            "overall": {
                "precision": o.precision, "recall": o.recall, "f1": f1,
                "exact_match_rate": _ratio(exact, n), "exact_match_rate_on_rows": _ratio(exact, len(with_row)),
                "coverage": _ratio(len(with_row), n), "dead_letter_rate": _ratio(n - len(with_row), n),
                "leaves": o.to_dict(),
            },
            "dead_letters_by_reason": {r: {"count": c, "rate": _ratio(c, n)} for r, c in sorted(reasons.items())},
            "run_dead_letters_by_reason": dict(sorted(self.run_dead_letters_by_reason.items())),
            "fields": {path: s.to_dict() for path, s in sorted(self.fields.items())},
            "confidence": self.calibration.as_dict() if self.calibration is not None else None,
            "confidence_calibrated": self.calibrated.as_dict() if self.calibrated is not None else None,
            "not_in_schema": dict(sorted(self.not_in_schema.items())),
            "predicted_not_in_schema": dict(sorted(self.pred_not_in_schema.items())),
            "per_document": [asdict(d) for d in self.documents],
            "gold_not_in_run": self.gold_not_in_run[:50],
        }


def score(
    golds: dict[str, dict[str, Any]],
    rows: dict[str, dict[str, Any]],
    dead_letters: dict[str, str],
    schema_for: Callable[[str], dict[str, Any] | None],
    options: EvalOptions = EvalOptions(),
    confidences: dict[str, dict[str, float]] | None = None,
) -> Scores:
    """Score `rows` (id → record) and `dead_letters` (id → reason) against `golds` (id → record); with
    `confidences` (id → the row's `_confidence`), how well they tell right leaves from wrong ones."""
    points: list[tuple[str, str, float, bool]] = []  # (document, field, confidence, correct)
    fields: dict[str, FieldStats] = {}
    overall = FieldStats()
    documents: list[DocResult] = []
    not_in_schema: Counter[str] = Counter()
    pred_not_in_schema: Counter[str] = Counter()
    missing: list[str] = []
    for doc_id, gold in golds.items():
        if doc_id not in rows and doc_id not in dead_letters:
            missing.append(doc_id)
            continue
        comparer = Comparer(schema_for(doc_id), options)
        pred = rows.get(doc_id)
        events = comparer.record(pred, gold)
        if pred is None:
            events = [e for e in events if e.kind != "null_agree"]
        doc = FieldStats()
        leaf_confidence = (confidences or {}).get(doc_id) or {}
        for event in events:
            fields.setdefault(event.path, FieldStats()).add(event)
            doc.add(event)
            if event.kind in ("correct", "wrong", "spurious") and event.at in leaf_confidence:
                points.append((doc_id, event.path, leaf_confidence[event.at], event.kind == "correct"))
        overall.merge(doc)
        not_in_schema.update(comparer.not_in_schema)
        pred_not_in_schema.update(comparer.pred_not_in_schema)
        documents.append(DocResult(
            doc_id=doc_id, status="row" if pred is not None else "dead_letter",
            reason=None if pred is not None else dead_letters[doc_id], gold=doc.gold, predicted=doc.predicted,
            correct=doc.correct, exact=pred is not None and doc.correct == doc.gold == doc.predicted,
        ))
    return Scores(
        fields=fields, overall=overall, documents=documents, gold_total=len(golds), gold_not_in_run=missing,
        rows_without_gold=sum(1 for k in rows if k not in golds),
        dead_letters_without_gold=sum(1 for k in dead_letters if k not in golds and k not in rows),
        not_in_schema=dict(not_in_schema), pred_not_in_schema=dict(pred_not_in_schema),
        run_dead_letters_by_reason=dict(Counter(dead_letters.values())),
        calibration=calibration([(c, ok) for _, _, c, ok in points]) if confidences is not None else None,
        calibrated=calibration(cross_fitted(points)) if confidences is not None and points else None,
        confidence_points=points,
    )


# --------------------------------------------------------------------------------------------------
# Gold records


def _gold_record(obj: dict[str, Any], id_column: str, where: str) -> tuple[str, dict[str, Any]]:
    """One gold entry: `{id, "record": {...}}` (or the record as JSON text), or `{id, field: value, ...}`."""
    if id_column not in obj:
        raise EvalError(f"{where}: no {id_column!r} key (the job's input.id_column)")
    doc_id = str(obj[id_column])
    if set(obj) == {id_column, RECORD_COLUMN}:
        record = obj[RECORD_COLUMN]
        if isinstance(record, str):
            try:
                record = json.loads(record)
            except json.JSONDecodeError as exc:
                raise EvalError(f"{where}: 'record' is not JSON: {exc.msg}") from None
        if not isinstance(record, dict):
            raise EvalError(f"{where}: 'record' must be an object, got {type(record).__name__}")
        return doc_id, record
    return doc_id, {k: v for k, v in obj.items() if k != id_column}


def load_gold(path: str | Path, id_column: str) -> dict[str, dict[str, Any]]:
    """Gold records by document id (as text) from JSONL (one object per line) or Parquet (one row each)."""
    path = Path(path)
    if not path.exists():
        raise EvalError(f"--gold {path}: no such file")
    entries: list[tuple[str, dict[str, Any]]] = []
    if path.suffix == ".parquet":
        try:
            table = pq.read_table(path)
        except (OSError, pa.ArrowInvalid) as exc:
            raise EvalError(f"--gold {path}: not readable Parquet: {exc}") from None
        for n, obj in enumerate(table.to_pylist(), 1):
            entries.append(_gold_record(obj, id_column, f"--gold {path} row {n}"))
    else:
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                raise EvalError(f"--gold {path} line {n}: not JSON: {exc.msg}") from None
            if not isinstance(obj, dict):
                raise EvalError(f"--gold {path} line {n}: expected an object, got {type(obj).__name__}")
            entries.append(_gold_record(obj, id_column, f"--gold {path} line {n}"))
    golds: dict[str, dict[str, Any]] = {}
    for doc_id, record in entries:
        if doc_id in golds:
            raise EvalError(f"--gold {path}: document id {doc_id!r} appears twice")
        golds[doc_id] = record
    if not golds:
        raise EvalError(f"--gold {path}: holds no records")
    return golds


# --------------------------------------------------------------------------------------------------
# A run's committed output


@dataclass
class RunOutput:
    run_ids: list[str]  # the runs that committed the scored partitions
    partitions: list[dict[str, Any]]  # their manifests
    rows: dict[str, dict[str, Any]]
    dead_letters: dict[str, str]
    schemas: dict[str, dict[str, Any]]  # per-row-schema jobs: each document's schema
    confidence: dict[str, dict[str, float]] | None = None  # rows' `_confidence`, where the files have the column


def committed_partition_manifests(loaded: LoadedConfig, storage: Storage) -> list[dict[str, Any]]:
    """The committed partitions' manifests (`pipeline.manifest.committed`), files resolved to full paths."""
    root = loaded.output_uri
    return [{**asdict(m), "files": {k: m.uri(k, root) for k in m.files}} for m in committed(storage, root)]


def _json_records(loaded: LoadedConfig, table: pa.Table, fields: list[str]) -> bool:
    """Whether rows hold the record as JSON text (a per-row-schema job) rather than typed columns."""
    if getattr(loaded.contract, "per_row", False):
        return True
    declared = SchemaView(loaded.contract.json_schema).declared(loaded.contract.json_schema) or set()
    return fields == [RECORD_COLUMN] and pa.types.is_string(table.schema.field(RECORD_COLUMN).type) \
        and RECORD_COLUMN not in declared


def rows_to_records(loaded: LoadedConfig, table: pa.Table) -> dict[str, dict[str, Any]]:
    id_column = loaded.config.input.id_column
    fields = [n for n in table.column_names if n != id_column and not n.startswith("_")]
    as_json = _json_records(loaded, table, fields)
    records: dict[str, dict[str, Any]] = {}
    for row in table.to_pylist():
        records[str(row[id_column])] = json.loads(row[RECORD_COLUMN]) if as_json else {f: row[f] for f in fields}
    return records


def _schema_value(loaded: LoadedConfig, value: Any) -> dict[str, Any] | None:
    table = getattr(loaded, "schema_table", None) or {}
    if isinstance(value, str) and value in table:
        return table[value]
    parsed = _maybe_json(value)
    return parsed if isinstance(parsed, dict) else None


def per_row_schemas(loaded: LoadedConfig, storage: Storage, partitions: list[dict[str, Any]]) -> dict[str, dict]:
    """Each document's schema, read from the scored partitions' input files (`input.schema_column`)."""
    column = getattr(loaded.config.input, "schema_column", None)
    if column is None:
        return {}
    id_column = loaded.config.input.id_column
    in_storage = storage_for(loaded.input_uri, loaded.s3_settings)
    schemas: dict[str, dict[str, Any]] = {}
    for manifest in partitions:
        for uri in manifest.get("input_files", []):
            table = read_columns(in_storage, uri, [id_column, column])
            for doc_id, value in zip(table.column(id_column).to_pylist(), table.column(column).to_pylist(),
                                     strict=True):
                schema = _schema_value(loaded, value)
                if schema is not None:
                    schemas[str(doc_id)] = schema
    return schemas


def read_output(loaded: LoadedConfig, manifests: list[dict[str, Any]]) -> RunOutput:
    storage = storage_for(loaded.output_uri, loaded.s3_settings)
    id_column = loaded.config.input.id_column
    rows: dict[str, dict[str, Any]] = {}
    dead: dict[str, str] = {}
    confidence: dict[str, dict[str, float]] | None = None
    for manifest in manifests:
        table = read_columns(storage, manifest["files"]["rows"])
        rows.update(rows_to_records(loaded, table))
        if "_confidence" in table.column_names:
            confidence = confidence if confidence is not None else {}
            for doc_id, leaves in zip(table.column(id_column).to_pylist(), table.column("_confidence").to_pylist(),
                                      strict=True):
                if leaves:
                    confidence[str(doc_id)] = dict(leaves)
        letters = read_columns(storage, manifest["files"]["dead_letters"], [id_column, "reason"])
        for doc_id, reason in zip(letters.column(id_column).to_pylist(), letters.column("reason").to_pylist(),
                                  strict=True):
            dead[str(doc_id)] = reason
    return RunOutput(run_ids=sorted({m["run_id"] for m in manifests}), partitions=manifests, rows=rows,
                     dead_letters=dead, schemas=per_row_schemas(loaded, storage, manifests), confidence=confidence)


def output_of_run(loaded: LoadedConfig, run_ids: str | list[str]) -> RunOutput:
    """The committed partitions whose manifest names one of `run_ids` (`extract eval --run ID [--run ID2]`).

    Several runs are scored together when each committed some of the partitions, e.g. one day each.
    """
    storage = storage_for(loaded.output_uri, loaded.s3_settings)
    committed = committed_partition_manifests(loaded, storage)
    manifests = []
    for run_id in [run_ids] if isinstance(run_ids, str) else run_ids:
        mine = [m for m in committed if m.get("run_id") == run_id]
        if not mine:
            if storage.exists(OutputLayout(loaded.output_uri).run_manifest(run_id)):
                raise EvalError(f"--run {run_id}: no committed partition under {loaded.output_uri} is from this "
                                "run (it committed nothing, or a later run replaced its partitions)")
            raise EvalError(f"--run {run_id}: no such run under {loaded.output_uri} "
                            f"(see {loaded.output_uri}/_runs/)")
        manifests += [m for m in mine if m not in manifests]
    return read_output(loaded, manifests)


def output_of_labels(loaded: LoadedConfig, labels: set[str], run_id: str) -> RunOutput:
    """The committed partitions a fresh run committed or skipped; a skipped one must match this config."""
    storage = storage_for(loaded.output_uri, loaded.s3_settings)
    manifests = [m for m in committed_partition_manifests(loaded, storage) if m.get("partition") in labels]
    for m in manifests:
        if m.get("run_id") != run_id and m.get("output_hash") != loaded.output_hash:
            raise EvalError(
                f"partition {m['partition']} of {loaded.output_uri} was committed by run {m['run_id']} under "
                "another model, prompt or schema, so this run skipped it: pass --force, or --output to a new folder"
            )
    if not manifests:
        raise EvalError(f"run {run_id} committed no partition under {loaded.output_uri}")
    return read_output(loaded, manifests)


def evaluate(loaded: LoadedConfig, golds: dict[str, dict[str, Any]], output: RunOutput,
             options: EvalOptions) -> Scores:
    default = loaded.contract.json_schema if not getattr(loaded.contract, "per_row", False) else None
    return score(golds, output.rows, output.dead_letters, lambda doc_id: output.schemas.get(doc_id, default),
                 options, output.confidence)


# --------------------------------------------------------------------------------------------------
# eval.json and eval.md


RULES = (
    "Strings: equal after Unicode NFKC, casefold, whitespace runs collapsed to one space, ends stripped. "
    "Numbers: equal within rel {rel:g} or abs {abs:g}; booleans are not numbers. Dates/datetimes: compared as "
    "ISO 8601 (datetimes in UTC). Absent and null both mean no value. Lists: by position unless the schema "
    "says uniqueItems or the path is unordered ({unordered}); sets are matched greedily. Precision: correct / "
    "predicted non-null leaves. Recall: correct / gold non-null leaves (a document without a row counts its "
    "gold leaves as missed). Exact match: every leaf equal. Coverage: gold documents with a row / gold "
    "documents in the run."
)


def build_report(scores: Scores, context: dict[str, Any], options: EvalOptions) -> dict[str, Any]:
    unordered = "all lists" if options.all_lists_unordered else (", ".join(sorted(options.unordered)) or "none")
    return {
        **context,
        "options": {"rel_tol": options.tolerance.rel, "abs_tol": options.tolerance.abs,
                    "unordered": sorted(options.unordered), "all_lists_unordered": options.all_lists_unordered},
        "rules": RULES.format(rel=options.tolerance.rel, abs=options.tolerance.abs, unordered=unordered),
        **scores.summary(),
    }


def _fmt(value: Any) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.3f}"
    return str(value)


def render_markdown(report: dict[str, Any]) -> str:
    docs, o = report["documents"], report["overall"]
    lines = [
        f"# extract eval: {report.get('name', '')} run {', '.join(report.get('run_ids', []))}",
        "",
        f"- config: `{report.get('config')}`; gold: `{report.get('gold')}`",
        f"- model: `{report.get('model')}`, constrained: {report.get('constrained')}, "
        f"max_tokens: {report.get('max_tokens')}",
        f"- gold documents: {docs['gold']}; scored (in the run): {docs['scored']}; with a row: {docs['with_row']}; "
        f"dead letters: {docs['dead_letters']}; gold documents not in the run: {docs['gold_not_in_run']}; "
        f"rows without gold: {docs['rows_without_gold']}",
    ]
    if report.get("config_matches_run") is False:
        lines.append("- **note:** the run was made under another model, prompt or schema than this config")
    lines += [
        "",
        "| metric | value |",
        "|---|---|",
        *(f"| {label} | {_fmt(o[key])} |" for label, key in (
            ("precision", "precision"), ("recall", "recall"), ("F1", "f1"), ("exact match", "exact_match_rate"),
            ("exact match (rows only)", "exact_match_rate_on_rows"), ("coverage", "coverage"),
            ("dead-letter rate", "dead_letter_rate"))),
        "",
        "| dead-letter reason | documents | rate |",
        "|---|---|---|",
        *(f"| {reason} | {v['count']} | {_fmt(v['rate'])} |" for reason, v in report["dead_letters_by_reason"].items()),
    ]
    if not report["dead_letters_by_reason"]:
        lines.append("| (none) | 0 | 0 |")
    run_reasons = report.get("run_dead_letters_by_reason") or {}
    if run_reasons:
        lines += ["", "All of the run's dead letters (gold or not): " + ", ".join(
            f"{reason} {count}" for reason, count in run_reasons.items())]
    lines += [
        "",
        "| field | gold | predicted | correct | wrong | missed | spurious | null=null | precision | recall |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    leaves = o["leaves"]
    for path, s in [*report["fields"].items(), ("**all leaves**", leaves)]:
        lines.append(f"| {path or '(record)'} | {s['gold']} | {s['predicted']} | {s['correct']} | {s['wrong']} | "
                     f"{s['missed']} | {s['spurious']} | {s['null_agree']} | {_fmt(s['precision'])} | "
                     f"{_fmt(s['recall'])} |")
    if report["not_in_schema"]:
        lines += ["", "Gold fields not in the schema (not scored): " + ", ".join(
            f"`{p}` ({n})" for p, n in report["not_in_schema"].items())]
    if report.get("predicted_not_in_schema"):
        lines += ["", "Predicted fields not in the schema (not scored): " + ", ".join(
            f"`{p}` ({n})" for p, n in report["predicted_not_in_schema"].items())]
    if report.get("confidence") is not None:
        lines += ["", *calibration_markdown(Calibration(**report["confidence"]))]
    if report.get("confidence_calibrated") is not None:
        lines += calibration_markdown(Calibration(**report["confidence_calibrated"]),
                                      "Confidence calibrated per field (2-fold cross-fitted on this gold)")
    lines += ["", f"Rules: {report['rules']}", ""]
    return "\n".join(lines)


def write_report(report: dict[str, Any], out_dir: str, storage: Storage) -> tuple[str, str]:
    json_path, md_path = join(out_dir, "eval.json"), join(out_dir, "eval.md")
    storage.write_text(json_path, json.dumps(report, indent=2, default=str) + "\n")
    storage.write_text(md_path, render_markdown(report))
    return json_path, md_path
