"""How a document lays out its text: wrapped prose, or a form and table.

Text extracted from a PDF or an OCR layer, and e-mails wrapped at 72 columns, break their lines inside sentences:
a contract's paragraph is thirty lines of ten words each. Read as cells (`schemas.cells.cells_of`: a line is a
cell), such prose looks like a table of short cells, and a list's strings (kind `item`: whole cells in a tabular
document) could only be whole lines: `This Agreement ... is made between Birch Pharma,` but not
`Birch Pharma`. `wrapped` tells the two apart by where the lines break: in wrapped prose, a line that ends without
a sentence's or label's stop is followed by one that starts in lower case (the sentence goes on).

Chosen on the Kleister NDA train split (issue 56; 0.30-0.79 of line breaks inside a sentence, 32 of 32 documents),
against the shipped jobs' documents (sample 0.00, tickets 0.00, multilingual invoices at most 0.09).
"""

from __future__ import annotations

WRAPPED_SHARE = 0.2  # of consecutive non-empty lines, the share whose break falls inside a sentence
MIN_BREAKS = 5  # fewer line breaks say nothing of a layout
STOPS = ".:;!?"


def wrapped(text: str) -> bool:
    """Whether the text is prose wrapped into lines: at least `WRAPPED_SHARE` of its line breaks (between two
    non-empty lines, `MIN_BREAKS` or more) fall inside a sentence (the line ends with no stop and the next starts
    with a lower-case letter)."""
    lines = [line.strip() for line in text.splitlines()]
    breaks = [(a, b) for a, b in zip(lines, lines[1:], strict=False) if a and b]
    if len(breaks) < MIN_BREAKS:
        return False
    inside = sum(1 for a, b in breaks if b[:1].islower() and a[-1:] not in STOPS)
    return inside >= WRAPPED_SHARE * len(breaks)
