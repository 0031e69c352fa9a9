"""Places a document names, offered to a field that holds a place: schemas.grounding.places, issue 56."""

from __future__ import annotations

import pytest

from schemas.grounding.locale import Locale
from schemas.grounding.places import holds_place, places

pytest.importorskip("pycountry")

CONTRACT = ("This Agreement shall be governed by the laws of the State of Delaware, without regard to conflicts of "
            "law principles. Any action shall be brought in the courts of New York County, New York. The Company is "
            "a Delaware corporation with offices in the United States.")


def test_states_and_countries_a_contract_names():
    assert places(CONTRACT, Locale("en")) == ["Delaware", "New York", "United States"]


def test_names_written_in_capitals_are_given_as_the_gazetteer_writes_them():
    assert places("GOVERNED BY THE LAWS OF THE STATE OF CALIFORNIA.", Locale("en")) == ["California"]


def test_a_word_the_document_writes_in_lower_case_is_no_place():
    # `Central` is a subdivision's name (of Paraguay, Ghana ...), and a word here; `North` starts `North Carolina`
    text = "The Central Committee meets in the North wing; its central office is closed. Law: North Carolina."
    assert places(text, Locale("en")) == ["North Carolina"]


def test_other_languages_read_with_clrd_and_iso_names():
    de = "Dieser Vertrag unterliegt dem Recht der Bundesrepublik Deutschland. Gerichtsstand ist Bayern."
    assert places(de, Locale("de")) == ["Bundesrepublik Deutschland", "Bayern"]
    fr = "Le présent contrat est régi par le droit suisse; for exclusif: Genève (Suisse)."
    assert places(fr, Locale("fr")) == ["Genève", "Suisse"]
    es = "Este contrato se rige por las leyes de España y de la Comunidad de Madrid."
    assert "España" in places(es, Locale("es"))


def test_english_names_of_subdivisions_iso_writes_in_their_own_language():
    assert places("governed by the laws of Bavaria, Germany", Locale("en")) == ["Bavaria", "Germany"]


def test_a_field_holds_a_place_by_its_name():
    assert all(holds_place(n) for n in ("jurisdiction", "governing_law", "GoverningLaw", "country",
                                        "country_of_incorporation", "Province"))
    assert not any(holds_place(n) for n in ("state", "order_state", "city", "location", "party", "term",
                                            "country_code", None))


SCHEMA = {"type": "object", "properties": {
    "jurisdiction": {"anyOf": [{"type": "string"}, {"type": "null"}],
                     "description": "the state or country whose law governs the agreement"},
    "party": {"type": "array", "items": {"type": "string"}}}}


def test_a_place_field_is_offered_the_places_the_document_names():
    from schemas.grounding import ground

    grounded = ground(SCHEMA, CONTRACT, mode="auto")["properties"]
    assert grounded["jurisdiction"] == {"anyOf": [{"enum": ["Delaware", "New York", "United States"]},
                                                  {"type": "null"}]}
    assert grounded["party"] != grounded["jurisdiction"]  # other fields: as before


def test_a_place_field_keeps_its_plain_type_where_the_document_names_no_place():
    from schemas.grounding import ground
    from schemas.grounding.elsewhere import UNFOUND_KEY
    from schemas.grounding.unsure import FREE_KEY

    doc = "This agreement binds both parties jointly from January."
    grounded = ground(SCHEMA, doc, mode="auto", mark_free=True)["properties"]["jurisdiction"]
    # not the runs of its words (`jointly`, `January`), which a model that starts writing `jurisdiction` ends in
    assert grounded == {"anyOf": [{"type": "string", "maxLength": 64}, {"type": "null"}],
                        "description": SCHEMA["properties"]["jurisdiction"]["description"], FREE_KEY: True,
                        UNFOUND_KEY: True}


def test_x_grounded_false_leaves_a_place_field_free():
    from schemas.grounding import ground

    schema = {"type": "object", "properties": {"jurisdiction": {"type": "string", "x-grounded": False}}}
    assert ground(schema, CONTRACT, mode="auto")["properties"]["jurisdiction"] == {"type": "string",
                                                                                   "x-grounded": False}
