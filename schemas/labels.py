"""Labels: the words a document writes before a value on its line (`Order #: BL8449-1`, `Purchase date: 11 Jan
2026`, `Name: Jane Smith, Email: jane@x.io`), and whether they name a field.

Forms, contact forms, e-mail headers and invoices label their values. A value written under another field's label
(`Payment due: 01 Mar 2026` for an `issue_date`, `Submitted: 2026-01-20` for an `order_date`) is the small model's
most confident kind of wrong answer. Grounding leaves such a value out of a field's candidates where the document
labels another value with the field's own words (`schemas.grounding`), and the calibration's leaf model reads
whether a value stands under a label of its field's words (`workers.calibrator`).

A label is one to forty letters, spaces and `.#/&()'-`, at the start of a line or after a separator (`,` `;` `|`, a
tab, two spaces), ending in `:` or `#`. Words match by their first four letters, case and hyphens aside.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from functools import lru_cache
from typing import Any

from schemas.cells import PER_TEXT_KEPT

STRING_JSON = json.encoder.encode_basestring_ascii  # what json.dumps does with a str (its C encoder)


def json_text(value: Any) -> str:
    """`json.dumps(value)`, a string's without json.dumps's own calls (a window's labelled runs of words are
    thousands)."""
    return STRING_JSON(value) if type(value) is str else json.dumps(value)

STOP_WORDS = frozenset({"the", "of", "to", "for", "and", "or", "an", "in", "on", "by", "at", "is", "your", "our"})
_LABEL_TEXT = r"[A-Za-z][A-Za-z .#/&()'-]{0,40}?"
_START = r"(?:^|(?<=[,;|\t])|(?<=\s{2}))[ \t>*•-]*"
# A label just before an offset (searched with endpos = the offset): `^` only at a real line start
LABEL_BEFORE = re.compile(rf"{_START}({_LABEL_TEXT})[ \t]*[:#]+[ \t]*$", re.MULTILINE)
# A labelled value: the label, then the value up to a tab, `|`, two spaces, the next `, Label:` or the line's end
LABELLED = re.compile(rf"{_START}(?P<label>{_LABEL_TEXT})[ \t]*[:#]+[ \t]*"
                      rf"(?P<value>[^\n]*?)(?=\s{{2}}|[|\t]|[,;][ \t]*{_LABEL_TEXT}[ \t]*[:#]|[ \t]*$)",
                      re.MULTILINE)


@lru_cache(maxsize=PER_TEXT_KEPT)
def labelled_matches(text: str) -> tuple[re.Match[str], ...]:
    """`LABELLED.finditer(text)`, scanned once per text: grounding reads a document's labelled values, its label
    texts, its blank labels and its concepts' labels (`schemas.grounding.concepts`) from the same matches (four
    scans of each window of a long document before)."""
    return tuple(LABELLED.finditer(text))


# An e-mail's header: the lines it opens with, up to the first blank line, at least two of them header fields and
# one `From:` or `To:`. Its `Date:` (or `Sent:`) line says when the message was sent.
_HEADER_LINE = re.compile(r"(from|to|cc|bcc|subject|date|sent|reply-to|message-id)[ \t]*:", re.IGNORECASE)
_SENT_LINE = re.compile(r"(?:date|sent)[ \t]*:[ \t]*(?P<value>[^\n]*)", re.IGNORECASE)
# A field named for the message itself (`date`, `sent_at`, `email_date`, `received_time`): the header's date is its
MESSAGE_WORDS = frozenset({"date", "time", "sent", "mess", "emai", "mail", "rece", "head"})


def name_words(name: str) -> set[str]:
    """A name's words, for matching a field's name against a document's label: split at case changes and
    non-letters, hyphens inside a word dropped (`E-mail` → `email`), lower case, at least two letters, not a
    stop word, cut to their first four letters (`orderNumber` → {orde, numb}; `Purchase date` → {purc, date})."""
    name = re.sub(r"(?<=[A-Za-z])-(?=[A-Za-z])", "", name)
    name = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", name)
    return {w.lower()[:4] for w in re.split(r"[^A-Za-z]+", name) if len(w) >= 2 and w.lower() not in STOP_WORDS}


def field_words(names: Iterable[str]) -> set[str]:
    """The words of a field's names (its own and its parent's: `vendor.name` → {vend, name})."""
    return set().union(*(name_words(n) for n in names))


def label_before(text: str, start: int) -> str | None:
    """The label the document writes before offset `start` on the same line, if only a label stands between the
    line's start (or a separator) and the value: `Order #: BL8449-1` → `Order`, `Total due: $3.00` → `Total due`.
    At most 80 characters back: a longer line's middle is not a line's start."""
    line_start = text.rfind("\n", 0, start) + 1
    match = LABEL_BEFORE.search(text, max(line_start, start - 80), start)
    return match.group(1).strip() if match else None


def labelled(text: str) -> list[tuple[set[str], int, int]]:
    """Each labelled value of the document: (the label's words, the value's start, its end)."""
    return [(name_words(m.group("label")), m.start("value"), m.end("value")) for m in labelled_matches(text)
            if m.end("value") > m.start("value")]


def sent_line(text: str) -> tuple[int, int] | None:
    """Where an e-mail's header writes when the message was sent: the value of its `Date:` or `Sent:` line, (start,
    end), for a document that opens with an e-mail header (`From: ...`, `To: ...`, `Date: ...`); else None."""
    offset, seen, sent, addressed = len(text) - len(text.lstrip("\n")), 0, None, False
    for line in text[offset:].split("\n"):
        if not line.strip():
            break
        match = _HEADER_LINE.match(line)
        if match is None:
            return None  # not a header: a line of another kind before the first blank one
        seen += 1
        addressed |= match.group(1).lower() in ("from", "to")
        sent_match = _SENT_LINE.match(line)
        if sent_match and sent is None:
            sent = (offset + sent_match.start("value"), offset + sent_match.end("value"))
        offset += len(line) + 1
    return sent if seen >= 2 and addressed else None


def names_message(words: set[str]) -> bool:
    """Whether a field's name (its words) says it is the message's own date: `date`, `sent_at`, `email_date`."""
    return bool(words) and words <= MESSAGE_WORDS


def outside(finder: Callable[[str], list[Any]], text: str, span: tuple[int, int]) -> set[str]:
    """The values (`finder`, as JSON text) the text writes outside `span`."""
    start, end = span
    return {json_text(v) for v in finder(text[:start] + " " * (end - start) + text[end:])}


# A placeholder is no value: `Product: N/A` says the form has none
PLACEHOLDERS = frozenset({"n/a", "n.a.", "na", "none", "null", "nil", "-", "--", "—", "tbd", "tba", "unknown",
                          "not applicable", "not available", "not provided", "not given", "not stated"})


_LABEL_LINE = re.compile(rf"[ \t>*•-]*{_LABEL_TEXT}[ \t]*[:#]")


def blank_labels(text: str) -> list[set[str]]:
    """The words of each label the document leaves blank: a placeholder after it (`Amount paid: -`, `Order #:
    N/A`), or nothing after it on its line where the next line is another label or there is none (`Product: ` in
    a form; not `Message:` with the message below it)."""
    out = []
    for m in labelled_matches(text):
        value = m.group("value").strip()
        if value:
            blank = value.casefold() in PLACEHOLDERS
        else:
            line_end = text.find("\n", m.end("value"))
            following = "" if line_end < 0 else text[line_end + 1:].split("\n", 1)[0]
            blank = line_end < 0 or bool(_LABEL_LINE.match(following))
        if blank:
            out.append(name_words(m.group("label")))
    return out


def label_texts(text: str) -> set[str]:
    """The labels the document writes, as text in lower case (`subject`, `order #`... without the `:`): no field's
    value (`Product:` with nothing after it is not a product named `Product`)."""
    return {m.group("label").strip().casefold() for m in labelled_matches(text)}


LabelIndex = tuple[set[str], dict[str, list[set[str]]]]


def label_index(finder: Callable[[str], list[Any]], document: str,
                regions: list[tuple[set[str], int, int]] | None = None) -> LabelIndex:
    """For one kind of value (`finder`, e.g. `schemas.grounding.dates`): (the values the document writes outside
    every labelled value, value → the words of each label it stands under), values as JSON text. `regions`: the
    document's `labelled` values, where the caller has them already."""
    regions = labelled(document) if regions is None else regions
    if not regions:  # prose: nothing is labelled, so nothing is left out (`named_only` reads no free value then)
        return set(), {}
    return unlabelled_values(finder, document, regions), labelled_values(finder, document, regions)


