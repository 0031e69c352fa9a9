"""Calibration of `_confidence`: from the raw joint probability of a leaf's tokens to the chance the leaf is right,
fitted on a gold set the user gives (`extract eval --fit-calibration FILE`), applied on the actor with
`output.calibration: FILE`.

Two kinds of file:
- format 1, per field an isotonic map of the raw confidence (`isotonic`). A monotone map of one score keeps its
  order, so within a field it cannot tell right from wrong any better than the raw confidence; it only puts the
  fields on one scale.
- format 2 (what `--fit-calibration` writes), a logistic model of each leaf from what the row itself says about
  it (`leaf_features`), no gold needed at run time:
  - `confidence`: the raw confidence, as log-odds;
  - `field`: the field's share right in the gold, as smoothed log-odds (a field the gold lacks takes all fields');
  - `repeats`: the value is also another leaf's value in the same row (a due date that copies the issue date,
    a customer that copies the vendor);
  - `value`: how often values like this one were right in this field: for a field with few distinct values in
    the gold (a category, a flag, a currency) per value, else per shape (`shape`: `ACM-2026-7186` → `A-9-9`),
    smoothed log-odds against the field's;
  - `order`: a list item whose place in the list is not its place in the document (`_spans`): the list is out of
    the document's order, which a gold list in the document's order scores as wrong;
  - `label` and `other_label`: the document writes the value after a label on its line (`Order #: BL8449-1`,
    `Submitted: 2026-01-20`), and the label shares a word with the leaf's name (`order_number`), or does not
    (`order_date` from `Submitted:`). Forms, e-mail headers and contact forms label their values; a value the
    model took from under another field's label is often the wrong one;
  - `mention`, for a field of few distinct values (a category, a flag): whether the document's words agree with
    the value (`refund_requested: true` where it writes "refund"; `billing` where it writes "bill..."). The small
    model says `true` to almost every flag; the document often says otherwise;
  - `place`: how often the field's values were right in the gold when written under the same label (`Date:` of an
    e-mail's header for an `order_date`, `Purchase date:`, none), smoothed log-odds against the field's;
  Files written before a feature read as weight 0 for it (and without places, as none).
  The model's weights are fitted by L2-regularised logistic regression (Newton's method; a few features, so no
  library is needed).
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from schemas.labels import field_words, label_before, labelled, name_words
from schemas.spans import leaves

MIN_POINTS = 12  # isotonic (format 1): a field with fewer scored leaves uses the map fitted on all fields together
POOLED = "*"
MIN_CATEGORICAL = 8  # a field with fewer leaves in the gold is not told a category by its few distinct values
FEATURES = ("confidence", "field", "repeats", "value", "order", "label", "other_label", "mention", "place")
# a format-2 file may lack these (written before them): weight 0, as without them
LATER_FEATURES = ("label", "other_label", "mention", "place")
L2 = 0.1  # the weights' penalty (not the bias's)
SMOOTHING = 4.0  # pseudo-leaves pulling a field's (or a value's) share right toward the wider share
_EPS = 1e-4


def field_of(path: str) -> str:
    """A concrete leaf path's field: list indexes dropped (`items[2].sku` → `items[].sku`), as eval names fields."""
    return re.sub(r"\[\d+\]", "[]", path)


# --------------------------------------------------------------------------------------------------
# Format 1: per-field isotonic maps


def isotonic(points: Sequence[tuple[float, bool]]) -> tuple[list[float], list[float]]:
    """Pool-adjacent-violators: knots (raw confidence, calibrated) of the non-decreasing step function that best
    fits correctness by least squares; each block's knot at its mean raw confidence."""
    blocks: list[list[float]] = []  # [sum_x, sum_y, n]
    for x, ok in sorted(points, key=lambda p: p[0]):
        blocks.append([x, float(ok), 1.0])
        while len(blocks) > 1 and blocks[-2][1] / blocks[-2][2] >= blocks[-1][1] / blocks[-1][2]:
            sx, sy, n = blocks.pop()
            blocks[-1][0] += sx
            blocks[-1][1] += sy
            blocks[-1][2] += n
    return [round(b[0] / b[2], 6) for b in blocks], [round(b[1] / b[2], 6) for b in blocks]


def _interpolate(xs: Sequence[float], ys: Sequence[float], x: float) -> float:
    if not xs:
        return x
    if x <= xs[0]:
        return ys[0]
    if x >= xs[-1]:
        return ys[-1]
    lo, hi = 0, len(xs) - 1
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if xs[mid] <= x:
            lo = mid
        else:
            hi = mid
    span = xs[hi] - xs[lo]
    return ys[lo] + (ys[hi] - ys[lo]) * ((x - xs[lo]) / span if span else 0.0)


