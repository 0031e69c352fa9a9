"""A value schema's verdict on a grounding candidate, remembered across documents (issue 57 item 4).

Grounding (`schemas.grounding.core._allowed`) keeps, of each document's candidates for a field, those the field's own
value schema allows: a JSON Schema validation per candidate, the largest part of grounding's CPU per document. The
same words and numbers recur from document to document, so each verdict is kept, keyed by the schema's text (with
the document it sits in) and the candidate with its type (1, 1.0 and True hash alike but are not the same JSON
value). A verdict is the validator's, so grounding is the same with or without the memo; it is cleared when full.

A branch is validated where it sits: its references resolve against the whole schema document (`root`), by
jsonschema's `referencing` with remote references refused (`schemas.refs.NO_REMOTE_REGISTRY`), so a `#/$defs/...`,
an `$anchor` or an `$id`-relative reference inside a grounded field means what it means in the schema.
"""

from __future__ import annotations

from typing import Any

import jsonschema

from schemas.refs import NO_REMOTE_REGISTRY

VERDICTS: dict[tuple[str, type, Any], bool] = {}
VALIDATORS: dict[str, Any] = {}
MEMO_SIZE = 200_000  # verdicts kept (a few tens of MB at most); then cleared and kept anew


def valid(schema_key: str, branch: dict[str, Any], root: dict[str, Any], value: Any) -> bool:
    """Whether `value` is valid under `branch`, a subschema of the schema document `root` whose references resolve
    against it (`schema_key`: the text of both)."""
    try:
        verdict = VERDICTS.get((schema_key, type(value), value))
    except TypeError:  # an unhashable candidate: not remembered
        verdict, schema_key = None, ""
    if verdict is not None:
        return verdict
    check = VALIDATORS.get(schema_key) if schema_key else None
    if check is None:
        check = branch_validator(branch, root)
        if schema_key:
            if len(VALIDATORS) >= 1_000:
                VALIDATORS.clear()
            VALIDATORS[schema_key] = check
    verdict = bool(check.is_valid(value))
    if schema_key:
        if len(VERDICTS) >= MEMO_SIZE:
            VERDICTS.clear()
        VERDICTS[(schema_key, type(value), value)] = verdict
    return verdict


def branch_validator(branch: dict[str, Any], root: dict[str, Any]) -> Any:
    """A validator of `branch` whose references resolve in `root`, the schema document it belongs to: `root`'s
    resolver, evolved to the branch (draft 2020-12 rules, formats as annotations, as grounding has always read them)."""
    return jsonschema.Draft202012Validator(root, registry=NO_REMOTE_REGISTRY).evolve(schema=branch)
