"""Reach (the share of gold values a document's grammar allows), its report in eval and validate --gold, what tune
does with it (fields freed, per-field F1, the bootstrap), and validate's warning of a normalised form asked of a
text-grounded field. Pure logic and the real grounding of today's finders; no engine."""

from __future__ import annotations

import json

import pytest

from pipeline.tools.evaluate import EvalOptions, build_report, render_markdown, score
from pipeline.tools.evaluate.reach import (
    GrammarValidator,
    Reach,
    Refusal,
    _candidates,
    document_refusals,
    nearest,
    reach,
)
from pipeline.tools.tune_stats import (
    bootstrap_f1_diff,
    f1_of,
    field_node,
    low_reach_fields,
    mark_free,
)
from schemas.asked_form import asked_form_warnings, asked_forms
from schemas.grounding import field_kinds
from tests.conftest import DELETE, write_config, write_docs

LISTING = {"type": "object", "properties": {
    "monthly_rent": {"type": "number"},
    "listed": {"anyOf": [{"type": "string", "format": "date"}, {"type": "null"}]},
    "landlord": {"type": "string"},
    "city": {"type": "string"},
}, "required": ["monthly_rent", "landlord"]}
APT_09 = "Wohnung zu vermieten\nVermieter: Keller Immobilien GmbH\nOrt: Zürich\nMiete: EUR 2.300 monatlich\n"


def test_a_value_the_document_does_not_write_is_refused_and_named_with_what_the_finder_reads():
    """`EUR 2.300` in a German listing is 2300 (the finders read it by the document's locale), so 2300 is within
    reach; a gold value the document does not write (2350, a gold file's typo or a sum) is refused, and the refusal
    names what the finder read instead."""
    leaves, refusals = document_refusals("apt-09", {"monthly_rent": 2350, "landlord": "Keller Immobilien GmbH",
                                                    "city": "Zürich", "listed": None}, APT_09, LISTING, "auto")
    assert [path for path, *_ in leaves] == ["monthly_rent", "landlord", "city"]  # null gold is not a leaf
    assert [(r.field, r.gold) for r in refusals] == [("monthly_rent", 2350)]
    assert refusals[0].nearest[0] == 2300 and refusals[0].line().startswith("apt-09 monthly_rent 2350: the finder "
                                                                            "reads 2300")
    assert document_refusals("apt-09", {"monthly_rent": 2300, "landlord": "Keller Immobilien GmbH"}, APT_09, LISTING,
                             "auto")[1] == []


def test_grounding_off_or_a_free_field_or_an_equal_value_is_within_reach():
    gold = {"monthly_rent": 2300, "landlord": "keller  immobilien gmbh", "city": "Zürich"}
    assert document_refusals("apt-09", gold, APT_09, LISTING, "off")[1] == []
    free = json.loads(json.dumps(LISTING))
    free["properties"]["monthly_rent"]["x-grounded"] = False
    # the landlord as eval compares it (case and spaces normalised) is among the candidates
    assert document_refusals("apt-09", gold, APT_09, free, "auto")[1] == []


def test_a_nullable_field_whose_finder_finds_nothing_keeps_its_type_and_is_within_reach():
    """Grounding narrows, never forbids: the listing writes no date, so `listed` keeps its plain type (it is not
    forced to null) and a gold date is within reach. A refusal with no candidate says so in its line."""
    _, refusals = document_refusals("apt-09", {"monthly_rent": 2300, "landlord": "Keller Immobilien GmbH",
                                               "listed": "2027-03-01"}, APT_09, LISTING, "auto")
    assert refusals == []
    assert Refusal("apt-09", "listed", "listed", "2027-03-01", (), 0).line() == (
        'apt-09 listed "2027-03-01": the finder reads nothing the field may take (only null)')


def test_reach_per_field_and_overall_over_documents():
    golds = {"a": {"monthly_rent": 2350, "landlord": "Keller Immobilien GmbH"},
             "b": {"monthly_rent": 900, "landlord": "Rossi S.r.l."},
             "c": {"monthly_rent": 1}}
    documents = {"a": APT_09, "b": "Locatore: Rossi S.r.l.\nAffitto: 900 euro al mese"}
    found = reach(golds, documents, lambda _: LISTING, "auto")
    assert found.documents == 2 and found.without_text == ["c"]
    assert found.fields() == {"landlord": {"gold": 2, "reached": 2, "reach": 1.0},
                              "monthly_rent": {"gold": 2, "reached": 1, "reach": 0.5}}
    assert found.share() == 0.75 and found.summary()["overall"] == {"gold": 4, "reached": 3, "reach": 0.75}


