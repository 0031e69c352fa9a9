"""The finders made cheaper give what their plain versions gave (issue 57: a 20,000-character document's actor
CPU): each reference below is the finder as it was written before, kept here to compare against."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pyarrow.parquet as pq

from schemas.cells import (
    ABBREVIATION,
    CELL_BREAK,
    EDGE_BUT_BRACKETS,
    EDGE_PUNCTUATION,
    HARD_BREAK,
    MAX_WORDS,
    POSSESSIVE,
    SENTENCE_END,
    WORD,
    cells_of,
    sentences_of,
)
from schemas.grounding.finders import spans

ROOT = Path(__file__).resolve().parents[2]

# Texts that exercise each form a run can take: punctuation at either end, a run of only punctuation, `#` before a
# number or a letter, possessives, a quote after a bracket, em dashes, one-character words, a sentence written again
TRICKY = [
    "#abc's (x) \"y (2022 Edition)\" end. Anya Petrova's role. Anya Petrova's role.",
    "\"a (b)\" 's ' s # #1 #a. ... — —x— y's Priya Patel—the Indian powerhouse—delivers.",
    "' \" ) ] } ' x)' y]\" z}’ (q)” **Bold Name**, _it_ “quoted” ‘single’ (2022 Edition)\"",
    "Order #: BL8449-1 | Total: $3.00\tQty  2\nOrder #: BL8449-1 | Total: $3.00\n\nMr. Smith met Dr. Jones. They left.",
    "a", "", "   ", "... --- ——", "s's 's ’s x’s #", "#1's. #x's! (#2)",
    "Mr. Smith. A. B. x.A. Dr. Who! e.g. That. i.e. This. St. Paul; Co. Ltd. Inc. Foo", "A. B", "Mr. X", "xMr. Y",
    " Mr. Y", "Ing. X", "Dott. Y", "Sr. Z", "abc Dott. X",
    "Alla gentile Sig.ra. Rossi", "Alla gentile xxxSig.ra. Rossi", "Sig.ra. Rossi",
    "A very long sentence ending in Dott. Then more. And xDott. Z",
]


def reference_cells(text: str, labels: bool = True) -> list[str]:
    return [cell for line in text.splitlines() for cell in (CELL_BREAK if labels else HARD_BREAK).split(line)]


def reference_sentences(text: str, labels: bool = True) -> list[str]:
    out = []
    for cell in reference_cells(text, labels):
        start = 0
        for stop in SENTENCE_END.finditer(cell):
            if not ABBREVIATION.search(cell[start:stop.start()]):
                out.append(cell[start:stop.start()])
                start = stop.end()
        out.append(cell[start:])
    return out


def reference_spans(text: str, max_words: int = MAX_WORDS) -> list[str]:
    out: list[str] = []
    for cell in sentences_of(text):
        bounds = [m.span() for m in WORD.finditer(cell)]
        for i, (start, _) in enumerate(bounds):
            for _, end in bounds[i:i + max_words]:
                span = cell[start:end]
                right = span.rstrip(EDGE_PUNCTUATION)
                stripped = right.lstrip(EDGE_PUNCTUATION)
                out += [span, right, stripped]
                if stripped[:1] == "#" and stripped[1:2].isalnum():
                    out.append(stripped[1:].strip(EDGE_PUNCTUATION))
                if stripped.endswith(POSSESSIVE):
                    out.append(stripped[:-2])
                if span[-1:] in "\"'”’" and span[-2:-1] in ")]}":
                    out.append(span.strip(EDGE_BUT_BRACKETS))
    found = dict.fromkeys(out)
    found.pop("", None)
    return list(found)


def job_texts() -> list[str]:
    texts = []
    for path in ("jobs/sample/invoices.parquet", "jobs/tickets/tickets.parquet", "jobs/multilingual/invoices.parquet",
                 "jobs/contracts/contracts.parquet"):
        texts += [t for t in pq.read_table(ROOT / path, columns=["text"]).column("text").to_pylist() if t]
    return texts


def test_spans_as_before_on_tricky_texts() -> None:
    for text in TRICKY:
        for max_words in (1, 3, MAX_WORDS):
            assert spans(text, max_words) == reference_spans(text, max_words), (text, max_words)


def test_spans_as_before_on_the_jobs_documents() -> None:
    texts = job_texts()
    joined = "\n".join(texts[:12])  # a long document whose sentences repeat (the invoices' own lines)
    for text in [*texts, joined]:
        assert spans(text) == reference_spans(text)


def test_a_sentence_written_again_adds_nothing_but_keeps_first_appearance_order() -> None:
    text = "Alpha beta. Gamma delta.\nAlpha beta.\nEpsilon alpha beta."
    found = spans(text)
    assert found == reference_spans(text)
    assert found.index("Alpha beta.") < found.index("Gamma") < found.index("Epsilon")


def test_cells_and_sentences_as_before_with_and_without_labels() -> None:
    lines = "Name: Jane  Smith|x\tz\nTitle: Eternal Echoes: The Forgotten\r\nplain line\x0bnext\u2028Total:\u00a0$3"
    for text in [lines, *TRICKY, *job_texts()]:
        for labels in (True, False, True):  # each text's own cells, with labels and without
            assert list(cells_of(text, labels)) == reference_cells(text, labels), text[:80]
            assert list(sentences_of(text, labels)) == reference_sentences(text, labels), text[:80]
    assert list(cells_of(lines, True)) != list(cells_of(lines, False))


# ------------------------------------------------------------------ scans made once per text, read by several finders


def test_labelled_matches_are_each_texts_own() -> None:
    from schemas.labels import LABELLED, blank_labels, label_texts, labelled, labelled_matches

    first, second = "Order #: BL8449-1\nTotal: $3.00", "Due date: 01 Mar 2026\nProduct: \nName: N/A"
    for text in (first, second, first, second[:10] + second[10:]):  # an equal text made anew reads the same
        assert [m.span() for m in labelled_matches(text)] == [m.span() for m in LABELLED.finditer(text)]
    assert [v for _, *v in labelled(first)] == [[9, 17], [25, 30]]
    assert label_texts(second) == {"due date", "product", "name"} and label_texts(first) == {"order", "total"}
    assert blank_labels(second) == [{"prod"}, {"name"}] and blank_labels(first) == []


def test_number_tokens_and_currency_marks_are_each_texts_own() -> None:
    from schemas.grounding.locale import Locale
    from schemas.grounding.numbers import currencies, decimal_mark, money, readings

    german, english = "Summe 1.234,56 EUR\n12,50 Franken", "Total 1,234.56 USD, 3 francs"
    assert decimal_mark(german) == "," and decimal_mark(english) == "."
    assert [v for v, *_ in readings(german)] == [1234.56, 12.5] and [v for v, *_ in readings(english)] == [1234.56, 3]
    # the same text under two languages: the marks are the languages' own (`Franken` is a currency name in German)
    assert currencies(german, Locale("de")) == ["EUR", "CHF"]
    assert currencies(german, Locale("en")) == ["EUR"]
    assert currencies(german, Locale("de")) == ["EUR", "CHF"]
    franken = "Summe 12 Franken"
    assert currencies(franken, Locale("en")) == [] and currencies(franken, Locale("de")) == ["CHF"]
    assert money(german, Locale("de")) == [1234.56, 12.5] and money(english, Locale("fr")) == [1234.56, 3]


def test_codes_from_the_index_are_the_finders() -> None:
    from schemas.grounding.finders import codes
    from schemas.grounding.index import DocumentIndex

    for text in [*TRICKY, *job_texts()[:60]]:
        index = DocumentIndex(text)
        assert index.values("code") == codes(text, index.locale)


def test_month_first_dates_as_before_in_every_language() -> None:
    import importlib
    import re

    from schemas.grounding.locale import LANGUAGES, month_names

    dates = importlib.import_module("schemas.grounding.dates")
    odd_case = "SEPT 5, 2026 ſept 5, 2026 \u212aanuari 3 2026 Januar 3 2026 jAN. 30, 2026 xJan 30, 2026 März 1 2026"
    texts = [odd_case, odd_case.lower(), odd_case.upper(), *TRICKY, *job_texts()]
    for language in LANGUAGES:
        languages = (language, "en") if language != "en" else ("en",)
        names = "|".join(re.escape(n) for n in sorted(month_names(languages), key=len, reverse=True))
        before = re.compile(rf"(?<![^\W\d_])(?i:(?P<m>{names})\.?)\s+{dates.DAY},?\s*{dates.YEAR}(?!\d)")
        now = dates._named(languages)[1]
        for text in texts:
            assert [(m.span(), m.groupdict()) for m in now.finditer(text)] == \
                [(m.span(), m.groupdict()) for m in before.finditer(text)], (language, text[:80])


def test_currency_marks_as_before_in_every_language() -> None:
    import importlib
    import re

    from schemas.grounding.locale import LANGUAGES, words

    numbers = importlib.import_module("schemas.grounding.numbers")
    odd = "€5 US$ 3 R$2 CHF 4 chf Fr. 2 kr 5 KR 5 Kr. ₹ 9 ¥1 ￥1 元 3 円 4 euros EUROS Euro 12 dólares ſfr \u212ar 2 $3"
    texts = [odd, odd.lower(), odd.upper(), *TRICKY, *job_texts()]
    for language in LANGUAGES:
        languages = (language, "en") if language != "en" else ("en",)
        symbols = sorted(numbers.symbol_codes(), key=len, reverse=True)
        names = sorted({n for lang in languages for n in words(lang)["currency_names"]}, key=len, reverse=True)
        word_like = "|".join([*(re.escape(s) for s in symbols if s[-1].isalpha()),
                              *(re.escape(n) for n in names if n[0].isalpha() and n.isascii())])
        loose = "|".join([*(re.escape(s) for s in symbols if not s[-1].isalpha()),
                          *(re.escape(n) for n in names if not n.isascii())])
        before = re.compile(rf"(?P<cur>{loose}|\b(?:[A-Z]{{3}}|(?i:{word_like}))(?![^\W\d_]))")
        now = numbers.currency_pattern(languages)
        for text in texts:
            assert [m.span() for m in now.finditer(text)] == [m.span() for m in before.finditer(text)], \
                (language, text[:80])


def test_concept_at_as_before() -> None:
    from schemas.grounding.concepts import DocumentConcepts

    class Before(DocumentConcepts):
        def _window(self, start: int) -> int:  # the label pairs read one by one, as before
            window = self.document.rfind("\n", 0, start) + 1
            for label_start, value_start, value_end in self.pairs:
                if value_start <= start <= value_end and label_start >= window:
                    window = label_start
            return window

    # `Before` differs from `DocumentConcepts` in `_window` only, so a window equal at every offset is a concept
    # equal at every offset: the windows are compared at each (0.6 CPU s; `at` at every second offset took 38),
    # and `at` itself where a pair's label moved the window (the offsets the bisect is about).
    texts = [*TRICKY, *job_texts(), "Total: 12\nNet: \nVAT:  5 | Due date: 01 Mar 2026, Amount due: 3"]
    in_pairs = named = 0
    for text in texts:
        for languages in (("en",), ("de", "en")):
            now, before = DocumentConcepts(text, languages), Before(text, languages)
            for start in range(len(text) + 1):
                window = now._window(start)
                assert window == before._window(start), (text[:60], start)
                if window > text.rfind("\n", 0, start) + 1:
                    in_pairs += 1
                    assert now.at(start) == before.at(start), (text[:60], start)
                    named += before.at(start) is not None
    assert in_pairs > 1000 and named > 20  # label pairs were found, and concepts named there


def test_date_patterns_as_before() -> None:
    import importlib
    import re

    from schemas.grounding.locale import LANGUAGES, month_names

    dates = importlib.import_module("schemas.grounding.dates")
    before = {"ISO": re.compile(r"(?<!\d)(\d{4})-(\d{1,2})-(\d{1,2})(?!\d)"),
              "NUMERIC": re.compile(r"(?<![\d.])(\d{1,2})([./-])(\d{1,2})\2(\d{4})(?!\d)"),
              "CJK": re.compile(r"(\d{4})\s*年\s*(\d{1,2})\s*月\s*(\d{1,2})\s*日")}
    digits = ("12026-01-15 2026-01-15x 2026-1-5 x2026-01-15 .1.2.2026 1.2.2026 a1/2/2026 01/02/20261 3.12.2026 "
              "12026年1月15日 2026 年 1 月 15 日 ٢٠٢٦-01-15 1st January 2026 x1 March 2026 .5 mai 2026 15. Januar 2026 "
              "1er mars 2026 15 de enero de 2026 15th of June 2026 ١٥ May 2026 5May 2026 05 may, 2026")
    texts = [digits, digits.upper(), *TRICKY, *job_texts()]
    for name, pattern in before.items():
        for text in texts:
            assert [(m.span(), m.groups()) for m in getattr(dates, name).finditer(text)] == \
                [(m.span(), m.groups()) for m in pattern.finditer(text)], (name, text[:80])
    for language in LANGUAGES:
        languages = (language, "en") if language != "en" else ("en",)
        names = "|".join(re.escape(n) for n in sorted(month_names(languages), key=len, reverse=True))
        day_first = re.compile(rf"(?<![\w.]){dates.DAY}\s*(?:de\s+|of\s+)?(?i:(?P<m>{names})\.?),?\s*(?:de\s+)?"
                               rf"{dates.YEAR}(?!\d)")
        for text in texts:
            assert [(m.span(), m.groupdict()) for m in dates._named(languages)[0].finditer(text)] == \
                [(m.span(), m.groupdict()) for m in day_first.finditer(text)], (language, text[:80])


def test_invoice_values_written_in_the_document_as_before() -> None:
    import re
    from datetime import date

    from schemas.invoice import DATE_FORMATS, _written_in

    def before(value: str, text: str) -> bool:
        pattern = r"(?<![\w-])" + re.escape(value.strip()) + r"(?![\w-])"
        return re.search(pattern, text, flags=re.IGNORECASE) is not None

    days = [date(2026, 1, 30), date(2026, 3, 1), date(2025, 12, 5)]
    values = [d.strftime(f) for d in days for f in DATE_FORMATS] + [
        "INV-2026-0042", "inv-2026-0042", "Acme Corp", " Acme Corp ", "1,450.61", "1450.61", "a", "-5", "x-",
        "\u212aelvin", "kelvin", "ſtraße", "S", "", "  ", "(Ltd.)", "Ltd."]
    texts = ["Invoice INV-2026-0042 of January 30, 2026 from ACME CORP, due 01.03.2026 (Ltd.) total 1,450.61",
             "xINV-2026-0042 -Acme Corp Acme Corpx 30 Jan 2026x 2026-01-30-1 KELVIN \u212aelvin Straße S-S",
             "", "-", "a", *job_texts()[:30]]
    for value in values:
        for text in texts:
            assert _written_in(value, text) == before(value, text), (value, text[:60])


def test_a_documents_language_is_its_first_characters_own() -> None:
    from schemas.grounding.locale import _detector, detect

    german = "Rechnung für die Lieferung der bestellten Waren. Bitte überweisen Sie den Betrag innerhalb von 14 Tagen."
    english = "Invoice for the delivery of the goods you ordered. Please pay within fourteen days of receipt."
    french = "Facture pour la livraison des marchandises commandées. Veuillez payer le montant sous quatorze jours."
    for text in (german, english, french, german, english + " " * 2000 + german, german + "x" * 3000):
        expected = _detector().detect_language_of(text[:2000]).iso_code_639_1.name.lower()
        assert detect(text).language == expected
    assert [detect(t).language for t in (german, english, french)] == ["de", "en", "fr"]


def test_label_index_and_placeholders_as_before() -> None:
    import json

    from schemas.grounding.index import DocumentIndex
    from schemas.grounding.locale import word_list
    from schemas.grounding.screens import FieldContext, placeholders

    def label_index_before(index: DocumentIndex, kind: str) -> tuple[set[str], dict[str, list[set[str]]]]:
        regions = index.labels()
        if not regions:
            return set(), {}
        free: set[str] = set()
        under: dict[str, list[set[str]]] = {}
        for value, start, end in index.readings(kind):
            inside = [words for words, first, last in regions if first <= start and end <= last]
            for words in inside:
                under.setdefault(json.dumps(value), []).append(words)
            if not inside:
                free.add(json.dumps(value))
        return free, under

    def placeholders_before(candidates: list, index: DocumentIndex, nullable: bool) -> list:
        labels = index.label_texts()
        empty = {w.casefold() for w in word_list(index.locale, "placeholders")} if nullable else set()
        if not labels and not empty:
            return list(candidates)
        return [c for c in candidates if not (isinstance(c, str) and (
            c.strip().rstrip(":#").strip().casefold() in labels or (empty and c.strip().casefold() in empty)))]

    form = "Order #: BL8449-1\nProduct: \nName: N/A\nTotal: 12.50 | Due date: 01 Mar 2026, Amount due: 3\nnone"
    for text in [form, *job_texts()[:80]]:
        index = DocumentIndex(text)
        for kind in ("number", "money", "date"):
            assert index._label_index(kind) == label_index_before(index, kind), (kind, text[:60])
        for kind, nullable in (("text", True), ("text", False), ("word", True), ("text", True)):
            candidates = [*index.values(kind), "Product", " order # ", "N/A", "none", 3]
            screened = placeholders(candidates, FieldContext(kind, nullable), index)
            expected = placeholders_before(candidates, index, nullable)
            assert screened == expected, (kind, nullable, text[:60])


def test_labels_screen_by_label_groups_as_before(monkeypatch) -> None:
    """The `labels` screen asking each label once (`label_groups`) and keeping the candidates' JSON texts per
    document (`DocumentIndex.json_texts`) grounds every job's documents, and 20,000-character ones made of them, as
    the screen that asked each value's labels did."""
    import json

    from schemas.grounding import ground, screens
    from schemas.grounding import index as index_module
    from schemas.grounding.index import DocumentIndex
    from schemas.labels import names
    from tests.unit.test_document_counter import JOBS, job_render

    def labels_before(candidates: list, field: screens.FieldContext, index: DocumentIndex) -> list:
        if field.kind not in screens.LABELLED_KINDS or not field.words or len(candidates) < 2:
            return candidates
        under, words, rivals = index.labelled_values(field.kind), set(field.words), [set(r) for r in field.rivals]
        named = {value for value, labels in under.items() if any(names(label, words, rivals) for label in labels)}
        if not named:
            return candidates
        keys = [json.dumps(c) for c in candidates]
        if named.isdisjoint(keys):
            return candidates
        free = index.unlabelled_values(field.kind)
        kept = [c for c, key in zip(candidates, keys, strict=True) if key in free or key in named or key not in under]
        dropped.append(len(candidates) - len(kept))
        return kept

    compared = narrowed = 0
    dropped: list[int] = []
    for config, path in sorted(JOBS.items()):
        loaded, _ = job_render(config)
        schema = loaded.contract.json_schema
        texts = [t for t in pq.read_table(ROOT / path, columns=["text"]).column("text").to_pylist() if t][:25]
        long = "\n".join(texts)[:20_000]
        for text in [*texts, long, long[7_000:14_000]]:
            index_module._recent = index_module._Recent()
            now = ground(schema, text)
            index_module._recent = index_module._Recent()
            with monkeypatch.context() as patch:
                patch.setitem(screens.SCREENS, "labels", labels_before)
                before = ground(schema, text)
            assert now == before, (config, text[:60])
            compared += 1
            narrowed += now != schema
    assert compared > 60 and narrowed > 20 and sum(1 for d in dropped if d) > 20  # the screen dropped values


