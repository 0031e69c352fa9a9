"""The report's document pages (pipeline.tools.report.documents): values cut into the text at their spans, the
verdicts against gold from eval.json's mistakes, and file names for any document id."""

from __future__ import annotations

from pipeline.tools.report.documents import Segment, confidence_class, page_name, row_page, segments


def test_segments_cut_the_text_at_the_marks_and_skip_overlaps():
    text = "rent EUR 750 in 8010 Graz"
    marks = [(9, 12, Segment("", "rent", 0.95, "c-high")), (16, 20, Segment("", "postcode", None, "c-none")),
             (10, 14, Segment("", "other", 0.1, "c-low"))]  # overlaps the rent: left out
    cut = segments(text, marks)
    assert "".join(s.text for s in cut) == text
    assert [(s.text, s.path, s.css) for s in cut if s.path] == [("750", "rent", "c-high"), ("8010", "postcode",
                                                                                          "c-none")]
    assert segments(text, [(20, 99, Segment("", "x"))]) == [Segment(text)]  # a span past the end is ignored


def test_confidence_bands():
    assert [confidence_class(c) for c in (0.95, 0.9, 0.6, 0.2, None)] == ["c-high", "c-high", "c-mid", "c-low",
                                                                         "c-none"]


def test_page_names_are_plain_and_distinct():
    names = {page_name(i) for i in ("../etc/passwd", "a b", "a_b", "", "x" * 300)}
    assert len(names) == 5
    assert all("/" not in n and " " not in n and n.endswith(".html") and len(n) < 90 for n in names)


def test_a_row_page_gives_each_field_its_place_confidence_and_verdict():
    text = "Studio in Graz, 8010 Graz. Rent EUR 750."
    row = {"doc_id": "l-2", "city": "Graz", "rent": 8010.0, "deposit": None,
           "_confidence": [("city", 0.97), ("rent", 0.31)],
           "_spans": [("city", [{"start": 10, "end": 14}, {"start": 21, "end": 25}]),
                      ("rent", [{"start": 16, "end": 20}])]}
    mistakes = [{"field": "rent", "kind": "wrong", "at": "rent", "gold": 750, "predicted": 8010.0,
                 "gold_span": [36, 39]},
                {"field": "deposit", "kind": "missed", "at": None, "gold": 2250, "predicted": None,
                 "gold_span": None}]
    page = row_page(row, text, mistakes)
    lines = {(f.path, f.verdict): f for f in page.fields}
    assert lines[("city", "right")].span == (10, 14) and lines[("city", "right")].confidence == 0.97
    rent = lines[("rent", "wrong")]
    assert rent.gold == 750 and rent.gold_span == (36, 39) and rent.confidence == 0.31
    assert ("deposit", None) in lines and lines[("deposit", "missed")].gold == 2250
    marked = [(s.text, s.path, s.css) for s in page.segments if s.path]
    assert marked == [("Graz", "city", "c-high"), ("8010", "rent", "c-low"), ("Graz", "city", "c-high"),
                      ("750", "rent (gold)", "gold")]
    assert "".join(s.text for s in page.segments) == text
    assert not row_page(row, text, None).has_gold


def test_a_windowed_rows_page_names_each_values_window():
    """A document read in windows (issue 56) shows how many, and which window each value came from."""
    from jinja2 import Environment, FileSystemLoader, select_autoescape

    from pipeline.tools.report.documents import fmt_value
    from pipeline.tools.report.render import TEMPLATES

    text = "Agreement between Acme Corp and Globex Ltd.\n\n" + "Clause. " * 40 + "\n\nGoverned by the laws of Ohio."
    row = {"doc_id": "nda-1", "party": "Acme Corp", "jurisdiction": "Ohio", "_windows": 3,
           "_window_of": [("party", 0), ("jurisdiction", 2)]}
    page = row_page(row, text, None)
    assert page.windows == 3 and {f.path: f.window for f in page.fields} == {"party": 0, "jurisdiction": 2}
    env = Environment(loader=FileSystemLoader(str(TEMPLATES)), autoescape=select_autoescape(["html", "j2"]))
    html = env.get_template("document.html.j2").render(page=page, run_id="r1", fmt_value=fmt_value)
    assert 'read in <b id="windows">3</b> windows' in html and "<th>window</th>" in html
    whole = row_page({"doc_id": "inv-1", "total": 5.0}, "Total 5.0", None)
    assert whole.windows == 1 and "<th>window</th>" not in env.get_template("document.html.j2").render(
        page=whole, run_id="r1", fmt_value=fmt_value)
