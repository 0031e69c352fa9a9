"""Normal forms of values a document writes, for a free-text field decoded as runs of its words
(`schemas.substring`): a record often writes a date or a range of hours in a normal form the document does not
(`launched on November 5, 2022` → `2022-11-05`; `from 8:00 AM to 10:00 PM` → `8:00 AM - 10:00 PM`). They are added
as cells of their own, so the grammar allows them beside the document's runs: still only values the document
writes, in the forms records write them.

Chosen on DeepJSONEval en (first 32 documents: 8 of 44 refused gold values were such ranges and dates); on the
other corpora (sample, tickets, multilingual, DeepJSONEval zh) no gold value needed them, and they change no
reach there (lab/reach.py).
"""

from __future__ import annotations

import re
from typing import Any

from schemas.grounding.names import comma_free_names

# A time of day: `8:00`, `8:00 AM`, `8 a.m.`, `17h30` is not read (no corpus writes it)
TIME = r"\d{1,2}(?::\d{2})?\s?(?:[AaPp]\.?[Mm]\.?(?![\w]))?"
# Two times with `to`, `until`, `till`, `through` or a dash between them
# `7:30 AM and remain welcoming until 5:00 PM`, `9:00 AM, welcoming explorers until 4:30 PM`: up to four words
# between the first time and the word before the second (DeepJSONEval en, all 136 documents: 2 of 1724 leaves)
TIME_RANGE = re.compile(rf"(?<![\w:])(?P<a>{TIME})(?:[,;]?(?:\s+[^\s\d:]+){{1,4}}?)?\s*"
                        rf"(?:\s(?:to|until|till|through|and)\s|[-–—])\s*(?P<b>{TIME})(?![\w:])")
RANGE_FORMS = ("{a} - {b}", "{a}-{b}", "{a} – {b}", "{a}–{b}", "{a} to {b}")


def _a_time(text: str) -> bool:
    """A time, not a bare number (`3 to 5 players`): it writes minutes or a.m./p.m."""
    return ":" in text or bool(re.search(r"[AaPp]\.?[Mm]", text))


def time_ranges(text: str) -> list[str]:
    """Every range of times the text writes, in the forms records write a range (`8:00 AM - 10:00 PM`,
    `10:30-17:00`, `10:30 to 17:00`)."""
    found: dict[str, None] = {}
    for match in TIME_RANGE.finditer(text):
        a, b = match.group("a").strip(), match.group("b").strip()
        if _a_time(a) and _a_time(b):
            for pair in dict.fromkeys([(a, b), (_24h(a), _24h(b))]):
                for form in RANGE_FORMS:
                    found[form.format(a=pair[0], b=pair[1])] = None
    return list(found)


def _24h(time: str) -> str:
    """A time with a.m./p.m. on a 24-hour clock (`11:30 PM` → `23:30`, `9 AM` → `09:00`... as `9:00`); a time
    without them as written."""
    match = re.fullmatch(r"(\d{1,2})(?::(\d{2}))?\s?([AaPp])\.?[Mm]\.?", time)
    if match is None:
        return time
    hour = int(match.group(1)) % 12 + (12 if match.group(3) in "Pp" else 0)
    return f"{hour}:{match.group(2) or '00'}"


def normal_forms(index: Any) -> list[str]:
    """The normal forms of the values the document of `index` (a DocumentIndex) writes: its dates as YYYY-MM-DD,
    its ranges of times and its organisations' names without the comma before their legal form
    (`schemas.grounding.names`). A duration is offered to a field that asks for one (`schemas.grounding.durations`),
    not to every text field."""
    return index.cached("normal forms", lambda: [*index.values("date"), *time_ranges(index.document),
                                                 *comma_free_names(index.document)])
