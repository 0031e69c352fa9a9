"""Labels a document writes before its values, and grounding that leaves out a value written under another
field's label (`schemas.labels`, `schemas.grounding`)."""

from __future__ import annotations

from schemas.grounding import dates, ground, money
from schemas.labels import label_index, labelled, name_words, named_only

FORM = ("--- Contact form submission ---\nSubmitted: 2026-01-20 11:54\nName: Hannah Kowalski, Email: h@k.net\n"
        "Order #: BL8449-1\nPurchase date: 11 Jan 2026\nAmount paid: USD 32.99\nMessage:\n"
        "It still hasn't arrived. I paid $5.00 for shipping: please refund it.\n")
INVOICE = ("Blue Fjord Consulting AS\nINVOICE BLU-2026-5906\nDate of issue: January 30, 2026\n"
           "Payment due: 01 Mar 2026\nBill to: Litware Inc\n\nDescription | Qty | Unit price | Amount\n"
           "Freight, pallet | 5 | €243.80 | €1,219.00\n\nSubtotal: €1,219.00\nTax: €231.61\n"
           "Total due (EUR): €1,450.61\n")


def test_labelled_values_are_read_to_a_separator_the_next_label_or_the_lines_end() -> None:
    found = [(sorted(words), FORM[start:end]) for words, start, end in labelled(FORM)]
    assert found == [(["subm"], "2026-01-20 11:54"), (["name"], "Hannah Kowalski"), (["emai"], "h@k.net"),
                     (["orde"], "BL8449-1"), (["date", "purc"], "11 Jan 2026"), (["amou", "paid"], "USD 32.99")]
    invoice = {INVOICE[s:e]: sorted(w) for w, s, e in labelled(INVOICE)}
    assert invoice["January 30, 2026"] == ["date", "issu"]  # a comma inside a value does not end it
    assert invoice["€1,450.61"] == ["due", "eur", "tota"]
    assert "€243.80" not in invoice  # a table's cells have no label
    assert name_words("E-mail") == {"emai"} and name_words("invoiceNumber") == {"invo", "numb"}


def test_a_value_only_under_another_fields_label_is_left_out_where_a_label_names_the_field() -> None:
    index = label_index(dates, INVOICE)
    both = ["2026-01-30", "2026-03-01"]
    assert named_only(both, index, name_words("issue_date")) == ["2026-01-30"]
    assert named_only(both, index, name_words("due_date")) == both  # alone, `date` and `due` name both labels
    # beside an issue_date, `Date of issue` names that field better (two words to one): it is not due_date's
    assert named_only(both, index, name_words("due_date"), [name_words("issue_date")]) == ["2026-03-01"]
    assert named_only(both, index, name_words("issue_date"), [name_words("due_date")]) == ["2026-01-30"]
    assert named_only(both, index, name_words("shipped_on")) == both  # no label names it: all kept
    amounts = label_index(money, INVOICE)
    total = named_only([243.8, 1219.0, 231.61, 1450.61], amounts, name_words("total"))
    assert total == [243.8, 1219.0, 1450.61]  # the subtotal's 1219.00 is also a table cell: kept; the tax is not
    assert named_only(["2026-03-01"], index, name_words("issue_date")) == ["2026-03-01"]  # the named one is not
    # among the candidates (the field's bounds refused it): nothing to prefer, so nothing is left out


def test_grounding_leaves_out_the_forms_submission_date_for_an_order_date() -> None:
    schema = {"type": "object", "properties": {
        "order_date": {"anyOf": [{"type": "string", "format": "date"}, {"type": "null"}]},
        "amount": {"anyOf": [{"type": "number"}, {"type": "null"}]},
        "due": {"type": "string", "format": "date"}}}
    grounded = ground(schema, FORM, mode="auto")["properties"]
    assert grounded["order_date"]["anyOf"][0]["enum"] == ["2026-01-11"]  # `Purchase date` shares `date`
    assert grounded["due"]["enum"] == ["2026-01-20", "2026-01-11"]  # no label says `due`: both kept
    invoice = {"type": "object", "properties": {"issue_date": {"type": "string", "format": "date"},
                                                "due_date": {"type": "string", "format": "date"}}}
    dated = ground(invoice, INVOICE, mode="auto")["properties"]
    assert dated["issue_date"]["enum"] == ["2026-01-30"] and dated["due_date"]["enum"] == ["2026-03-01"]
    # `$5.00` stands in the message, under no label: a value the document also writes unlabelled is kept
    assert grounded["amount"]["anyOf"][0]["enum"] == [32.99, 5.0]
    form = FORM.replace("I paid $5.00 for shipping", "Shipping: $5.00")
    assert ground(schema, form, mode="auto")["properties"]["amount"]["anyOf"][0]["enum"] == [32.99]


def test_prose_without_labels_grounds_as_before() -> None:
    schema = {"type": "object", "properties": {"issue_date": {"type": "string", "format": "date"}}}
    prose = "We issued it on 30 January 2026 and it is due on 1 March 2026."
    assert labelled(prose) == []
    screens = ("placeholders", "sent", "labels")  # no label pair: the label screens leave both dates
    assert ground(schema, prose, mode="auto", screens=screens)["properties"]["issue_date"]["enum"] == \
        ["2026-01-30", "2026-03-01"]
    # the concepts screen reads each date's own words: `issued` the first, `due` the one after the first date
    # (`schemas.grounding.concepts.DocumentConcepts._after_values`, issue 54's blind euro job)
    assert ground(schema, prose, mode="auto")["properties"]["issue_date"]["enum"] == ["2026-01-30"]


