"""Fields whose description asks for a value in a normalised form while grounding offers only the document's text.

A field grounded as text (kinds `text`, `cell`, `item`, `word`, `id`) can only take words the document writes.
Where its description asks the model to rewrite them ("the term as a number and a unit", "the currency as an
ISO 4217 code", "the date in ISO format"), the value asked for is often not among them: a contract writes
"two (2) years", a Brazilian invoice writes `R$`, and the grammar forbids `2 years` and `BRL`. `extract
validate` warns of each such field (`asked_forms`), so the user can mark it `x-grounded: false` or give it a
type that says the form (an enum of codes, `format: date`, a number).
"""

from __future__ import annotations

import re
from typing import Any

from schemas.grounding import field_kinds
from schemas.walk import iter_subschemas

TEXT_KINDS = frozenset({"text", "cell", "item", "word", "id"})

# What a description says when it asks for a form the document need not write. English: the descriptions a
# user writes for a schema are English more often than not, whatever the documents' language.
ASKED = re.compile(
    r"\b(?:as|in|into|to)\s+(?:an?\s+|the\s+)?(?:(?:number|integer|amount)\s+(?:and|with|plus)\s+(?:an?\s+)?unit"
    r"|ISO(?:[ -]?\d{3,5})?(?:\s+(?:format|code|date|alpha-[23]))?|(?:ISO|IETF|BCP|E\.?164)\b[\w -]{0,12}"
    r"|(?:two|three|2|3)[- ]letter\b[\w ]{0,12}|(?:upper|lower)[- ]?case|(?:a\s+)?codes?\b|cents|"
    r"(?:days|weeks|months|years|hours|minutes|seconds)\b|(?:yyyy|dd|mm)[-/.]\w+)"
    r"|\bISO[ -]?(?:4217|3166|639|8601)\b|\bnormali[sz]ed?\b|\bstandardi[sz]ed?\b|\babbreviat\w*",
    re.IGNORECASE)


def _name(path: tuple[Any, ...]) -> str:
    """The field's place in a record (`vendor.name`, `items[].sku`), or in the schema's definitions."""
    name = ""
    for i, part in enumerate(path):
        if i and path[i - 1] in ("properties", "$defs", "definitions") and isinstance(part, str):
            name = f"{name}.{part}" if name else part
        elif part == "items":
            name += "[]"
    return name or "(record)"


def _description(node: dict[str, Any]) -> str:
    texts = [node.get("description"), node.get("title")]
    for branch in node.get("anyOf") or node.get("oneOf") or []:
        if isinstance(branch, dict):
            texts.append(branch.get("description"))
    return " ".join(t for t in texts if isinstance(t, str))


def asked_forms(json_schema: dict[str, Any], mode: str = "auto", all_numbers: bool = False) -> list[tuple[str, str]]:
    """(field, what its description asks for) for each field grounded as text whose description asks for a
    normalised form."""
    kinds = field_kinds(json_schema, mode, all_numbers)
    nodes = dict(iter_subschemas(json_schema))
    found = []
    for path, kind in kinds.items():
        node = nodes.get(path)
        if kind not in TEXT_KINDS or not isinstance(node, dict):
            continue
        asked = ASKED.search(_description(node))
        if asked:
            found.append((_name(path), asked.group().strip()))
    return found


def asked_form_warnings(json_schema: dict[str, Any], mode: str = "auto", all_numbers: bool = False) -> list[str]:
    """One warning per field of `asked_forms`, for `extract validate`."""
    return [f"{name}: its description asks for a normalised form ({asked!r}) but it is grounded as text, so the "
            "grammar offers only what the document writes and the form asked for may be impossible; mark it "
            "x-grounded: false, or give it a type that says the form (an enum of codes, format: date, a number)"
            for name, asked in asked_forms(json_schema, mode, all_numbers)]
