"""The name a contract's defined term stands for (workers.aliases), issue 56: real contracts' forms."""

from __future__ import annotations

from workers.aliases import defined_name


def _name(text: str, term: str) -> str | None:
    found = defined_name(text, term)
    return None if found is None else found[0]


def test_a_person_before_the_term():
    assert _name("PARTIES:\nJane Quinn Doe (“EMPLOYEE”)\nand\nACME, Inc.", "EMPLOYEE") == "Jane Quinn Doe"
    text = ("is made by and between\nJohn Roe, M.D., an individual living at the address given "
            "on the signature page (“Contractor”) and")
    assert _name(text, "Contractor") == "John Roe"


def test_an_organisation_with_its_description_and_address_before_the_term():
    text = ("This Agreement (“Agreement”) takes effect on March 3, 2020 (“Effective "
            "Date”) and is made between Birch Pharma,\nInc., a Delaware corporation having a place of business "
            "at 100 Main Street, Springfield, OR 97477 (“Birch”)")
    assert _name(text, "Birch") == "Birch Pharma Inc."
    text = ("As a condition of my joining the board of Globex Data Corporation, a "
            "Delaware corporation (the\n“Company”), I agree")
    assert _name(text, "the Company") == "Globex Data Corporation"


def test_a_term_quoted_later_in_its_bracket():
    text = ("As a condition of my work for Initech Laboratories, Inc., its subsidiaries and "
            "assigns (together the “Company”), and for good consideration")
    assert _name(text, "Company") == "Initech Laboratories Inc."
    text = 'Acme GmbH, Berlin (hereinafter referred to as "Seller") and'
    assert _name(text, "Seller") == "Acme GmbH"


def test_a_legal_forms_stop_is_no_sentences_end():
    text = "You are considering the purchase of Umbrella Footwear, Inc. (the “Company”)."
    assert _name(text, "Company") == "Umbrella Footwear Inc."


def test_no_name_or_no_definition():
    assert _name("the parties listed below (the “Company”)", "Company") is None
    assert _name("The Company shall keep it secret.", "Company") is None
    assert _name("Acme Inc. (the “Company”)", "") is None
    assert _name("the Russian Federation, as set out in Annex (“A”)", "A") is None  # a letter is no term