# --------------------------------------------------------------------------------------------------
# Format 2: what the row says about each leaf


@dataclass(frozen=True)
class Leaf:
    """What a row says about one of its leaves, at run time as in `extract eval` (no gold)."""

    confidence: float  # raw
    text: str  # the value, normalised (`norm`)
    shape: str  # its shape (`shape`)
    repeats: bool  # another leaf of the row holds the same value
    out_of_order: bool  # a list item the document writes at another place in the list's order
    label: int = 0  # 1: the document labels the value with a word of the leaf's name; -1: with another label
    mention: int = 0  # 1: the document's words agree with the value (`mention`); -1: they do not; 0: no document
    place: str = ""  # the words of the label the value is written under (`place`); "" none or no document


def logit(p: float) -> float:
    p = min(max(p, _EPS), 1 - _EPS)
    return math.log(p / (1 - p))


def _sigmoid(z: float) -> float:
    return 1 / (1 + math.exp(-z)) if z >= 0 else math.exp(z) / (1 + math.exp(z))


def norm(value: Any) -> str:
    """A value as text for comparing values (`2026-01-30` whether a date or its ISO string)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value).strip().casefold()


def shape(value: Any) -> str:
    """A value's shape: runs of capitals, lower-case letters and digits as A, a and 9, the first 12 characters."""
    text = re.sub(r"\d+", "9", re.sub(r"[a-z]+", "a", re.sub(r"[A-Z]+", "A", str(value))))
    return text[:12]


_LAST_INDEX = re.compile(r"^(.*)\[(\d+)\]([^\[]*)$")


def _starts(spans: Mapping[str, Any] | None) -> dict[str, int]:
    """Each spanned leaf's first offset; spans as `record_spans` gives them ((start, end) pairs) or as the
    `_spans` column reads back ({start, end} structs)."""
    out = {}
    for path, places in (spans or {}).items():
        if places:
            first = places[0]
            out[path] = int(first["start"] if isinstance(first, Mapping) else first[0])
    return out


def _out_of_order(paths: Sequence[str], starts: dict[str, int]) -> set[str]:
    """The list items (a path's last index) whose rank by document offset differs from their rank in the list,
    among the items of one list that the document writes."""
    lists: dict[tuple[str, str], list[tuple[int, str]]] = {}
    for path in paths:
        match = _LAST_INDEX.match(path)
        if match and path in starts:
            lists.setdefault((match.group(1), match.group(3)), []).append((int(match.group(2)), path))
    out = set()
    for items in lists.values():
        by_index = [p for _, p in sorted(items)]
        by_place = sorted(by_index, key=lambda p: (starts[p], by_index.index(p)))
        out.update(p for p, q in zip(by_index, by_place, strict=True) if p != q)
    return out


def label_agreement(path: str, starts: Mapping[str, int], document: str | None) -> int:
    """1 if the document labels the leaf's first place with a word of its name (the path's last two names,
    `vendor.name` → vendor, name), -1 if with a label of other words, 0 without a label, a place or the text."""
    start = starts.get(path)
    if document is None or start is None or not 0 <= start <= len(document):
        return 0
    label = label_before(document, start)
    if label is None:
        return 0
    names = [part for part in re.sub(r"\[\d+\]", "", path).split(".") if part][-2:]
    return 1 if field_words(names) & name_words(label) else -1


def mention(path: str, value: Any, words: set[str] | None) -> int:
    """Whether a document's words (`name_words` of its text) agree with a leaf's value: a flag (`refund_requested`)
    agrees when it is true and the document writes a word of the flag's name (`refund`), or false and it writes
    none; a text value (`billing`, `not_delivered`) when the document writes one of its words. 1 agrees, -1 does
    not, 0: no document or no words to look for. The leaf model reads it for fields of few distinct values only
    (a category, a flag): a name or an address that grounding copied from the document always agrees."""
    if words is None or value is None:
        return 0
    if isinstance(value, bool):
        name = re.sub(r"\[\d+\]", "", path).rsplit(".", 1)[-1]
        own = name_words(name)
        return 0 if not own else 1 if bool(own & words) == value else -1
    own = name_words(str(value))
    return 0 if not own else 1 if own & words else -1


def place(start: int | None, regions: Sequence[tuple[set[str], int, int]]) -> str:
    """The label a value is written under, as its sorted words (`date`, `date purc`, `from`): the labelled value of
    the document (`labels.labelled`) whose text holds the value's first place; "" where none does."""
    if start is None:
        return ""
    for words, lo, hi in regions:
        if lo <= start < hi:
            return " ".join(sorted(words))
    return ""