def labelled_values(finder: Callable[[str], list[Any]], document: str,
                    regions: list[tuple[set[str], int, int]] | None = None) -> dict[str, list[set[str]]]:
    """The second of `label_index`: value (JSON text) → the words of each label it stands under."""
    regions = labelled(document) if regions is None else regions
    under: dict[str, list[set[str]]] = {}
    for words, start, end in regions:
        for value in finder(document[start:end]):
            under.setdefault(json_text(value), []).append(words)
    return under


def unlabelled_values(finder: Callable[[str], list[Any]], document: str,
                      regions: list[tuple[set[str], int, int]] | None = None) -> set[str]:
    """The first of `label_index`: the values (JSON text) the document writes outside every labelled value (the
    whole document read again, its labelled values blanked)."""
    regions = labelled(document) if regions is None else regions
    if not regions:
        return set()
    blanked = list(document)
    for _, start, end in regions:
        blanked[start:end] = " " * (end - start)
    return {json_text(v) for v in finder("".join(blanked))}


def names(label: set[str], words: set[str], rivals: Iterable[set[str]] = ()) -> bool:
    """Whether a label (its words) names the field whose name has `words`: it shares a word with it, and no
    other field of the schema (`rivals`, their words) shares more (`Date of issue` names `issue_date`, not
    `due_date`; `Date` names both `date` and `due_date`)."""
    shared = len(label & words)
    return shared > 0 and all(len(label & rival) <= shared for rival in rivals)