def test_list_items_and_nested_objects_are_leaves_of_their_field_path():
    schema = {"type": "object", "properties": {"items": {"type": "array", "items": {
        "type": "object", "properties": {"amount": {"type": "number"}}}}}}
    found = reach({"d": {"items": [{"amount": 1234.56}, {"amount": 12.75}]}},
                  {"d": "Pos 1: 1.234,56 €\nPos 2: 12,50 EUR"}, lambda _: schema, "auto")
    assert found.gold == {"items[].amount": 2}
    assert [(r.at, r.gold) for r in found.refusals] == [("items[1].amount", 12.75)]


def test_nearest_candidates_by_their_text():
    assert nearest(2300, [2026, 2.3, 17, "x"], 1) == (2.3,)
    assert nearest("FPR 3715/26", ["FPR", "3715/26", "2026"], 2) == ("3715/26", "FPR")


# -- eval's report ----------------------------------------------------------------------------------


def test_eval_report_shows_reach_per_field_and_overall():
    golds = {"a": {"monthly_rent": 2350, "landlord": "Keller Immobilien GmbH"}}
    scores = score(golds, {"a": {"monthly_rent": 2300, "landlord": "Keller Immobilien GmbH"}}, {},
                   lambda _: LISTING)
    found = reach(golds, {"a": APT_09}, lambda _: LISTING, "auto")
    report = build_report(scores, {"name": "t"}, EvalOptions(), found)
    assert report["reach"]["overall"] == {"gold": 2, "reached": 1, "reach": 0.5}
    assert report["reach"]["refused"][0]["finder_reads"][0] == 2300
    md = render_markdown(report)
    assert "| reach (gold values the grammar allows) | 0.500 (1 of 2) |" in md
    assert "| monthly_rent | 1 | 1 | 0 | 1 | 0 | 0 | 0 | 0.000 | 0.000 | 0.000 |" in md
    assert "- a monthly_rent 2350: the finder reads 2300" in md
    without = render_markdown(build_report(scores, {"name": "t"}, EvalOptions()))
    assert "reach" not in without and build_report(scores, {}, EvalOptions())["reach"] is None


# -- validate --gold --------------------------------------------------------------------------------


def test_validate_gold_lists_every_refused_value(tmp_path):
    from pipeline.cli.validate import gold_lines
    from pipeline.config import load_config

    (tmp_path / "listing.json").write_text(json.dumps({"title": "Listing", **LISTING}))
    docs = write_docs(tmp_path / "docs.parquet", ["apt-09", "apt-10"],
                      [APT_09, "Vermieter: Huber KG\nMiete: 1.180,- € im Monat"])
    gold = tmp_path / "gold.jsonl"
    gold.write_text("".join(json.dumps({"doc_id": i, "record": r}) + "\n" for i, r in (
        ("apt-09", {"monthly_rent": 2350, "landlord": "Keller Immobilien GmbH"}),
        ("apt-10", {"monthly_rent": 1180, "landlord": "Huber KG"}), ("apt-11", {"monthly_rent": 5}))))
    config = write_config(tmp_path, schema=DELETE, schema_file=str(tmp_path / "listing.json"),
                          **{"input.uri": str(docs)})
    lines = gold_lines(load_config(config), str(gold))
    assert lines[0].startswith("  reach   0.750: 3 of 4 gold values of 2 document(s)")
    assert "    monthly_rent: 0.500 (1 of 2)" in lines and "    landlord: 1.000 (2 of 2)" in lines
    assert "  warning 1 gold document(s) are not in the input" in lines
    refused = [line.strip() for line in lines if line.startswith("    apt-")]
    # `1.180,- €` is read as 1180 by the document's locale: only the value the document does not write is refused
    assert refused[0].startswith("apt-09 monthly_rent 2350: the finder reads 2300") and len(refused) == 1


# -- tune ------------------------------------------------------------------------------------------


