"""pysbd's sentences, the same ones, without its two costs that grow with the square of a paragraph's length.

Window planning (workers.windows) splits a paragraph longer than a window into sentences with pysbd. On a paragraph
with no line break (the sample's 33,000-character contract) pysbd 0.3.4 spends almost all its time in two places,
and both are quadratic in the length of the line:

- `AbbreviationReplacer.search_for_abbreviations_in_string`: for every abbreviation of its list written at the start
  of a word (" co" in " contract" counts), once per occurrence, a substitution over the whole line, with a pattern
  made of that occurrence's text (`replace_period_of_abbr` and its two kin). Every occurrence of one abbreviation
  written the same way, with the same decision, applies the same substitution again. A substitution only turns "."
  into "∯", and what its pattern asks of a character ("\\s", a letter, "\\.", or "." unescaped, any character) is
  true of the "∯" after it only if it was true of the "." before it: a second application of a pattern finds only
  what its first already replaced, at any later time. So each distinct substitution is applied once, at its first
  occurrence, in the same order as before: the same text. Which occurrences apply one is decided as pysbd decides
  it (the next word's first letter, paired by index as pysbd pairs them).
- `Segmenter.sentences_with_char_spans`: for every sentence, a regular expression of its own text (compiled, and
  filling the `re` module's cache of 512 with patterns used once) searched from the start of the text. The same
  search is made with `str.find` and the whitespace after a match (`\\s*` matches what `str.isspace` accepts):
  the same matches, in the same order; an empty sentence takes pysbd's own path. A sentence written again (the
  sample's contract is one sentence written 131 times) goes on from where its last search stopped, not from the
  start: the matches before it end before the sentences found since, so pysbd's search passes them too.

Everything else is pysbd's. `tests/unit/test_sentence_split.py` checks the sentences against pysbd's on the jobs'
documents and on texts written to exercise each rule.
"""

from __future__ import annotations

import functools
import re
from typing import Any


def _dedup_search(self: Any, text: str) -> str:
    """`AbbreviationReplacer.search_for_abbreviations_in_string`, each distinct substitution applied once."""
    lowered = text.lower()
    abbreviation = self.lang.Abbreviation
    prepositive, number = abbreviation.PREPOSITIVE_ABBREVIATIONS, abbreviation.NUMBER_ABBREVIATIONS
    for abbr in abbreviation.ABBREVIATIONS:
        stripped = abbr.strip()
        if stripped not in lowered:
            continue
        found = _at_word_start(stripped, text)
        if not found:
            continue
        next_word_start = r"(?<={" + str(re.escape(stripped)) + "} ).{1}"
        # pysbd's pattern asks for `{abbr} ` written before (its braces are no quantifier: the text is letters and
        # dots), which a text rarely holds: a search at every position only where it does
        char_array = re.findall(next_word_start, text) if "{" + stripped + "} " in text or not _plain(stripped) \
            else []
        applied: set[tuple[int, str]] = set()
        for ind, match in enumerate(found):
            char = char_array[ind] if ind < len(char_array) else ""
            key = match.strip()
            lower = key.lower()
            if str(char).isupper() and lower not in prepositive:
                continue  # pysbd's scan_for_replacements does nothing here
            kind = 0 if lower in prepositive else 1 if lower in number else 2
            if (kind, key) in applied:
                continue
            applied.add((kind, key))
            text = self.scan_for_replacements(text, match, ind, char_array)
    return text


def _plain(abbreviation: str) -> bool:
    """Letters, digits and dots, at least one letter: no regular expression syntax but `.`, no quantifier `{n}`."""
    return any(c.isalpha() for c in abbreviation) and all(c.isalnum() or c == "." for c in abbreviation)


def _at_word_start(stripped: str, text: str) -> list[str]:
    """`re.findall(rf"(?:^|\\s|\\r|\\n){stripped}", text, flags=re.IGNORECASE)` (pysbd's): the text's start tried
    apart, then a pattern that opens with `\\s`, so that `re` skips to the next whitespace before trying it (the
    pattern tried at every position was half of pysbd's time on the sample's contract). `\\r` and `\\n` are
    `\\s`; `^` matches at the text's start only, so the matches after one there are those from its end."""
    if not _plain(stripped):
        return re.findall(rf"(?:^|\s|\r|\n){stripped}", text, flags=re.IGNORECASE)
    first = re.match(stripped, text, flags=re.IGNORECASE)
    rest = re.compile(rf"\s{stripped}", flags=re.IGNORECASE)
    return [first.group(), *rest.findall(text, first.end())] if first else rest.findall(text)


@functools.cache
def _language(code: str) -> Any:
    """pysbd's language `code`, its abbreviation replacer applying each substitution once."""
    from pysbd.languages import Language

    base = Language.get_language_code(code)
    replacer = type("AbbreviationReplacer", (base.AbbreviationReplacer,),
                    {"search_for_abbreviations_in_string": _dedup_search})
    return type(base.__name__, (base,), {"AbbreviationReplacer": replacer, "Processor": _processor_class()})


# pysbd's list items (`ListItemReplacer`): before anything else, it looks for a numbered list (`1.`), a list of letters
# (`a.`) and one of letters in brackets (`a)`) with patterns whose every alternative opens with a look-behind, tried
# at every position of the text (a quarter of its time on the sample's contract, which has no list). A match of
# each can start only where these give: next to a digit; one character before a `.`; where a run of `[a-z]` before a
# `)` starts. Where none matches there, pysbd's scan would find nothing and do nothing: it is skipped.
def _digit_neighbours(text: str) -> set[int]:
    return {at for m in re.finditer(r"\d", text) for at in (m.start() - 1, m.start()) if at >= 0}