def named_only(candidates: list[Any], index: LabelIndex, words: set[str],
               rivals: Iterable[set[str]] = ()) -> list[Any]:
    """The candidates without those the document writes only under labels that do not name the field (`names`),
    where it writes some candidate under a label that does: `issue_date` loses `Payment due: 01 Mar 2026` beside
    `Date of issue: January 30, 2026`, and `due_date` the issue date; a field no label names keeps all, and so
    does a value the document also writes unlabelled."""
    free, under = index
    return named_only_of(candidates, under, lambda: free, words, rivals)


def label_groups(under: dict[str, list[set[str]]]) -> list[tuple[set[str], list[str]]]:
    """`under` by label: (a label's words, the values written under a label of those words), each label's words
    once. A field's `named_only_of` asks each label once whether it names the field, not each value's labels (a
    text field's values are every run of words of each labelled value: thousands in a 2,000-token window)."""
    groups: dict[frozenset[str], tuple[set[str], list[str]]] = {}
    for value, labels in under.items():
        for label in labels:
            key = frozenset(label)
            group = groups.get(key)
            if group is None:
                group = groups[key] = (label, [])
            group[1].append(value)
    return list(groups.values())


def named_only_of(candidates: list[Any], under: dict[str, list[set[str]]], free_of: Callable[[], set[str]],
                  words: set[str], rivals: Iterable[set[str]] = (),
                  groups: list[tuple[set[str], list[str]]] | None = None,
                  keys_of: Callable[[list[Any]], list[str]] | None = None) -> list[Any]:
    """`named_only` with the values written unlabelled asked for (`free_of()`) only where they decide something: a
    candidate stands under a label that names the field (for a text field, the unlabelled values are every run of
    words in the rest of the document). `groups`: `label_groups(under)`, where the caller keeps it; `keys_of`: the
    candidates' JSON texts, where the caller keeps them."""
    rivals = list(rivals)
    if groups is None:
        named = {value for value, labels in under.items() if any(names(label, words, rivals) for label in labels)}
    else:
        named = {value for label, values in groups if names(label, words, rivals) for value in values}
    if not named:  # no label names the field: all stay (each candidate's JSON text is not needed)
        return candidates
    keys = [json.dumps(c) for c in candidates] if keys_of is None else keys_of(candidates)
    if named.isdisjoint(keys):
        return candidates
    free = free_of()
    return [c for c, key in zip(candidates, keys, strict=True) if key in free or key in named or key not in under]