def test_fields_under_the_reach_bar_are_marked_free_where_they_are_declared():
    schema = {"type": "object", "$defs": {"Vendor": {"type": "object", "properties": {"name": {"type": "string"}}}},
              "properties": {"vendor": {"anyOf": [{"$ref": "#/$defs/Vendor"}, {"type": "null"}]},
                             "items": {"type": "array", "items": {"type": "object", "properties": {
                                 "amount": {"type": "number"}}}},
                             "total": {"type": "number"}}}
    fields = {"vendor.name": {"reach": 0.5}, "items[].amount": {"reach": 0.89}, "total": {"reach": 0.9},
              "x": {"reach": None}}
    low = low_reach_fields(fields)
    assert low == ["vendor.name", "items[].amount"]
    marked, missing = mark_free(schema, [*low, "nowhere.at_all"])
    assert missing == ["nowhere.at_all"] and "x-grounded" not in json.dumps(schema)  # the original is untouched
    assert field_node(marked, "vendor.name") == {"type": "string", "x-grounded": False}
    kinds = field_kinds(marked, "auto")
    assert kinds[("$defs", "Vendor", "properties", "name")] is None
    assert kinds[("properties", "items", "items", "properties", "amount")] is None
    assert kinds[("properties", "total")] == "money"


def test_bootstrap_tells_noise_from_a_difference_and_is_seeded():
    same = {f"d{i}": (5, 5, 3) for i in range(40)}
    assert bootstrap_f1_diff(same, same).within_noise and bootstrap_f1_diff(same, same).diff == 0.0
    # two of 63 values apart, spread over documents: within what 13 documents can tell apart
    a = {f"d{i}": (5, 5, 3 + (i < 2)) for i in range(13)}
    b = {f"d{i}": (5, 5, 3) for i in range(13)}
    close = bootstrap_f1_diff(a, b)
    assert close.within_noise and close.diff > 0 and "within what 13 documents can tell apart" in close.line()
    far = bootstrap_f1_diff({f"d{i}": (5, 5, 5) for i in range(30)}, {f"d{i}": (5, 5, 1) for i in range(30)})
    assert not far.within_noise and far.low > 0.5 and "beyond" in far.line()
    assert bootstrap_f1_diff(a, b, seed=3) == bootstrap_f1_diff(a, b, seed=3)
    assert bootstrap_f1_diff(a, {}) is None
    few = bootstrap_f1_diff({"d": (5, 5, 5)}, {"d": (5, 5, 1)})  # one document: no spread to resample
    assert few.low == few.high == few.diff > 0 and few.within_noise and "too few documents (1)" in few.line()
    assert f1_of(10, 10, 5) == 0.5 and f1_of(0, 0, 0) is None


def test_tune_tries_low_reach_fields_free_and_the_setting_decodes_another_schema(tmp_path):
    from pipeline.config import load_config
    from pipeline.tools.tune import FREE, Tuner, _setting_text, field_lines, reach_lines, snippet

    (tmp_path / "listing.json").write_text(json.dumps({"title": "Listing", **LISTING}))
    docs = write_docs(tmp_path / "docs.parquet", ["apt-09"], [APT_09])
    config = write_config(tmp_path, schema=DELETE, schema_file=str(tmp_path / "listing.json"),
                          **{"input.uri": str(docs)})
    loaded = load_config(config)
    tuner = Tuner(loaded, {}, {"apt-09": {"monthly_rent": 2350, "landlord": "Keller Immobilien GmbH"}}, None,
                  EvalOptions())
    assert tuner.free_lever() == {FREE: (("monthly_rent",),)}
    freed = tuner._loaded({FREE: ("monthly_rent",)})
    assert freed.contract.json_schema["properties"]["monthly_rent"]["x-grounded"] is False
    assert freed.output_hash != tuner._loaded({FREE: ()}).output_hash
    table = reach_lines(tuner.reach)
    assert any("| monthly_rent | 1 | 0 | 0.000 | tried as x-grounded: false" in line for line in table)
    assert _setting_text({FREE: ("monthly_rent",), "prompt_schema": "json"}) == \
        "x-grounded: false on monthly_rent, prompt_schema=json"

    from pipeline.tools.tune import Trial

    best = Trial({FREE: ("monthly_rent",)}, "h", 0.5, fields={"monthly_rent": 1.0}, documents=1)
    assert "# mark monthly_rent x-grounded: false" in snippet(loaded, best)
    assert field_lines([best, Trial({}, "g", fields={"landlord": 0.5})])[2:] == [
        "| landlord | - | 0.500 |", "| monthly_rent | 1.000 | - |"]

    from pipeline.tools.tune import write_results

    own = Trial({FREE: ()}, "g", 0.4, fields={"monthly_rent": 0.0}, documents=1, counts={"apt-09": (2, 2, 1)})
    best.counts = {"apt-09": (2, 2, 2)}
    best.versus = bootstrap_f1_diff(best.counts, own.counts)
    write_results(tmp_path / "tune", loaded, [own, best], best, 1, tuner.reach)
    md = (tmp_path / "tune" / "tune.md").read_text()
    assert "| monthly_rent | 1 | 0 | 0.000 | tried as x-grounded: false (reach under 0.9) |" in md
    assert "| monthly_rent | 0.000 | 1.000 |" in md and "too few documents (1) to tell settings apart" in md
    report = json.loads((tmp_path / "tune" / "tune.json").read_text())
    assert report["reach"]["overall"]["reach"] == 0.5 and report["trials"][1]["versus_best_before"]["diff"] == 0.5


