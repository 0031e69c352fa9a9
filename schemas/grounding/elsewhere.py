"""A window's field whose value its document writes in another window: null (or an empty list) in this one.

A document read whole is grounded on all of its text: a grounded field whose finder reads candidates anywhere in
it is decoded as one of them (`schemas.grounding.core`). A long document is read in windows (`workers.windows`),
each grounded in its own text, so a window that holds none of the field's values left the field its plain type
(grounding never forbids), and the model wrote something there. The merge then had a guess to weigh against the
window that wrote the value, and for a list, an item too many:
- the long-document bench arm (the sample's invoices, their terms pages appended; `extract bench --long-only`):
  a window of terms has no table cell to ground `items` in, so the model copied its few-shot examples' items
  ("Subtotal: 29.87", "Monthly hosting") into it, and the merged union passed the schema's 6 items: 3 of its 6
  documents, and every curve document of 5 windows or more, were `schema_violation` dead letters (`maxItems`);
- Kleister NDA train: a window without a date or a duration wrote one for `effective_date` or `term`.

So where a grounded field's finder reads nothing in a window, and reads something in another window of the same
document, that window decodes the field as null (a nullable field), or a list of such items as `[]` (a list that
may be empty). It is the rule a whole document already follows (the field is one of the document's values, and
this window writes none), and a null loses the merge to any window's value. A field no window finds anything for
keeps its plain type in every window, as before; so does one that may not be null or empty.

Grounding marks the node (`UNFOUND_KEY`, only when asked: `ground(..., mark_free=True)`); `silence_elsewhere`
reads the marks of a batch's requests and takes them all off.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from schemas.walk import allows_null, iter_subschemas

UNFOUND_KEY = "x-unfound"  # a grounded field whose finder read nothing in this text (schemas.grounding.core)


def _marked(grammar: dict[str, Any] | None) -> dict[tuple[Any, ...], dict[str, Any]]:
    """The nodes of a grammar that grounding marked unfound, by path."""
    if grammar is None:
        return {}
    return {path: node for path, node in iter_subschemas(grammar) if node.get(UNFOUND_KEY) is True}


def _nodes(grammar: dict[str, Any]) -> dict[tuple[Any, ...], dict[str, Any]]:
    return dict(iter_subschemas(grammar))


def silence_elsewhere(grammars: Sequence[dict[str, Any] | None], documents: Sequence[Any]) -> list[str]:
    """Each request's grammar (in place) with every field unfound in it, but found in another request of the same
    document (`documents`: each request's document, equal for a document's windows), decoded as null, or its list
    as `[]` (module docstring); every `UNFOUND_KEY` mark taken off. The paths silenced, as `window i: path`."""
    marked = [_marked(g) for g in grammars]
    groups: dict[Any, list[int]] = {}
    for request, document in enumerate(documents):
        groups.setdefault(document, []).append(request)
    silenced = []
    for requests in groups.values():
        if len(requests) < 2:
            continue
        nodes = {r: _nodes(grammars[r]) for r in requests if grammars[r] is not None}
        for r in requests:
            for path, node in marked[r].items():
                if not any(path in nodes.get(other, {}) and path not in marked[other]
                           for other in requests if other != r):
                    continue  # no window of the document reads anything for it: its plain type, as before
                if _silence(grammars[r], path, node, nodes[r]):  # type: ignore[arg-type]
                    silenced.append(f"window {requests.index(r)}: {'.'.join(str(p) for p in path)}")
    for found in marked:
        for node in found.values():
            node.pop(UNFOUND_KEY, None)
    return silenced


def _silence(grammar: dict[str, Any], path: tuple[Any, ...], node: dict[str, Any],
             nodes: dict[tuple[Any, ...], dict[str, Any]]) -> bool:
    """Null for a nullable node; `maxItems: 0` on the list it is the items of, where the list may be empty."""
    if allows_null(node):
        node.clear()
        node["type"] = "null"
        return True
    if path and path[-1] == "items":
        parent = nodes.get(path[:-1])
        if parent is not None and not parent.get("minItems"):
            parent["maxItems"] = 0
            return True
    return False
