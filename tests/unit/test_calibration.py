"""`extract eval`'s confidence report: AUROC, precision at a kept share, reliability; and the leaf paths it joins."""

from __future__ import annotations

import pytest

from pipeline.tools.calibration import auroc, calibration, markdown, precision_at
from pipeline.tools.evaluate import score
from schemas.labels import name_words


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
    from workers.calibrator import Calibrator, field_of, isotonic

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
    from workers.calibrator import Calibrator

    with pytest.raises(ValueError):
        Calibrator.from_json(bad)


def test_leaf_features_read_repeats_shapes_and_list_order_from_the_row():
    from workers.calibrator import leaf_features, shape

    record = {"issue": "2026-01-30", "due": "2026-01-30", "total": 12.5, "paid": True, "items": ["b", "a", "c"]}
    confidence = {"issue": 0.9, "due": 0.8, "total": 0.7, "paid": 0.6, "items[0]": 0.5, "items[1]": 0.5,
                  "items[2]": 0.5}
    spans = {"issue": [(10, 20)], "due": [(10, 20)], "items[0]": [(50, 51)], "items[1]": [(40, 41)],
             "items[2]": [(60, 61)]}  # the document writes a before b: the list swapped them
    leaves = leaf_features(confidence, record, spans)
    assert leaves["due"].repeats and leaves["issue"].repeats and not leaves["total"].repeats
    assert not leaves["paid"].repeats and leaves["paid"].text == "true"
    assert [leaves[f"items[{i}]"].out_of_order for i in range(3)] == [True, True, False]
    as_read_back = {k: [{"start": s, "end": e} for s, e in v] for k, v in spans.items()}  # the _spans column
    assert leaf_features(confidence, record, as_read_back) == leaves
    assert not any(leaf.out_of_order for leaf in leaf_features(confidence, record, None).values())
    assert shape("ACM-2026-7186") == "A-9-9" and shape("a.b@x.io") == "a.a@a.a"


def _points(n_docs: int = 40):
    """Documents where the raw confidence says little, but a repeated value is always wrong and an email's shape
    tells right (a9@a.a) from wrong (a9)."""
    from workers.calibrator import leaf_features

    points = []
    for i in range(n_docs):
        record = {"name": f"Ann{i}", "email": f"ann{i}@x.io" if i % 3 else f"just{i}",
                  "alias": f"Ann{i}" if i % 2 else "Bo"}
        conf = {"name": 0.9 if i % 4 else 0.3, "email": 0.6, "alias": 0.8}
        leaves = leaf_features(conf, record, None)
        right = {"name": True, "email": bool(i % 3), "alias": not i % 2}
        points += [(f"d{i}", path, leaves[path], right[path]) for path in conf]
    return points


def test_the_leaf_model_learns_what_the_row_says_and_round_trips():
    from workers.calibrator import Calibrator, Leaf

    cal = Calibrator.fit_leaves(_points())
    assert cal.model.weights["repeats"] < 0 and cal.model.weights["value"] > 0
    rows = cal.row({"alias": 0.8, "email": 0.6}, {"name": "Zed", "alias": "Zed", "email": "zed7@y.com"})
    single = cal.row({"alias": 0.8, "email": 0.6}, {"name": "Zed", "alias": "Yan", "email": "nope3"})
    assert rows["alias"] < single["alias"]  # the repeated alias is less likely right
    assert rows["email"] > single["email"]  # an email shaped like the right ones is more likely right
    assert all(0.0 <= c <= 1.0 for c in [*rows.values(), *single.values()])
    assert cal("email", 0.6) == cal.model.predict("email", Leaf(0.6, "", "", False, False))  # without its row
    again = Calibrator.from_json(cal.to_json())
    assert again == cal and again.to_json()["format"] == 2


def test_cross_fitted_leaves_score_each_document_by_a_model_of_the_others():
    from pipeline.tools.calibration import cross_fitted_leaves

    points = _points()
    mapped = cross_fitted_leaves(points)
    raw = [(leaf.confidence, ok) for _, _, leaf, ok in points]
    assert len(mapped) == len(points) and auroc(mapped) > auroc(raw) + 0.2
    one_doc = [p for p in points if p[0] == "d1"]  # the other fold is empty: the raw confidence stays
    assert sorted(cross_fitted_leaves(one_doc)) == sorted((leaf.confidence, ok) for _, _, leaf, ok in one_doc)


@pytest.mark.parametrize(("data", "message"), [
    ({"format": 3, "model": "trees"}, "format 3, which this version cannot read"),
    ({"format": 2, "model": "logistic", "weights": {"bias": 1.0}, "prior": 0.0, "fields": {}}, "weights"),
    ({"format": 2, "model": "logistic", "prior": 0.0, "fields": {"a": {"prior": 1}},
      "weights": {k: 0.0 for k in ("bias", "confidence", "field", "repeats", "value", "order")}}, "field 'a'"),
])
def test_a_calibration_file_of_an_unknown_format_or_a_broken_model_is_refused(data, message):
    from workers.calibrator import Calibrator

    with pytest.raises(ValueError, match=message):
        Calibrator.from_json(data)