# -- validate's warning of a normalised form asked of a text-grounded field -----------------------------


@pytest.mark.parametrize("description, asked", [
    ("the contract term as a number and a unit, e.g. 2 years", "as a number and a unit"),
    ("the currency as an ISO 4217 code (EUR, CHF)", "as an ISO 4217 code"),
    ("the start date in ISO format", "in ISO format"),
    ("the country, as a two-letter code", "as a two-letter code"),
])
def test_a_text_grounded_field_asked_for_a_normalised_form_is_warned_of(description, asked):
    schema = {"type": "object", "properties": {"f": {"type": "string", "description": description}}}
    assert asked_forms(schema) == [("f", asked)]
    assert asked_form_warnings(schema)[0].startswith(f"f: its description asks for a normalised form ({asked!r}) "
                                                     "but it is grounded as text")


def test_no_warning_where_the_field_is_not_grounded_as_text():
    properties = {
        "name": {"type": "string", "description": "the customer's name as written"},
        "free": {"type": "string", "description": "the term as a number and a unit", "x-grounded": False},
        "amount": {"type": "number", "description": "the price as a number"},
        "code": {"enum": ["EUR", "USD"], "description": "the currency as an ISO 4217 code"},
        "on": {"type": "string", "format": "date", "description": "the date in ISO format"},
    }
    schema = {"type": "object", "properties": properties}
    assert asked_forms(schema) == []
    term = {"type": "object", "properties": {"term": {"type": "string", "description": "as a number and a unit"}}}
    assert asked_forms(term, "off") == [] and asked_forms(term, "marked") == []


def test_reach_objects_round_trip_to_json():
    found = Reach({"f": 2}, [Refusal("d", "f", "f", 1.5, (1, 5), 2)], 1)
    assert json.loads(json.dumps(found.summary()))["refused"] == [
        {"doc_id": "d", "field": "f", "at": "f", "gold": 1.5, "finder_reads": [1, 5], "candidates": 2}]


def test_a_long_documents_text_field_is_checked_as_the_grammar_checks_a_run_of_its_words():
    import random

    rng = random.Random(7)
    words = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet"]
    lines = [" ".join(f"{rng.choice(words)}{rng.randrange(1000)}" for _ in range(12)) + "." for _ in range(150)]
    document = "\n".join(["Holder: Maria Jones of Lisbon", *lines])
    schema = {"type": "object", "properties": {"holder": {"type": "string"}}}
    from schemas.grounding import ground

    run, other = ground(schema, document, mode="auto")["properties"]["holder"]["anyOf"]  # too many spans for an enum
    assert "x-substring" in run and other == {"type": "string"}  # a run of the document's words, or any text
    assert document_refusals("d", {"holder": "Mary Jones"}, document, schema, "auto")[1] == []  # a paraphrase

    def refused(value):
        return list(GrammarValidator(run).iter_errors(value))

    assert refused("Maria Jones") == [] and refused("maria  JONES") == []  # as eval compares
    assert refused("Mary Jones") != []
    # a long document's cell: not cut after its label
    assert nearest("Mary Jones", _candidates(run))[0] == "Holder: Maria Jones of Lisbon"
