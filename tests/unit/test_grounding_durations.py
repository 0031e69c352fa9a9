"""Durations in their normal form (`two (2) years` → `2 years`): schemas.grounding.durations, issue 56."""

from __future__ import annotations

import pytest

from schemas.grounding.durations import durations
from schemas.grounding.index import DocumentIndex
from schemas.grounding.normal import normal_forms


def test_spelled_numbers_with_their_digits_in_brackets():
    pytest.importorskip("text_to_num")
    text = ("This Agreement shall remain in effect for a period of two (2) years from the Effective Date. The "
            "obligations survive for eighteen (18) months, and notice is thirty (30) days.")
    assert durations(text) == ["2 years", "18 months", "30 days"]


def test_spelled_hyphenated_and_single_forms():
    pytest.importorskip("text_to_num")
    assert durations("a three-year term") == ["3 years"]
    assert durations("for one (1) year") == ["1 year"]
    assert durations("for thirty-six months") == ["36 months"]


def test_digits_and_words_between():
    assert durations("shall survive for 5 years after 2 calendar years") == ["5 years", "2 years"]
    assert durations("a 3-year period") == ["3 years"]


def test_not_durations():
    assert durations("In 2019 the parties met; Section 2 governs.") == []
    assert durations("the years 2010 and 2011") == []
    assert durations("") == []


def test_a_brackets_disagreement_offers_both():
    pytest.importorskip("text_to_num")
    assert durations("two (3) years") == ["3 years", "2 years"]


def test_normal_forms_offer_no_duration_to_a_field_that_asks_for_none():
    index = DocumentIndex("The term of this Agreement is 2 (two) years.", "en")
    assert "2 years" not in normal_forms(index)  # only a field that asks for a duration gets them (below)


def test_organisation_names_without_the_comma_before_their_legal_form():
    from schemas.grounding.names import comma_free_names

    text = "between BIRCH PHARMA, INC., a Delaware corporation, and Oakfield Securities, LLC (the \"Agent\")."
    found = comma_free_names(text)
    assert "between BIRCH PHARMA INC." in found and "and Oakfield Securities LLC" in found
    assert comma_free_names("the parties, including employees, agree") == []


def test_normal_forms_offer_the_comma_free_name_to_a_substring_field():
    index = DocumentIndex("This Agreement is made by ACME, Inc. and Jane Quinn Doe.", "en")
    assert "This Agreement is made by ACME Inc." in normal_forms(index)  # and its runs (`ACME Inc.`)


TERM_SCHEMA = {"type": "object", "properties": {
    "term": {"anyOf": [{"type": "string"}, {"type": "null"}], "description": "how long it lasts, e.g. 2 years"},
    "city": {"anyOf": [{"type": "string"}, {"type": "null"}], "description": "where it was signed"}}}


def test_a_field_whose_description_shows_a_duration_is_grounded_in_the_documents_durations():
    pytest.importorskip("text_to_num")
    from schemas.grounding import ground

    doc = "Signed in Ohio. This Agreement remains in effect for two (2) years; notice takes thirty (30) days."
    grounded = ground(TERM_SCHEMA, doc, mode="auto")["properties"]
    assert grounded["term"] == {"anyOf": [{"enum": ["2 years", "30 days"]}, {"type": "null"}]}
    assert "2 years" not in grounded["city"]["anyOf"][0]["enum"]  # a field that asks no duration: the runs


def test_a_duration_field_keeps_its_plain_type_where_the_document_writes_no_duration():
    from schemas.grounding import ground
    from schemas.grounding.elsewhere import UNFOUND_KEY
    from schemas.grounding.unsure import FREE_KEY

    doc = "Signed in Ohio on 2011-05-05 by both parties."
    grounded = ground(TERM_SCHEMA, doc, mode="auto", mark_free=True)["properties"]
    # free (an unsure value is null), not the runs and dates of its words (`2011-05-05`, `Ohio`)
    assert grounded["term"] == {"anyOf": [{"type": "string", "maxLength": 64}, {"type": "null"}],
                                "description": "how long it lasts, e.g. 2 years", FREE_KEY: True, UNFOUND_KEY: True}
    assert "Signed in Ohio" in grounded["city"]["anyOf"][0]["enum"]