def leaf_features(confidence: Mapping[str, float], record: Mapping[str, Any] | None,
                  spans: Mapping[str, Any] | None, document: str | None = None) -> dict[str, Leaf]:
    """Concrete leaf path → `Leaf`, for each leaf with a confidence. `record` is the row's record (its values);
    `spans` its `_spans` (None without a document: no leaf is out of order); `document` its text (None: no
    leaf is labelled)."""
    values = dict(leaves(record or {}, booleans=True))
    texts = {path: norm(v) for path, v in values.items() if not isinstance(v, bool)}
    counts: dict[str, int] = {}
    for text in texts.values():
        counts[text] = counts.get(text, 0) + 1
    starts = _starts(spans)
    disordered = _out_of_order(list(confidence), starts)
    words = name_words(document) if document is not None else None
    regions = labelled(document) if document is not None else []
    out = {}
    for path, conf in confidence.items():
        value = values.get(path)
        text = norm(value) if value is not None else ""
        out[path] = Leaf(confidence=float(conf), text=text, shape=shape(value) if value is not None else "",
                         repeats=path in texts and counts.get(texts[path], 0) > 1, out_of_order=path in disordered,
                         label=label_agreement(path, starts, document), mention=mention(path, value, words),
                         place=place(starts.get(path), regions))
    return out


@dataclass(frozen=True)
class FieldPrior:
    prior: float  # log-odds of the field's share right
    categorical: bool  # values keyed by value (few distinct ones) rather than by shape
    values: dict[str, float] = field(default_factory=dict)  # key → log-odds against `prior`
    places: dict[str, float] = field(default_factory=dict)  # the label written before it → log-odds against `prior`

    def key(self, leaf: Leaf) -> str:
        return leaf.text if self.categorical else leaf.shape


def _smoothed(right: int, n: int, base: float) -> float:
    return logit((right + SMOOTHING * base) / (n + SMOOTHING))


def _shares_by(items: Sequence[tuple[Leaf, bool]], key: Callable[[Leaf], str], prior: float) -> dict[str, float]:
    """A field's leaves grouped by `key`: each group's share right, as smoothed log-odds against the field's
    (`prior`)."""
    groups: dict[str, list[bool]] = {}
    for leaf, ok in items:
        groups.setdefault(key(leaf), []).append(ok)
    share = _sigmoid(prior)
    return {k: round(_smoothed(sum(oks), len(oks), share) - prior, 6) for k, oks in groups.items()}