_numbers = importlib.import_module("schemas.grounding.numbers")


def _unambiguous_before(token: str) -> str | None:
    marks = [c for c in token if c in ".,"]
    if not marks:
        return None
    last = marks[-1]
    head, _, tail = token.rpartition(last)
    if marks.count(last) != 1 or not tail.isdigit():
        return None
    if len(marks) > 1 or any(c in "'’" + _numbers.SPACE for c in head):
        return last if _numbers.GROUPED.fullmatch(head) else None
    return last if len(tail) != 3 and head.isdigit() and len(tail) <= 4 else None

def _values_before(written: str, decimal: str | None) -> list:
    sign = -1 if written[:1] in "-−" else 1
    body = written.lstrip("-−")
    marks = [c for c in body if not c.isdigit()]
    if not marks:
        return [sign * int(body)]
    if _numbers.GROUPED.fullmatch(body) and (len(set(marks)) == 1) and not _numbers._leading_zero(body):
        grouped = sign * int(re.sub(r"\D", "", body))
        if len(marks) > 1 or marks[0] in "'’" + _numbers.SPACE:
            return [grouped]
        head, tail = body.split(marks[0])
        as_decimal = sign * float(f"{head}.{tail}")
        if head.startswith("0"):
            return [as_decimal]
        return [as_decimal] if decimal == marks[0] else [grouped] if decimal else [grouped, as_decimal]
    last = marks[-1]
    head, _, tail = body.rpartition(last)
    if last in ".," and marks.count(last) == 1 and (decimal in (None, last)) and (
            head.isdigit() or (_numbers.GROUPED.fullmatch(head) and last not in head)):
        return [sign * float(re.sub(r"\D", "", head) + "." + tail)]
    return [int(p) for p in re.split(r"\D+", body) if p]

