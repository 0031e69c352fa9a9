"""The name a contract's defined term stands for (workers.aliases), issue 56: real contracts' forms."""

from __future__ import annotations

from workers.aliases import defined_name


def _name(text: str, term: str) -> str | None:
    found = defined_name(text, term)
    return None if found is None else found[0]


def test_a_person_before_the_term():
    assert _name("PARTIES:\nEric Dean Sprunk (“EMPLOYEE”)\nand\nNIKE, Inc.", "EMPLOYEE") == "Eric Dean Sprunk"
    text = ("is entered into by and between\nMaher Albitar, M.D., an individual who resides at the address set forth "
            "on the signature page hereof (“Contractor”) and")
    assert _name(text, "Contractor") == "Maher Albitar"


def test_an_organisation_with_its_description_and_address_before_the_term():
    text = ("This Mutual Confidentiality Agreement (“Agreement”) is effective as of February 10, 2017 (“Effective "
            "Date”), between Kite Pharma,\nInc., a Delaware corporation having a place of business at 2225 Colorado "
            "Avenue, Santa Monica, CA 90404 (“Kite”)")
    assert _name(text, "Kite") == "Kite Pharma Inc."
    text = ("As a condition of my becoming a member of the Board of Directors of Interactive Data Corporation, a "
            "Delaware corporation (the\n“Company”), I agree")
    assert _name(text, "the Company") == "Interactive Data Corporation"


def test_a_term_quoted_later_in_its_bracket():
    text = ("As a condition of my employment with Dolby Laboratories, Inc., its subsidiaries, affiliates, successors "
            "or assigns (together the “Company”), and in consideration")
    assert _name(text, "Company") == "Dolby Laboratories Inc."
    text = 'Acme GmbH, Berlin (hereinafter referred to as "Seller") and'
    assert _name(text, "Seller") == "Acme GmbH"


def test_a_legal_forms_stop_is_no_sentences_end():
    text = "You have expressed interest in the acquisition of LaCrosse Footwear, Inc. (the “Company”)."
    assert _name(text, "Company") == "LaCrosse Footwear Inc."


def test_no_name_or_no_definition():
    assert _name("the parties listed below (the “Company”)", "Company") is None
    assert _name("The Company shall keep it secret.", "Company") is None
    assert _name("Acme Inc. (the “Company”)", "") is None
    assert _name("the Russian Federation, as set out in Annex (“A”)", "A") is None  # a letter is no term