@dataclass(frozen=True)
class LeafModel:
    """Format 2: a logistic model of a leaf's chance of being right (module docstring)."""

    weights: dict[str, float]  # "bias" and each of FEATURES
    prior: float  # log-odds of all fields' share right: a field the gold lacks
    fields: dict[str, FieldPrior]

    def features(self, name: str, leaf: Leaf) -> list[float]:
        known = self.fields.get(name)
        prior = known.prior if known else self.prior
        value = known.values.get(known.key(leaf), 0.0) if known else 0.0
        mentioned = float(leaf.mention) if known and known.categorical else 0.0
        placed = known.places.get(leaf.place, 0.0) if known else 0.0
        return [1.0, logit(leaf.confidence), prior, float(leaf.repeats), value, float(leaf.out_of_order),
                float(leaf.label > 0), float(leaf.label < 0), mentioned, placed]

    def predict(self, path: str, leaf: Leaf) -> float:
        w = [self.weights.get(k, 0.0) for k in ("bias", *FEATURES)]
        return round(_sigmoid(sum(a * b for a, b in zip(w, self.features(field_of(path), leaf), strict=True))), 6)

    @classmethod
    def fit(cls, points: Sequence[tuple[str, str, Leaf, bool]]) -> LeafModel:
        """Fit on (document id, field, leaf, right) points: the field and value tables by counting over all of them;
        the weights on features whose tables were counted on the other half of the documents (`fold`), so a weight
        says how far a table holds on documents it did not count (a table's own documents would overrate it)."""
        tables = cls.tables([(name, leaf, ok) for _, name, leaf, ok in points])
        rows: list[list[float]] = []
        targets: list[float] = []
        halves = [[p for p in points if fold(p[0] + "#inner") == k] for k in range(2)]
        for k in range(2):
            counted = tables if not halves[1 - k] else cls.tables([(n, leaf, ok) for _, n, leaf, ok in halves[1 - k]])
            rows += [counted.features(name, leaf) for _, name, leaf, _ in halves[k]]
            targets += [float(ok) for *_, ok in halves[k]]
        w = _newton(rows, targets)
        return cls({k: round(v, 6) for k, v in zip(("bias", *FEATURES), w, strict=True)}, tables.prior, tables.fields)

    @classmethod
    def tables(cls, points: Sequence[tuple[str, Leaf, bool]]) -> LeafModel:
        """The field and value tables of (field, leaf, right) points, without weights."""
        share = (sum(ok for _, _, ok in points) + 1) / (len(points) + 2)
        by_field: dict[str, list[tuple[Leaf, bool]]] = {}
        for name, leaf, ok in points:
            by_field.setdefault(name, []).append((leaf, ok))
        fields = {}
        for name, items in by_field.items():
            right = sum(ok for _, ok in items)
            prior = _smoothed(right, len(items), share)
            texts = {leaf.text for leaf, _ in items}
            # few distinct values among enough leaves to say so (a category), or a flag's true and false
            categorical = texts <= {"true", "false"} or len(items) >= MIN_CATEGORICAL and len(texts) <= len(items) // 4
            base = FieldPrior(prior, categorical)
            values = _shares_by(items, base.key, prior)
            places = _shares_by(items, lambda leaf: leaf.place, prior)
            fields[name] = FieldPrior(round(prior, 6), categorical, values, places)
        return cls({}, round(logit(share), 6), fields)

    def to_json(self) -> dict[str, object]:
        return {"weights": self.weights, "prior": self.prior,
                "fields": {k: {"prior": f.prior, "categorical": f.categorical, "values": f.values,
                               "places": f.places} for k, f in self.fields.items()}}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> LeafModel:
        weights, prior, fields = data.get("weights"), data.get("prior"), data.get("fields")
        later = set(LATER_FEATURES) - set(weights) if isinstance(weights, dict) else set()
        if later and set(weights) | later == {"bias", *FEATURES} and \
                all(LATER_FEATURES.index(k) >= len(LATER_FEATURES) - len(later) for k in later):
            weights = {**weights, **dict.fromkeys(later, 0.0)}  # written before them: as without them
        if not (isinstance(weights, dict) and set(weights) == {"bias", *FEATURES}
                and all(isinstance(v, int | float) for v in weights.values())):
            raise ValueError(f"format 2: weights must be numbers for bias and {', '.join(FEATURES)}")
        if not isinstance(prior, int | float) or not isinstance(fields, dict):
            raise ValueError("format 2: prior must be a number and fields an object")
        out = {}
        for name, f in fields.items():
            values = f.get("values") if isinstance(f, dict) else None
            if not (isinstance(f, dict) and isinstance(f.get("prior"), int | float)
                    and isinstance(f.get("categorical"), bool) and isinstance(values, dict)
                    and all(isinstance(v, int | float) for v in values.values())):
                raise ValueError(f"format 2: field {name!r} needs a prior (number), categorical (true/false) and "
                                 "values (key → number)")
            places = f.get("places", {})  # absent in files written before them
            if not (isinstance(places, dict) and all(isinstance(v, int | float) for v in places.values())):
                raise ValueError(f"format 2: field {name!r}: places must map labels to numbers")
            out[name] = FieldPrior(float(f["prior"]), f["categorical"], {str(k): float(v) for k, v in values.items()},
                                   {str(k): float(v) for k, v in places.items()})
        return cls({k: float(v) for k, v in weights.items()}, float(prior), out)


def fold(doc_id: str, folds: int = 2) -> int:
    """A document's fold: by a hash of its id, so a rerun splits the gold the same way."""
    return int(hashlib.sha256(doc_id.encode()).hexdigest(), 16) % folds


def _newton(rows: list[list[float]], y: list[float], iterations: int = 30) -> list[float]:
    """Weights of an L2-regularised logistic regression (the first column, the bias, unpenalised)."""
    d = len(rows[0]) if rows else len(FEATURES) + 1
    w = [0.0] * d
    for _ in range(iterations):
        grad = [L2 * w[j] if j else 0.0 for j in range(d)]
        hess = [[(L2 if i == j and i else 0.0) for j in range(d)] for i in range(d)]
        for x, target in zip(rows, y, strict=True):
            p = _sigmoid(sum(a * b for a, b in zip(w, x, strict=True)))
            r, s = p - target, max(p * (1 - p), 1e-9)
            for i in range(d):
                grad[i] += r * x[i]
                for j in range(i, d):
                    hess[i][j] += s * x[i] * x[j]
        for i in range(d):
            hess[i][i] += 1e-9
            for j in range(i):
                hess[i][j] = hess[j][i]
        step = _solve(hess, grad)
        w = [a - b for a, b in zip(w, step, strict=True)]
        if max(abs(s) for s in step) < 1e-8:
            break
    return w