def _before_stops(text: str) -> list[int]:
    return [m.start() - 1 for m in re.finditer(r"\.", text) if m.start()]


def _letter_runs_before_brackets(text: str) -> list[int]:
    starts = []
    for bracket in re.finditer(r"\)", text):
        at = bracket.start()
        while at and "a" <= text[at - 1] <= "z":
            at -= 1
        if at < bracket.start():
            starts.append(at)
    return starts


@functools.cache
def _list_starts() -> dict[str, Any]:
    from pysbd.lists_item_replacer import ListItemReplacer

    return {ListItemReplacer.NUMBERED_LIST_REGEX_1: _digit_neighbours,
            ListItemReplacer.ALPHABETICAL_LIST_WITH_PERIODS: _before_stops,
            ListItemReplacer.ALPHABETICAL_LIST_WITH_PARENS: _letter_runs_before_brackets}


def _none_found(regex: str, text: str) -> bool:
    """Whether `re.findall(regex, text)` is sure to find nothing: one of the list patterns above, matching at none
    of the places where a match of it can start. False for any other pattern (pysbd's own search then decides)."""
    starts = _list_starts().get(regex)
    if starts is None:
        return False
    pattern = re.compile(regex)
    return not any(pattern.match(text, at) for at in starts(text))


@functools.cache
def _processor_class() -> Any:
    """pysbd's `Processor` whose list items skip a scan that finds nothing (`_none_found`); the rest is pysbd's."""
    from pysbd.lists_item_replacer import ListItemReplacer
    from pysbd.processor import Processor
    from pysbd.utils import Text

    class ListItems(ListItemReplacer):
        def scan_lists(self, regex1: str, regex2: str, replacement: str, strip: bool = False) -> None:
            if not _none_found(regex1, self.text):  # else pysbd's loop runs over no item
                super().scan_lists(regex1, regex2, replacement, strip)

        def iterate_alphabet_array(self, regex: str, parens: bool = False, roman_numeral: bool = False) -> Any:
            if _none_found(regex, self.text):  # pysbd's loop runs over no item and gives the text back
                return self.text
            return super().iterate_alphabet_array(regex, parens, roman_numeral)

    class ListsProcessor(Processor):
        def process(self) -> Any:  # pysbd 0.3.4's `Processor.process`, its list items `ListItems`
            if not self.text:
                return self.text
            self.text = self.text.replace("\n", "\r")
            li = ListItems(self.text)
            self.text = li.add_line_break()
            self.replace_abbreviations()
            self.replace_numbers()
            self.replace_continuous_punctuation()
            self.replace_periods_before_numeric_references()
            self.text = Text(self.text).apply(
                self.lang.Abbreviation.WithMultiplePeriodsAndEmailRule,
                self.lang.GeoLocationRule, self.lang.FileFormatRule)
            return self.split_into_segments()

    return ListsProcessor


def _segmenter_class() -> Any:
    import pysbd
    from pysbd.utils import TextSpan

    class Segmenter(pysbd.Segmenter):
        def sentences_with_char_spans(self, sentences: list[str]) -> list[Any]:
            text = self.original_text
            spans, prior = [], 0
            resume: dict[str, int] = {}  # a sentence seen before: where its last search stopped
            for sentence in sentences:
                span = _found(sentence, text, prior, resume.get(sentence, 0)) if sentence else \
                    _pysbd_found(sentence, text, prior)
                if span is not None:
                    spans.append(TextSpan(text[span[0]:span[1]], *span))
                    prior = resume[sentence] = span[1]
            return spans

    return Segmenter


def _found(sentence: str, text: str, prior: int, at: int = 0) -> tuple[int, int] | None:
    """The first of `re.finditer(re.escape(sentence) + r"\\s*", text)` that ends after `prior`, by `str.find`;
    `at`: where a match of that sequence ends that ends at or before `prior` (the search goes on from there)."""
    while (found := text.find(sentence, at)) >= 0:
        end = found + len(sentence)
        while end < len(text) and text[end].isspace():
            end += 1
        if end > prior:
            return found, end
        at = end
    return None


def _pysbd_found(sentence: str, text: str, prior: int) -> tuple[int, int] | None:
    """pysbd's own search for one sentence (its `sentences_with_char_spans` loop body)."""
    for match in re.finditer(rf"{re.escape(sentence)}\s*", text):
        if match.end() > prior:
            return match.start(), match.end()
    return None


_SEGMENTER: Any = None
# The pysbd whose internals the two methods above replace (0.3.4, its last release, from 2021): another one gets
# pysbd's own segmenter, slower on long paragraphs but its own sentences whatever it changed inside.
CHECKED_PYSBD = ("0.3.4",)


def segmenter(language: str) -> Any:
    """A pysbd segmenter (`clean=False`) of `language` that gives pysbd's sentences (module docstring); pysbd's own
    where the installed pysbd is not one whose internals this module was checked against (`CHECKED_PYSBD`)."""
    global _SEGMENTER
    import pysbd

    if getattr(pysbd, "__version__", None) not in CHECKED_PYSBD:
        return pysbd.Segmenter(language=language, clean=False)
    if _SEGMENTER is None:
        _SEGMENTER = _segmenter_class()
    found = _SEGMENTER(language=language, clean=False)
    found.language_module = _language(language)
    return found
