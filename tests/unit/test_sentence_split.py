"""workers.sentence_split gives pysbd's sentences, the same ones in the same order, without pysbd's repeated
substitutions and per-sentence regular expressions (issue 57 item 4): checked against pysbd itself on the jobs'
documents, on 20,000-character documents made of them, and on texts written to exercise its rules."""

from __future__ import annotations

import re

import pyarrow.parquet as pq
import pysbd
import pytest
from pysbd import segmenter as pysbd_segmenter
from pysbd.abbreviation_replacer import AbbreviationReplacer

from workers.sentence_split import segmenter
from workers.windows import paragraphs

JOB_TEXTS = ("jobs/sample/invoices.parquet", "jobs/tickets/tickets.parquet", "jobs/multilingual/invoices.parquet",
             "jobs/contracts/contracts.parquet")

WRITTEN = [
    "Acme Inc. and Mr. Smith signed on Jan. 5. The term is two years.",
    "Dr. Jones met Prof. Lee at 5 p.m. in the U.S. He left at 6 a.m. the next day. Capt. Kirk, Gen. Patton "
    "and Sgt. Pepper arrived. See fig. 3 and No. 42 (p. 7). Art. 9 applies; cf. Sec. 4. The co. was paid.",
    "The contract (the \"Agreement\") is made by Acme Co. Ltd. and Bolt Corp. It starts on Feb. 1, 2024. "
    "Payment is due in 30 days. E.g. the fee is $1,200.50. I.e. it is fixed. etc. etc. The end.",
    "He said \"Stop. Now.\" and left. She asked: 'Why?' Nobody knew... Then what? Wow! 1. First item 2. Second "
    "item a. sub item b. another. Vol. 3, ch. 2, para. 5 cont. on pg. 9. St. Louis and Mt. Everest. Ft. Worth.",
    "Mr. Mr. Mr. Smith. mr. smith. MR. SMITH. Mr.Smith. Dr. dr. Dr. Dr. The. no. 5 and No. 6 and no. A",
    "合同由甲方和乙方签订。付款期限为三十天。如有争议，双方协商解决！是否同意？同意。",
    "",
    "   ",
    "No punctuation at all here just words",
]


def sample_contract() -> str:
    """The sample's contract written as one paragraph, on one line (33,000 characters)."""
    texts = pq.read_table(JOB_TEXTS[0]).column("text").to_pylist()
    contract = max(texts, key=len)
    assert len(contract) > 30_000 and "\n\n" not in contract
    return contract


def job_documents() -> list[str]:
    found = []
    for path in JOB_TEXTS:
        table = pq.read_table(path)
        column = "text" if "text" in table.column_names else table.column_names[-1]
        found += [t for t in table.column(column).to_pylist() if t]
    assert len(found) > 100
    return found


def joined(texts: list[str], count: int, chars: int) -> list[str]:
    """Documents of `chars` characters made of the jobs' documents, as lab/experiments/stage_cpu.py makes them."""
    out = []
    for i in range(count):
        text = texts[i % len(texts)]
        while len(text) < chars:
            text += "\n" + texts[(i + len(text)) % len(texts)]
        out.append(text[:chars])
    return out


def pysbd_sentences(text: str, language: str) -> list[str]:
    return pysbd.Segmenter(language=language, clean=False).segment(text)


LONG = 12_000  # characters: a longer document is checked by its paragraphs here, and whole in the test below


def test_the_sentences_are_pysbds_on_the_jobs_documents_and_their_paragraphs():
    """Every job document by its paragraphs, and whole where it is under LONG (pysbd's time grows faster than a
    text: the contracts job's 12 whole documents took 9 of this test's 12 s, for what the next test checks)."""
    checked = 0
    for text in job_documents():
        pieces = [*([text] if len(text) < LONG else []), *(text[a:b] for a, b in paragraphs(text))]
        for piece in pieces:
            assert segmenter("en").segment(piece) == pysbd_sentences(piece, "en"), piece[:80]
            checked += 1
    assert checked > 300


def test_the_sentences_are_pysbds_on_long_documents_and_the_one_paragraph_contract():
    texts = job_documents()
    contract = sample_contract()
    contracts_job = pq.read_table(JOB_TEXTS[3]).column("text").to_pylist()
    longest = max(contracts_job, key=len)  # the contracts job's paragraphs, headings and numbered clauses
    assert len(longest) > LONG
    for text in [contract, contract[:20_000], longest, *joined(texts, 6, 20_000)]:
        assert segmenter("en").segment(text) == pysbd_sentences(text, "en")


@pytest.mark.parametrize("language", ["en", "zh"])
def test_the_sentences_are_pysbds_on_written_texts(language):
    for text in [*WRITTEN, " ".join(WRITTEN), "\n".join(WRITTEN) * 3]:
        assert segmenter(language).segment(text) == pysbd_sentences(text, language), text[:80]