def _solve(a: list[list[float]], b: list[float]) -> list[float]:
    """x with a·x = b, by Gaussian elimination with partial pivoting (a small, positive definite system)."""
    n = len(b)
    m = [row[:] + [b[i]] for i, row in enumerate(a)]
    for col in range(n):
        pivot = max(range(col, n), key=lambda r: abs(m[r][col]))
        m[col], m[pivot] = m[pivot], m[col]
        if abs(m[col][col]) < 1e-12:
            continue
        for r in range(col + 1, n):
            f = m[r][col] / m[col][col]
            for c in range(col, n + 1):
                m[r][c] -= f * m[col][c]
    x = [0.0] * n
    for r in range(n - 1, -1, -1):
        if abs(m[r][r]) < 1e-12:
            continue
        x[r] = (m[r][n] - sum(m[r][c] * x[c] for c in range(r + 1, n))) / m[r][r]
    return x


# --------------------------------------------------------------------------------------------------
# The calibration a job reads


@dataclass(frozen=True)
class Calibrator:
    """Format 1: per field, knots of an isotonic map (`isotonic`), `POOLED` for fields fitted on too few leaves.
    Format 2: a `LeafModel`. `row` calibrates a row's leaves (what the actor does); `__call__` one leaf without its
    row (format 2 then treats the leaf as neither repeated nor out of order)."""

    maps: dict[str, tuple[list[float], list[float]]] = field(default_factory=dict)
    model: LeafModel | None = None

    @classmethod
    def fit(cls, by_field: dict[str, list[tuple[float, bool]]]) -> Calibrator:
        """Format 1, from (raw confidence, right) points per field."""
        pooled = [p for points in by_field.values() for p in points]
        maps = {POOLED: isotonic(pooled)} if pooled else {}
        maps.update({name: isotonic(points) for name, points in by_field.items() if len(points) >= MIN_POINTS})
        return cls(maps)

    @classmethod
    def fit_leaves(cls, points: Sequence[tuple[str, str, Leaf, bool]]) -> Calibrator:
        """Format 2, from (document id, field, `Leaf`, right) points."""
        return cls(model=LeafModel.fit(points))

    def __call__(self, path: str, confidence: float) -> float:
        if self.model is not None:
            return self.model.predict(path, Leaf(confidence, "", "", False, False))
        knots = self.maps.get(field_of(path)) or self.maps.get(POOLED)
        return round(_interpolate(*knots, confidence), 6) if knots else confidence

    def row(self, confidence: Mapping[str, float], record: Mapping[str, Any] | None,
            spans: Mapping[str, Any] | None = None, document: str | None = None) -> dict[str, float]:
        """A row's calibrated `_confidence`, from its raw one, its record, its `_spans` and its document."""
        if self.model is None:
            return {path: self(path, c) for path, c in confidence.items()}
        features = leaf_features(confidence, record, spans, document)
        return {path: self.model.predict(path, features[path]) for path in confidence}

    def to_json(self) -> dict[str, object]:
        if self.model is not None:
            return {"format": 2, "model": "logistic", **self.model.to_json()}
        return {"format": 1, "fields": {k: {"raw": xs, "calibrated": ys} for k, (xs, ys) in self.maps.items()}}

    @classmethod
    def from_json(cls, data: dict[str, object]) -> Calibrator:
        fmt = data.get("format") if isinstance(data, dict) else None
        if fmt == 2:
            if data.get("model") != "logistic":
                raise ValueError("calibration file of format 2 without model: logistic")
            return cls(model=LeafModel.from_json(data))
        fields = data.get("fields") if isinstance(data, dict) else None
        if fmt != 1 or not isinstance(fields, dict):
            known = f" of format {fmt}, which this version cannot read (it reads 1 and 2)" \
                if isinstance(fmt, int) and not isinstance(fmt, bool) and fmt > 2 else ""
            raise ValueError(f"not a calibration file{known} (write one with extract eval --fit-calibration)")
        maps = {}
        for name, knots in fields.items():
            xs, ys = knots.get("raw"), knots.get("calibrated")
            if not (isinstance(xs, list) and isinstance(ys, list) and len(xs) == len(ys)
                    and all(isinstance(v, int | float) for v in xs + ys)):
                raise ValueError(f"field {name!r}: raw and calibrated must be lists of numbers of one length")
            maps[name] = ([float(v) for v in xs], [float(v) for v in ys])
        return cls(maps)