def test_eval_scores_the_leaf_model_cross_fitted_and_fits_it_on_every_leaf():
    golds, rows, conf, spans = {}, {}, {}, {}
    for i in range(30):
        golds[f"d{i}"] = {"issue": "2026-01-30", "due": "2026-03-01", "items": ["a", "b"]}
        swapped, copied = i % 3 == 0, i % 2 == 0
        rows[f"d{i}"] = {"issue": "2026-01-30", "due": "2026-01-30" if copied else "2026-03-01",
                         "items": ["b", "a"] if swapped else ["a", "b"]}
        conf[f"d{i}"] = {"issue": 0.9, "due": 0.95, "items[0]": 0.8, "items[1]": 0.8}
        spans[f"d{i}"] = {"items[0]": [(30 if swapped else 20, 31)], "items[1]": [(20 if swapped else 30, 21)]}
    scores = score(golds, rows, {}, lambda _: None, confidences=conf, spans=spans)
    assert scores.calibration.auroc < 0.7 < 0.95 < scores.calibrated.auroc
    fitted = scores.fit_calibration()
    assert fitted.to_json()["format"] == 2 and fitted.model.weights["order"] < 0


def test_a_label_before_a_value_is_read_on_its_line_only():
    from schemas.labels import label_before, name_words

    text = ("--- Contact form ---\nOrder #: BL8449-1\nName: Jane Smith, Email: jane@x.io\n"
            "Date: Sat, 04 Apr 2026\nI paid $5: it is broken\n" + "x" * 100 + " Total: 12.50")
    at = text.index
    assert label_before(text, at("BL8449-1")) == "Order"
    assert label_before(text, at("Jane")) == "Name"
    assert label_before(text, at("jane@x.io")) == "Email"  # after a separator on the same line
    assert label_before(text, at("04 Apr")) is None  # a weekday stands between the label and the value
    assert label_before(text, at("it is")) is None  # prose with a colon is not a label
    assert label_before(text, at("12.50")) is None  # 80 characters back is mid-line: not a line's start
    assert name_words("orderNumber") == {"orde", "numb"} and name_words("Purchase date") == {"purc", "date"}
    assert name_words("E-mail") == name_words("email") == {"emai"}
    assert name_words("Ship to") == {"ship"}  # a stop word is no match


def test_leaf_features_say_whether_the_documents_label_names_the_leaf():
    from workers.calibrator import leaf_features

    text = "Submitted: 2026-01-20\nPurchase date: 2026-01-11\nVendor: Acme\nnote 2026-01-11"
    record = {"order_date": "2026-01-20", "ship_date": "2026-01-11", "vendor": {"name": "Acme"}, "memo": "note"}
    spans = {"order_date": [(11, 21)], "ship_date": [(37, 47)], "vendor.name": [(56, 60)], "memo": [(61, 65)]}
    confidence = {"order_date": 0.9, "ship_date": 0.9, "vendor.name": 0.9, "memo": 0.9}
    leaves = leaf_features(confidence, record, spans, text)
    assert leaves["order_date"].label == -1  # taken from under "Submitted"
    assert leaves["ship_date"].label == 1  # "Purchase date" shares "date"
    assert leaves["vendor.name"].label == 1  # the path's last two names: vendor, name
    assert leaves["memo"].label == 0  # no label before it
    assert all(leaf.label == 0 for leaf in leaf_features(confidence, record, spans).values())  # no document


def test_the_leaf_model_learns_labels_and_reads_a_file_written_before_them():
    from workers.calibrator import FEATURES, LATER_FEATURES, Calibrator, Leaf

    golds, rows, conf, spans, documents = {}, {}, {}, {}, {}
    for i in range(40):
        right = i % 3 != 0  # a third of the dates are the message's date, under another label
        documents[f"d{i}"] = f"Submitted: 2026-02-{10 + i % 9:02d}\nOrder date: 2026-01-{10 + i % 9:02d}\n"
        golds[f"d{i}"] = {"order_date": f"2026-01-{10 + i % 9:02d}"}
        rows[f"d{i}"] = {"order_date": f"2026-0{1 if right else 2}-{10 + i % 9:02d}"}
        conf[f"d{i}"] = {"order_date": 0.8 if i % 2 else 0.6}  # says nothing of right or wrong
        spans[f"d{i}"] = {"order_date": [(34, 44)] if right else [(11, 21)]}
    without = score(golds, rows, {}, lambda _: None, confidences=conf, spans=spans)
    scores = score(golds, rows, {}, lambda _: None, confidences=conf, spans=spans, documents=documents)
    assert without.calibrated.auroc < 0.7 < 0.95 < scores.calibrated.auroc
    model = scores.fit_calibration().model
    assert model.weights["label"] > 0 > model.weights["other_label"]
    old = model.to_json()
    old["weights"] = {k: v for k, v in old["weights"].items() if k not in LATER_FEATURES}
    before = Calibrator.from_json({"format": 2, "model": "logistic", **old})
    assert set(before.model.weights) == {"bias", *FEATURES}
    assert all(before.model.weights[k] == 0.0 for k in LATER_FEATURES)
    leaf = Leaf(0.8, "2026-01-10", "9-9-9", False, False, label=1)
    assert before.model.predict("order_date", leaf) == before.model.predict("order_date", Leaf(0.8, "2026-01-10",
                                                                                               "9-9-9", False, False))