def _readings_before(text: str, locale) -> list:
    tokens = _numbers._tokens(text)
    decimal = locale.decimal or _numbers.evidence([t for t, *_ in tokens])
    found = []
    for _token, start, end, dashed in tokens:
        written = text[start:end]
        values = _numbers._values(written, "," if dashed else decimal)
        found.extend((v, start, end) for v in values)
        scale, scale_end = _numbers.MULTIPLIERS.get(text[end:end + 1]), end + 1
        word = _numbers.SCALE_WORD.match(text, end)
        if word:
            scale, scale_end = _numbers.SCALE_WORDS[word.group(1).lower()], word.end()
        if scale:
            found.extend((_numbers._scaled(v, scale), start, scale_end) for v in values)
        if any(c in _numbers.SPACE for c in written) and locale.decimal is None:
            found.extend(_numbers._pieces(written, start))
    return found


def test_number_readings_as_before(monkeypatch) -> None:
    """A token of digits alone read without looking for marks (`_values`, `_unambiguous_decimal`, the readings'
    check for a space inside a token): every job's document, joined ones and odd tokens read as before, under no
    locale and under a decimal comma and a decimal point."""
    from schemas.grounding.locale import UNKNOWN, Locale

    numbers = _numbers
    odd = "-12 −7 1 234,56 2'450 1.180,- 0,5 007 1.234 1,234 12,50 1 420 3.14159 1.234.567 1,2,3 ２３ 12万 4 million"
    texts = [odd, *job_texts(), "\n".join(job_texts()[:40])]
    locales = (UNKNOWN, Locale("de", "DE", decided=True), Locale("en", "US", decided=True))
    assert [loc.decimal for loc in locales] == [None, ",", "."]
    now = [(numbers.readings(t, loc), numbers.decimal_mark(t)) for t in texts for loc in locales]
    with monkeypatch.context() as patch:
        patch.setattr(numbers, "_unambiguous_decimal", _unambiguous_before)
        patch.setattr(numbers, "_values", _values_before)
        before = [(_readings_before(t, loc), numbers.decimal_mark(t)) for t in texts for loc in locales]
    assert now == before
    assert sum(len(r) for r, _ in now) > 5000


def test_json_text_is_json_dumps() -> None:
    import json

    from schemas.labels import json_text

    values = ["", "a", "Ünïcödé 中文 😀", 'q"uote\\', "tab\tnew\nline\x00\x1f", "\u2028", 0, 1, 1.0, -2.5, 1e16,
              True, False, None, [1, "a"], {"k": "v"}, *[t[:40] for t in job_texts()[:50]]]
    assert [json_text(v) for v in values] == [json.dumps(v) for v in values]
