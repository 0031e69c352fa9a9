"""Grounding of long prose (DeepJSONEval's kind of document): the substring grammar reaches names written in
Markdown emphasis, before an em dash or a possessive, titles with a colon, and the normal forms of dates and
ranges of hours; and, since a record may paraphrase or normalise what prose says, any other text too (issue 54:
grounding narrows, never forbids)."""

from __future__ import annotations

from pipeline.tools.evaluate.reach import document_refusals
from schemas.grounding import ground
from schemas.grounding.finders import identifiers, spans
from schemas.grounding.normal import time_ranges
from schemas.substring import SUBSTRING_KEY

PROSE = """**Eternal Echoes: The Forgotten Chronicles** is a game review, and a long one.

When "Eternal Echoes: The Forgotten Chronicles" first descended upon the gaming world, critics took notice.
Voltronix engineers have fundamentally reimagined driver interaction through intuitive design. The centerpiece is
the **Holographic HUD** projection system – standard equipment on every trim. When *Quantum Shift* debuted on
global screens, it instantly established itself as a benchmark. Meanwhile, Anya Petrova's Russian lineage imbues
her role with a steely resilience. Opposite her, Priya Patel—the Indian powerhouse—delivers a career-defining
performance. This accolade demands that players solve all quantum entanglement puzzles in under 3 minutes—a task
that hinges on lightning reflexes. Alongside him, **Emma Watson** stars as **"Lena Arden"**, another lead.

The QuantumPad Pro, crafted by the innovative minds at NeuralTech Innovations, launched on November 5, 2022, to
wide acclaim. For weekdays, that is, from Monday to Friday, the opening hours run from 8:00 AM to 10:00 PM, while
WeekendHours extend generously from 5:30 AM sharp until 9:00 PM. During weekdays, the attraction welcomes guests
from **10:30 to 17:00**, ideal for school groups and retirees who prefer quieter galleries and shorter queues.
Critics praised the pacing, the score, the world building, the characters, the dialogue and the replay value,
and many readers wrote letters about the ending, the soundtrack, the art direction and the voice acting.
Reviewers in several countries agreed that the studio had set a new standard for narrative ambition in games.

Beyond the core game, the studio expands its world through downloadable content priced for every budget, from
small cosmetic packs to vast new regions with their own quests, factions, weather systems and hidden endings.
Players who finish the main story can return to earlier chapters with new abilities, and a photo mode lets them
frame the ruined cities, frozen oceans and glowing caverns that make the journey memorable for so many people.
The developers have promised regular updates for the next two years, including accessibility options, new
difficulty settings, co-operative missions and a level editor that fans have requested since the first trailer.
"""

FIELDS = ("Title", "Feature", "Movie", "Actor", "CoStar", "Description", "Lead", "Character", "ReleaseDate",
          "WeekdayHours", "WeekendHours", "MuseumHours")
SCHEMA = {"type": "object", "properties": {f: {"type": "string"} for f in FIELDS}}
GOLD = {"Title": "Eternal Echoes: The Forgotten Chronicles", "Feature": "Holographic HUD", "Movie": "Quantum Shift",
        "Actor": "Anya Petrova", "CoStar": "Priya Patel",
        "Description": "solve all quantum entanglement puzzles in under 3 minutes", "Lead": "Emma Watson",
        "Character": "Lena Arden", "ReleaseDate": "2022-11-05", "WeekdayHours": "8:00 AM - 10:00 PM",
        "WeekendHours": "5:30 AM - 9:00 PM", "MuseumHours": "10:30-17:00"}


def test_prose_is_grounded_as_runs_of_its_words_or_any_text() -> None:
    grounded = ground(SCHEMA, PROSE, mode="auto")
    for f in FIELDS:
        run, other = grounded["properties"][f]["anyOf"]
        assert SUBSTRING_KEY in run and other == {"type": "string"}, f


def test_names_titles_dates_and_hours_that_records_write_are_within_reach() -> None:
    _, refused = document_refusals("dje", GOLD, PROSE, SCHEMA, "auto")
    assert [r.line() for r in refused] == []


def test_values_the_document_does_not_write_are_within_reach_in_prose() -> None:
    # DeepJSONEval en dev: 72 of 1,724 gold values were paraphrases or normal forms no run of words gives
    # (`Senior Citizens (Ages 65+)`, `NeuralCore X1 @ 5.2GHz`)
    paraphrased = {"Title": "Eternal Echoes: The Lost Chronicles", "Actor": "Anya Ivanova", "Movie": "Quantum Leap",
                   "WeekdayHours": "8:00 AM - 11:00 PM", "CoStar": "Priya Patel the Indian",
                   "Character": "Lena Arden Watson"}
    leaves, refused = document_refusals("dje", paraphrased, PROSE, SCHEMA, "auto")
    assert len(leaves) == len(paraphrased) and refused == []


def test_spans_cut_words_at_em_dashes_and_drop_markdown_and_possessives() -> None:
    found = spans("Opposite her, Priya Patel—the Indian powerhouse. Anya Petrova's role. The **Solar Roof Charger**.")
    assert {"Priya Patel", "Anya Petrova", "Solar Roof Charger"} <= set(found)
    assert "Patel—the" in found and "Priya Patel—the Indian powerhouse" in found  # as written, too


def test_time_ranges_in_the_forms_records_write() -> None:
    found = time_ranges("Doors open from **10:00 AM to 11:30 PM**; weekdays 6:00 AM sharp until 8:00 PM; "
                        "9 a.m. – 5 p.m.; 10:30-17:00")
    for value in ["10:00 AM - 11:30 PM", "10:00-23:30", "6:00 AM - 8:00 PM", "6:00-20:00", "9 a.m. - 5 p.m.",
                  "9:00-17:00", "10:30 - 17:00", "10:30 to 17:00"]:
        assert value in found, value


def test_a_range_of_counts_or_years_is_not_a_time_range() -> None:
    assert time_ranges("for 3 to 5 players, from 2019 to 2023, pages 10-12") == []


def test_invoice_numbers_after_a_label_of_several_words() -> None:
    text = ("Numero fattura: 5088\nDocumento n. 2777\nNº da fatura: 343.186\nNúmero de factura: FV-2026/118\n"
            "Rechnung Nr. 1528\nwe sell no more than 3 items")
    assert identifiers(text) == ["FV-2026/118", "5088", "2777", "343.186", "1528"]


def test_a_range_of_hours_with_words_between_its_times() -> None:
    found = time_ranges("the gates swing open at 7:30 AM and remain welcoming until 5:00 PM sharp; open at 9:00 AM, "
                        "welcoming explorers until 4:30 PM, while weekends differ")
    assert {"7:30 AM - 5:00 PM", "9:00 AM - 4:30 PM", "9:00-16:30"} <= set(found)
    assert not any(value.startswith("5:00 PM") for value in found)


def test_italic_names_and_a_title_ending_in_brackets_inside_quotes() -> None:
    found = spans('Close relatives include _Drosera rotundifolia var. minor_, a sundew. '
                  '"The Succulent Manual (2022 Edition)" provides tips.')
    assert {"Drosera rotundifolia var. minor", "The Succulent Manual (2022 Edition)"} <= set(found)


def test_english_scale_words_multiply_as_chinese_ones_do() -> None:
    from schemas.grounding import numbers

    assert numbers("has soared to an impressive 17.5 million players, 2 billion views") == [17.5, 17_500_000, 2,
                                                                                          2_000_000_000]
    assert numbers("3 millionaires") == [3]
