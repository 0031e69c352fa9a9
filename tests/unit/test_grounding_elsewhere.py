"""schemas.grounding.elsewhere: a window's list whose grounded items its document writes only in other windows is
`[]` in that window; a list no window finds items for, and every scalar, keep their plain type."""

from __future__ import annotations

import copy
import json

import jsonschema
import pytest

from schemas.grounding import ground
from schemas.grounding.elsewhere import UNFOUND_KEY, silence_elsewhere
from schemas.grounding.unsure import free_fields
from schemas.walk import iter_subschemas

INVOICE_PAGE = """Blue Fjord Consulting AS
Storgata 5, 0155 Oslo

INVOICE BLU-2026-5906
Date of issue: January 30, 2026
Bill to: Litware Inc

Description | Qty | Unit price | Amount
Freight, pallet | 5 | 243.80 | 1,219.00

Total due: 1,219.00"""
TERMS_PAGE = ("Terms and conditions. Payment is due within thirty days of receipt. Late payments accrue interest at "
              "the statutory rate. All disputes are settled by arbitration.")
SCHEMA = {"type": "object", "properties": {
    "issue_date": {"anyOf": [{"type": "string", "format": "date"}, {"type": "null"}], "x-grounded": "date"},
    "items": {"type": "array", "maxItems": 6, "items": {"type": "string", "maxLength": 80, "x-grounded": "cell"}},
    "total": {"anyOf": [{"type": "number"}, {"type": "null"}], "x-grounded": "number"}},
    "required": ["issue_date", "items", "total"]}


def _windows(schema: dict, *texts: str, documents: list[int] | None = None) -> tuple[list[dict], list[str]]:
    grammars = [ground(schema, text, mark_free=True) for text in texts]
    silenced = silence_elsewhere(grammars, documents if documents is not None else [0] * len(texts))
    for grammar in grammars:
        free_fields(grammar)
    return grammars, silenced


def _alone(schema: dict, text: str) -> dict:
    """The grammar a window gets without the rule: grounded in its own text, marks off."""
    return free_fields(ground(schema, text, mark_free=True))[0]


def test_a_window_without_the_items_decodes_no_items_where_another_window_writes_them() -> None:
    (invoice, terms), silenced = _windows(SCHEMA, INVOICE_PAGE, TERMS_PAGE)
    assert invoice == _alone(SCHEMA, INVOICE_PAGE)  # the window that writes them: as before
    alone = _alone(SCHEMA, TERMS_PAGE)
    assert alone["properties"]["items"]["maxItems"] == 6  # without the rule: up to 6 items of any text
    assert terms["properties"]["items"]["maxItems"] == 0
    assert silenced == ["window 1: properties.items.items"]
    # scalars found only in the other window keep their plain type (the merge weighs them by confidence)
    for name in ("issue_date", "total"):
        assert terms["properties"][name] == alone["properties"][name]
    validator = jsonschema.Draft202012Validator(terms)
    assert validator.is_valid({"issue_date": None, "items": [], "total": None})
    assert not validator.is_valid({"issue_date": None, "items": ["Monthly hosting"], "total": None})


def test_a_field_no_window_finds_keeps_its_plain_type_in_every_window() -> None:
    other = TERMS_PAGE.replace("Terms", "Notices")
    (first, second), silenced = _windows(SCHEMA, TERMS_PAGE, other)
    assert silenced == []
    assert first == _alone(SCHEMA, TERMS_PAGE) and second == _alone(SCHEMA, other)


def test_other_documents_and_a_document_read_whole_are_not_touched() -> None:
    (invoice, terms), silenced = _windows(SCHEMA, INVOICE_PAGE, TERMS_PAGE, documents=[0, 1])
    assert silenced == []
    assert terms == _alone(SCHEMA, TERMS_PAGE)


def test_a_list_that_may_not_be_empty_keeps_its_plain_items() -> None:
    schema = copy.deepcopy(SCHEMA)
    schema["properties"]["items"]["minItems"] = 1
    (_, terms), silenced = _windows(schema, INVOICE_PAGE, TERMS_PAGE)
    assert silenced == []
    assert terms == _alone(schema, TERMS_PAGE)


def test_a_nullable_list_of_items_found_elsewhere_is_empty_in_its_list_branch() -> None:
    schema = copy.deepcopy(SCHEMA)
    schema["properties"]["items"] = {"anyOf": [schema["properties"]["items"], {"type": "null"}]}
    (_, terms), silenced = _windows(schema, INVOICE_PAGE, TERMS_PAGE)
    assert silenced == ["window 1: properties.items.anyOf.0.items"]
    assert terms["properties"]["items"]["anyOf"][0]["maxItems"] == 0


def test_every_mark_is_taken_off() -> None:
    grammars = [ground(SCHEMA, text, mark_free=True) for text in (INVOICE_PAGE, TERMS_PAGE, TERMS_PAGE)]
    assert any(node.get(UNFOUND_KEY) for g in grammars for _, node in iter_subschemas(g))
    silence_elsewhere(grammars, [0, 0, 1])
    assert not any(UNFOUND_KEY in node for g in grammars for _, node in iter_subschemas(g))
    assert UNFOUND_KEY not in json.dumps(free_fields(ground(SCHEMA, TERMS_PAGE, mark_free=True))[0])


def test_xgrammar_compiles_the_silenced_window_and_refuses_an_item_there() -> None:
    xgrammar = pytest.importorskip("xgrammar")
    from xgrammar.testing import _is_grammar_accept_string

    (_, terms), _ = _windows(SCHEMA, INVOICE_PAGE, TERMS_PAGE)
    grammar = xgrammar.Grammar.from_json_schema(json.dumps(terms), any_whitespace=False)
    assert _is_grammar_accept_string(grammar, '{"issue_date": null, "items": [], "total": null}')
    assert not _is_grammar_accept_string(grammar, '{"issue_date": null, "items": ["Subtotal: 29.87"], "total": null}')
