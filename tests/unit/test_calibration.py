"""`extract eval`'s confidence report: AUROC, precision at a kept share, reliability; and the leaf paths it joins."""

from __future__ import annotations

import pytest

from pipeline.tools.calibration import auroc, calibration, markdown, precision_at
from pipeline.tools.evaluate import score


def test_auroc_is_the_chance_a_right_leaf_outranks_a_wrong_one():
    assert auroc([(0.9, True), (0.8, True), (0.2, False)]) == 1.0
    assert auroc([(0.1, True), (0.9, False)]) == 0.0
    assert auroc([(0.5, True), (0.5, False)]) == 0.5  # a tie counts half
    assert auroc([(0.9, True), (0.3, False), (0.6, False), (0.4, True)]) == 0.75
    assert auroc([(0.9, True)]) is None


def test_precision_at_keeps_the_most_confident_share():
    points = [(0.9, True), (0.8, True), (0.7, False), (0.6, True), (0.1, False)]
    assert precision_at(points, 0.4) == {"precision": 1.0, "threshold": 0.8}
    assert precision_at(points, 1.0)["precision"] == 0.6
    assert precision_at([], 0.5) == {"precision": None, "threshold": None}


def test_reliability_bins_and_markdown():
    cal = calibration([(0.95, True), (0.91, False), (0.15, False), (1.0, True)])
    assert [(r["lo"], r["leaves"], r["accuracy"]) for r in cal.reliability] == [(0.1, 1, 0.0), (0.9, 3, 0.6667)]
    text = "\n".join(markdown(cal))
    assert "AUROC" in text and "| 70% |" in text


def test_eval_joins_confidence_by_the_predicted_leafs_own_path():
    gold = {"d1": {"name": "Ann", "items": [{"sku": "A"}, {"sku": "B"}]}}
    rows = {"d1": {"name": "Bob", "items": [{"sku": "A"}, {"sku": "C"}, {"sku": "D"}]}}
    confidences = {"d1": {"name": 0.2, "items[0].sku": 0.9, "items[1].sku": 0.3, "items[2].sku": 0.4}}
    scores = score(gold, rows, {}, lambda _: None, confidences=confidences)
    cal = scores.calibration
    assert (cal.leaves, cal.correct) == (4, 1)  # the spurious items[2] is a wrong leaf too
    assert cal.auroc == 1.0
    assert score(gold, rows, {}, lambda _: None).calibration is None


@pytest.mark.parametrize("unordered", [True, False])
def test_set_matched_lists_keep_the_predicted_index(unordered):
    from pipeline.tools.evaluate import EvalOptions

    gold = {"d": {"tags": ["x", "y"]}}
    rows = {"d": {"tags": ["y", "x"]}}
    conf = {"d": {"tags[0]": 0.7, "tags[1]": 0.2}}
    options = EvalOptions(all_lists_unordered=unordered)
    cal = score(gold, rows, {}, lambda _: None, options, conf).calibration
    assert cal.correct == (2 if unordered else 0) and cal.leaves == 2


def test_isotonic_calibration_is_monotone_and_fits_each_field_on_its_own():
    from workers.confidence import Calibrator, field_of, isotonic

    xs, ys = isotonic([(0.1, False), (0.2, True), (0.3, False), (0.9, True)])
    assert ys == sorted(ys) and len(xs) == len(ys) == 3  # the violating pair pooled
    total = [(c / 20, c >= 10) for c in range(20)]  # right above 0.5
    names = [(0.9, c % 2 == 0) for c in range(20)]  # a coin, however sure
    cal = Calibrator.fit({"total": total, "items[].name": names})
    assert cal("total", 0.9) == 1.0 and cal("total", 0.1) == 0.0
    assert cal("items[3].name", 0.9) == 0.5 and field_of("a[12].b[0]") == "a[].b[]"
    assert Calibrator.from_json(cal.to_json()) == cal


@pytest.mark.parametrize("bad", [{}, {"format": 1, "fields": {"x": {"raw": [0.1], "calibrated": []}}},
                                 {"format": 2, "fields": {}}])
def test_a_bad_calibration_file_is_refused(bad):
    from workers.confidence import Calibrator

    with pytest.raises(ValueError):
        Calibrator.from_json(bad)


def test_cross_fitting_maps_each_document_by_the_others_only():
    from pipeline.tools.calibration import cross_fitted

    points = [(f"d{i}", "f", 0.9 if i % 2 else 0.1, bool(i % 2)) for i in range(40)]
    mapped = cross_fitted(points)
    assert len(mapped) == 40 and auroc(mapped) == 1.0
