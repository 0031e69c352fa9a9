"""A window's list whose items its document writes only in other windows: `[]` in that window.

A document read whole is grounded on all of its text: a grounded field whose finder reads candidates anywhere in
it is decoded as one of them (`schemas.grounding.core`). A long document is read in windows (`workers.windows`),
each grounded in its own text, so a window that holds none of a list's items left the items their plain type
(grounding never forbids), and the model wrote some there. The merge takes the union of the windows' items, so
each such window added items the document does not hold, and the union passed the list's `maxItems`:
- chosen on the long-document bench arm (the sample's invoices with terms pages appended; `extract bench
  --long-only`): a window of terms has no table cell to ground `items` in, so the model copied its few-shot
  examples' items ("Subtotal: 29.87", "Monthly hosting") into it; 3 of the arm's 6 documents, and every curve
  document of 5 windows or more, were `schema_violation` dead letters (`maxItems` at `items`).

So where a list's grounded items are found in no candidate in a window, and in some in another window of the
same document, that window decodes the list as `[]` (where the list may be empty). A list no window finds any
item for keeps its plain items in every window, as before; so does one with `minItems`.

Scalars are left alone. Null for a scalar found only in other windows was tried (2026-12-07, lab journal): on
Kleister NDA train (32 documents, not chosen on it) precision rose 0.425 → 0.451 and recall fell 0.438 → 0.392
(F1 0.432 → 0.420): a window the finder missed a duration or place in had written the right one freely, and the
merge already weighs a scalar's windows by confidence (`workers.merge`), where a list's windows only add up.

Grounding marks an unfound node (`UNFOUND_KEY`, only when asked: `ground(..., mark_free=True)`);
`silence_elsewhere` reads the marks of a batch's requests and takes them all off.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from schemas.walk import iter_subschemas

UNFOUND_KEY = "x-unfound"  # a grounded field whose finder read nothing in this text (schemas.grounding.core)


def silence_elsewhere(grammars: Sequence[dict[str, Any] | None], documents: Sequence[Any]) -> list[str]:
    """Each request's grammar (in place) with every list whose items are unfound in it, but found in another request
    of the same document (`documents`: each request's document, equal for a document's windows), decoded as `[]`
    (module docstring); every `UNFOUND_KEY` mark taken off. The item paths silenced, as `window i: path`."""
    nodes = [dict(iter_subschemas(g)) if g is not None else {} for g in grammars]
    marked = [{path for path, node in found.items() if node.pop(UNFOUND_KEY, None) is True} for found in nodes]
    groups: dict[Any, list[int]] = {}
    for request, document in enumerate(documents):
        groups.setdefault(document, []).append(request)
    silenced = []
    for requests in groups.values():
        if len(requests) < 2:
            continue
        for r in requests:
            for path in marked[r]:
                if not path or path[-1] != "items":
                    continue  # a scalar: left alone (module docstring)
                if not any(path in nodes[other] and path not in marked[other] for other in requests if other != r):
                    continue  # no window of the document reads anything for it: its plain type, as before
                if _empty_list(path, nodes[r]):
                    silenced.append(f"window {requests.index(r)}: {'.'.join(str(p) for p in path)}")
    return silenced


def _empty_list(path: tuple[Any, ...], nodes: dict[tuple[Any, ...], dict[str, Any]]) -> bool:
    """`maxItems: 0` on the list whose items are at `path`, where the list may be empty."""
    parent = nodes.get(path[:-1])
    if parent is None or parent.get("minItems"):
        return False
    parent["maxItems"] = 0
    return True