MAIL = ("From: Dana Whitfield <dana.whitfield@gmail.example>\nTo: support@brightlane.com\nSubject: Wrong item\n"
        "Date: Sun, 22 Feb 2026 19:48:04 +0000\n\nHi,\n\nThe order was placed on 13 Feb 2026.\n")


def test_an_emails_sent_date_is_not_a_date_of_anything_else() -> None:
    from schemas.labels import names_message, sent_line

    start, end = sent_line(MAIL)
    assert MAIL[start:end] == "Sun, 22 Feb 2026 19:48:04 +0000"
    assert sent_line("\n" + MAIL) == (start + 1, end + 1)  # blank lines before the header
    assert sent_line("Date: 22 Feb 2026\nTotal: $3.00\n") is None  # a form, not an e-mail: no From or To
    assert sent_line("Dear team,\nFrom: a@b.c\nDate: 22 Feb 2026\n") is None  # not at the start
    assert names_message(name_words("date")) and names_message(name_words("sent_at"))
    assert names_message(name_words("emailDate")) and not names_message(name_words("order_date"))
    schema = {"type": "object", "properties": {
        "order_date": {"anyOf": [{"type": "string", "format": "date"}, {"type": "null"}]},
        "date": {"anyOf": [{"type": "string", "format": "date"}, {"type": "null"}]}}}
    grounded = ground(schema, MAIL, mode="auto")["properties"]
    assert grounded["order_date"]["anyOf"][0]["enum"] == ["2026-02-13"]  # not the day it was sent
    assert sorted(grounded["date"]["anyOf"][0]["enum"]) == ["2026-02-13", "2026-02-22"]  # a field named for it
    only_sent = MAIL.replace("The order was placed on 13 Feb 2026.", "It broke.")
    # the sent date is its only candidate, in doubt: a screen never removes the last one (issue 54; was: only
    # null), and a nullable field is left its plain type, marked free (an unsure value is null after decoding)
    assert ground(schema, only_sent, mode="auto")["properties"]["order_date"] == {
        "anyOf": [{"type": "string", "format": "date"}, {"type": "null"}]}
    assert ground(schema, only_sent, mode="auto", mark_free=True)["properties"]["order_date"]["x-free"] is True
    required = {"type": "object", "properties": {"order_date": {"type": "string", "format": "date"}}}
    assert ground(required, only_sent, mode="auto")["properties"]["order_date"] == {"enum": ["2026-02-22"]}
    again = only_sent + "Sent on 22 Feb 2026 too.\n"  # written again in the body: kept
    assert ground(schema, again, mode="auto")["properties"]["order_date"]["anyOf"][0]["enum"] == ["2026-02-22"]


def test_a_labels_own_text_and_a_placeholder_are_not_a_fields_value() -> None:
    from schemas.labels import label_texts

    form = "Subject: Question\nName: Mia Rossi\nOrder #: \nProduct: N/A\nMessage:\nIt is late.\n"
    assert label_texts(form) == {"subject", "name", "order", "product", "message"}
    schema = {"type": "object", "properties": {"product": {"anyOf": [{"type": "string"}, {"type": "null"}]},
                                               "summary": {"anyOf": [{"type": "string"}, {"type": "null"}]},
                                               "topic": {"type": "string"}}}
    props = ground(schema, form, mode="auto")["properties"]
    summary = props["summary"]["anyOf"][0]["enum"]
    assert "Mia Rossi" in summary and not {"Subject", "Product", "Product:", "Name", "Name:", "N/A"} & set(summary)
    # `Product: N/A` leaves the product's own label blank: every candidate in doubt, the plain type (and null)
    assert props["product"] == schema["properties"]["product"]
    assert "N/A" in props["topic"]["enum"]  # a required field keeps a placeholder: it may be all there is
    assert "Subject" not in props["topic"]["enum"]


def test_a_forms_text_under_another_label_and_a_blank_field() -> None:
    from schemas.labels import blank_labels

    form = ("Name: Mia Rossi\nEmail: mia@x.org\nOrder #: \nProduct: Bolt Charger\nAmount paid: -\nMessage:\n"
            "The box held a phone case.\n")
    assert blank_labels(form) == [{"orde"}, {"amou", "paid"}]  # not Message: its text is on the lines below
    schema = {"type": "object", "properties": {
        "customer_name": {"anyOf": [{"type": "string"}, {"type": "null"}]},
        "product": {"anyOf": [{"type": "string"}, {"type": "null"}]},
        "order_number": {"anyOf": [{"type": "string"}, {"type": "null"}]},
        "amount": {"anyOf": [{"type": "number"}, {"type": "null"}]},
        "message": {"anyOf": [{"type": "string"}, {"type": "null"}]}}}
    props = ground(schema, form, mode="auto")["properties"]
    product = props["product"]["anyOf"][0]["enum"]
    assert "Bolt Charger" in product and "Mia Rossi" not in product and "Rossi" not in product  # under Name:
    assert "phone case" in product  # unlabelled text stays
    assert "Mia Rossi" in props["customer_name"]["anyOf"][0]["enum"]
    # Left blank: no longer forced to null (issue 54: that forbade every value); the amount keeps its plain type.
    assert props["amount"] == {"anyOf": [{"type": "number", "maximum": 1e15, "minimum": -1e15}, {"type": "null"}]}
    assert "null" in str(props["order_number"])
    assert "The box held a phone case." in props["message"]["anyOf"][0]["enum"]
    blank = form.replace("Bolt Charger", "")  # `Product:` left blank: nullable, its plain type (no longer null)
    assert ground(schema, blank, mode="auto")["properties"]["product"] == schema["properties"]["product"]
    required = {"type": "object", "properties": {"product": {"type": "string"}}}  # not nullable: candidates stay
    assert "phone case" in ground(required, blank, mode="auto")["properties"]["product"]["enum"]