def test_mention_says_whether_the_document_speaks_of_a_flag_or_a_category():
    from workers.calibrator import leaf_features, mention

    words = name_words("I would like a refund, please. The parcel arrived damaged.")
    assert mention("refund_requested", True, words) == 1  # the document writes "refund"
    assert mention("refund_requested", False, words) == -1
    assert mention("refund_requested", True, name_words("Can I change the address?")) == -1
    assert mention("refund_requested", False, name_words("Can I change the address?")) == 1
    assert mention("issue_category", "damaged", words) == 1 and mention("issue_category", "billing", words) == -1
    assert mention("items[0].gift", True, name_words("a gift")) == 1  # the flag's own name, not its list's
    assert mention("refund_requested", True, None) == 0 and mention("category", "--", words) == 0
    record = {"refund_requested": True, "issue_category": "billing"}
    leaves = leaf_features({"refund_requested": 0.7, "issue_category": 0.4}, record, None, "Refund me now")
    assert leaves["refund_requested"].mention == 1 and leaves["issue_category"].mention == -1
    assert leaf_features({"refund_requested": 0.7}, record, None)["refund_requested"].mention == 0  # no document


def test_the_leaf_model_reads_mention_only_for_a_flag_or_a_field_of_few_values_among_many():
    from workers.calibrator import FEATURES, Leaf, LeafModel

    flag = [("refund_requested", Leaf(0.7, "true", "Aa", False, False, mention=1), True)]
    few = [("category", Leaf(0.5, v, "a", False, False, mention=1), True) for v in ["billing", "other"] * 6]
    names = [("name", Leaf(0.9, "ann", "Aa", False, False, mention=1), True)] * 2  # 2 leaves, 1 value: not a category
    tables = LeafModel.tables(flag + few + names)
    at = FEATURES.index("mention") + 1  # after the bias
    assert [tables.features(name, leaf)[at] for name, leaf, _ in (flag[0], few[0], names[0])] == [1.0, 1.0, 0.0]


def test_the_leaf_model_learns_how_often_a_field_is_right_under_each_label():
    from workers.calibrator import Calibrator, LeafModel, leaf_features

    points = []
    for i in range(48):
        header = i % 3 == 0  # a third of the dates are the e-mail's own Date: line, and wrong
        text = (f"From: a@x.io\nDate: Sat, {10 + i % 9:02d} Mar 2026 17:26:44 +0000\n\n"
                f"I ordered it on {10 + i % 9:02d} Jan 2026.")
        start = text.index("Sat, ") + 5 if header else text.index(" on ") + 4
        record = {"order_date": "2026-03-10" if header else "2026-01-10"}
        conf = {"order_date": 0.7 if i % 2 else 0.9}  # says nothing of right or wrong
        leaves = leaf_features(conf, record, {"order_date": [(start, start + 11)]}, text)
        assert leaves["order_date"].place == ("date" if header else "")
        points.append((f"d{i}", "order_date", leaves["order_date"], not header))
    tables = LeafModel.tables([(name, leaf, ok) for _, name, leaf, ok in points])
    assert tables.fields["order_date"].places["date"] < 0 < tables.fields["order_date"].places[""]
    cal = Calibrator.fit_leaves(points)
    assert cal.model.weights["place"] > 0
    header, body = (next(leaf for _, _, leaf, _ in points if leaf.place == p) for p in ("date", ""))
    assert cal.model.predict("order_date", header) < 0.5 < cal.model.predict("order_date", body)
    old = cal.to_json()  # a file written before places: they read as none
    old["fields"] = {k: {key: v for key, v in f.items() if key != "places"} for k, f in old["fields"].items()}
    before = Calibrator.from_json(old)
    assert before.model.fields["order_date"].places == {}
    with pytest.raises(ValueError, match="places must map"):
        Calibrator.from_json({**old, "fields": {"x": {"prior": 0.0, "categorical": False, "values": {},
                                                      "places": []}}})