def test_a_substitution_is_applied_once_per_abbreviation_as_written(monkeypatch):
    """The change itself: pysbd substitutes over the whole line again for every occurrence of an abbreviation."""
    calls: list[str] = []
    original = AbbreviationReplacer.scan_for_replacements

    def counting(self, txt, am, ind, char_array):
        calls.append(am)
        return original(self, txt, am, ind, char_array)

    monkeypatch.setattr(AbbreviationReplacer, "scan_for_replacements", counting)
    contract = sample_contract()[:20_000]
    ours = segmenter("en").segment(contract)
    ours_calls, calls[:] = len(calls), []
    assert ours == pysbd_sentences(contract, "en")
    assert ours_calls * 20 < len(calls)  # 5 against 658 (none of which changes this text)


def test_sentences_are_found_in_the_text_without_a_pattern_each(monkeypatch):
    compiled: list[str] = []

    class Counting:
        def __getattr__(self, name):
            if name == "finditer":
                return lambda pattern, *a, **k: compiled.append(pattern) or re.finditer(pattern, *a, **k)
            return getattr(re, name)

    monkeypatch.setattr(pysbd_segmenter, "re", Counting())
    text = WRITTEN[1] + " " + WRITTEN[3]
    theirs = pysbd_sentences(text, "en")
    assert len(compiled) == len(theirs) > 5  # pysbd: a pattern per sentence
    compiled.clear()
    assert segmenter("en").segment(text) == theirs
    assert compiled == []


def test_a_sentence_written_again_is_searched_for_from_where_its_last_search_stopped(monkeypatch):
    from workers import sentence_split

    starts: list[tuple[str, int]] = []
    original = sentence_split._found

    def recording(sentence, text, prior, at=0):
        starts.append((sentence, at))
        return original(sentence, text, prior, at)

    monkeypatch.setattr(sentence_split, "_found", recording)
    repeated = "The Supplier shall deliver the Goods. " * 40 + "The Supplier shall deliver. The Goods. " * 5
    for text in (repeated, sample_contract()[:20_000]):
        starts.clear()
        assert segmenter("en").segment(text) == pysbd_sentences(text, "en")
        seen: set[str] = set()
        for sentence, at in starts:
            assert (at > 0) == (sentence in seen), sentence
            seen.add(sentence)
        assert len(starts) > len(seen) + 30


def test_another_pysbd_gets_its_own_segmenter(monkeypatch):
    """The two replaced methods were checked against pysbd 0.3.4 only: another version's internals may differ, so
    it splits with its own segmenter (the same sentences, slower), not with methods written for another's."""
    import pysbd

    from workers import sentence_split

    assert type(sentence_split.segmenter("en")) is not pysbd.Segmenter  # the checked version: the faster one
    monkeypatch.setattr(pysbd, "__version__", "0.4.0")
    assert type(sentence_split.segmenter("en")) is pysbd.Segmenter


def test_abbreviations_at_a_words_start_are_pysbds_matches():
    """`_at_word_start` (the text's start, then a pattern opening with `\\s`) finds what pysbd's pattern finds, and
    its next-word search is skipped only where pysbd's would find nothing."""
    from pysbd.languages import Language

    from workers.sentence_split import _at_word_start

    abbreviations = {a.strip() for code in ("en", "zh")
                     for a in Language.get_language_code(code).Abbreviation.ABBREVIATIONS}
    texts = [*WRITTEN, "co. Co co\tCO. co\nco x{co} y{co} Z", "Co. first", "e.g. first\ne.g. second eXg x", "a",
             "\u212aM. km. \u017ft. St. ſt.", *job_documents()[:40]]
    checked = 0
    for text in texts:
        for stripped in abbreviations:
            found = _at_word_start(stripped, text)
            assert found == re.findall(rf"(?:^|\s|\r|\n){stripped}", text, flags=re.IGNORECASE), (stripped, text)
            checked += bool(found)
            if "{" + stripped + "} " not in text:  # the shortcut's condition: pysbd's search finds nothing
                assert re.findall(r"(?<={" + str(re.escape(stripped)) + "} ).{1}", text) == []
    assert checked > 200


def test_a_list_scan_is_skipped_only_where_pysbd_finds_nothing():
    """`_none_found` says "nothing" for pysbd's list patterns exactly where `re.findall` finds nothing; for any
    other pattern it never does."""
    from pysbd.lists_item_replacer import ListItemReplacer as Items

    from workers.sentence_split import _none_found

    lists = ["1. One 2. Two 3. Three", "a. first b. second", "(a) first (b) second", "a) x b) y", "i. one ii. two",
             "(iv) four (v) five", "x1. y 12. z -3. w ⁃4) v s-5) u", "9. nine\n10. ten", "ab) c", "a.b", "a. ", ".a.",
             "1.", "12.)", " 7.\t", "abc", "", ")", ".", "(z)", "Zz) Aa. Ab)", "١. ٢. arabic digits", "e.g. i.e. etc."]
    texts = [*lists, *(t.replace("\n", "\r") for t in [*WRITTEN, *job_documents()[:80]])]
    found_some = 0
    for regex in (Items.NUMBERED_LIST_REGEX_1, Items.ALPHABETICAL_LIST_WITH_PERIODS,
                  Items.ALPHABETICAL_LIST_WITH_PARENS):
        for text in texts:
            assert _none_found(regex, text) == (not re.findall(regex, text)), (regex[:30], text[:60])
            found_some += bool(re.findall(regex, text))
    assert found_some > 20
    assert not _none_found(Items.NUMBERED_LIST_PARENS_REGEX, "no list here")  # another pattern: pysbd decides
