"""The per-field merge of a document's windows (workers.merge): each rule has a test that fails without it."""

from workers.merge import WindowOutput, merge
from workers.windows import Window

# Two neighbouring windows of a 2,000-character document sharing characters 900-1100.
W0, W1, W2 = Window(0, 0, 1100), Window(1, 900, 2000), Window(2, 1900, 3000)


def out(window, record, confidence=None, spans=None):
    return WindowOutput(window, record, confidence or {}, spans or {})


def test_a_scalar_takes_the_value_of_the_window_most_sure_of_it():
    merged = merge([out(W0, {"date": "2020-01-01"}, {"date": 0.2}), out(W1, {"date": "2021-02-02"}, {"date": 0.9})])
    assert merged.record == {"date": "2021-02-02"}
    assert merged.confidence == {"date": 0.9} and merged.windows == {"date": 1}


def test_a_tie_in_sureness_goes_to_the_earlier_window():
    merged = merge([out(W0, {"date": "2020-01-01"}, {"date": 0.5}), out(W1, {"date": "2021-02-02"}, {"date": 0.5})])
    assert merged.record == {"date": "2020-01-01"}


def test_null_wins_only_when_every_window_says_null():
    merged = merge([out(W0, {"law": "Ohio"}, {"law": 0.1}), out(W1, {"law": None})])
    assert merged.record == {"law": "Ohio"}
    assert merge([out(W0, {"law": None}), out(W1, {"law": None})]).record == {"law": None}


def test_a_value_with_a_confidence_beats_one_without():
    merged = merge([out(W0, {"law": "Ohio"}), out(W1, {"law": "Iowa"}, {"law": 0.01})])
    assert merged.record == {"law": "Iowa"}


def test_a_list_is_the_union_of_the_windows_items_in_document_order():
    first = out(W0, {"parties": ["Beta LLC", "Acme Inc."]},
                spans={"parties[0]": [(500, 508)], "parties[1]": [(10, 19)]})
    second = out(W1, {"parties": ["Gamma Co."]}, spans={"parties[0]": [(800, 809)]})  # 1,700 in the document
    merged = merge([first, second])
    assert merged.record == {"parties": ["Acme Inc.", "Beta LLC", "Gamma Co."]}
    assert merged.spans["parties[2]"] == [(1700, 1709)] and merged.windows["parties[2]"] == 1


def test_an_item_read_twice_in_the_overlap_of_neighbouring_windows_is_one():
    # "Acme Inc." at characters 950-959: window 0 writes it at 950, window 1 (starting at 900) at 50.
    first = out(W0, {"parties": ["Acme Inc."]}, spans={"parties[0]": [(950, 959)]})
    second = out(W1, {"parties": ["Acme Inc."]}, spans={"parties[0]": [(50, 59)]})
    assert merge([first, second]).record == {"parties": ["Acme Inc."]}


def test_an_equal_item_outside_the_overlap_is_kept_twice():
    # the contract names the same party at 100 (window 0 only) and at 1,500 (window 1 only)
    first = out(W0, {"parties": ["Acme Inc."]}, spans={"parties[0]": [(100, 109)]})
    second = out(W1, {"parties": ["Acme Inc."]}, spans={"parties[0]": [(600, 609)]})
    assert merge([first, second]).record == {"parties": ["Acme Inc.", "Acme Inc."]}


def test_equal_items_of_windows_that_are_not_neighbours_are_both_kept():
    far = Window(2, 900, 2000)  # the same offsets as window 1, but two windows on
    first = out(W0, {"parties": ["Acme Inc."]}, spans={"parties[0]": [(950, 959)]})
    third = out(far, {"parties": ["Acme Inc."]}, spans={"parties[0]": [(50, 59)]})
    assert len(merge([first, third]).record["parties"]) == 2


def test_items_without_spans_are_never_taken_for_one_another():
    first, second = out(W0, {"tags": ["x"]}), out(W1, {"tags": ["x"]})
    assert merge([first, second]).record == {"tags": ["x", "x"]}


def test_objects_merge_leaf_by_leaf():
    first = out(W0, {"vendor": {"name": "Acme", "city": None}}, {"vendor.name": 0.9})
    second = out(W1, {"vendor": {"name": "Acne", "city": "Oslo"}}, {"vendor.name": 0.2, "vendor.city": 0.7})
    merged = merge([first, second])
    assert merged.record == {"vendor": {"name": "Acme", "city": "Oslo"}}
    assert merged.windows == {"vendor.name": 0, "vendor.city": 1}


def test_list_items_of_objects_are_items_with_their_leaves_provenance():
    first = out(W0, {"items": [{"sku": "A1", "qty": 2}]}, {"items[0].sku": 0.8},
                {"items[0].sku": [(950, 952)], "items[0].qty": [(960, 961)]})
    second = out(W1, {"items": [{"sku": "A1", "qty": 2}, {"sku": "B2", "qty": 1}]}, {"items[1].sku": 0.6},
                 {"items[0].sku": [(50, 52)], "items[0].qty": [(60, 61)], "items[1].sku": [(700, 702)]})
    merged = merge([first, second])
    assert merged.record == {"items": [{"sku": "A1", "qty": 2}, {"sku": "B2", "qty": 1}]}
    assert merged.spans["items[1].sku"] == [(1600, 1602)] and merged.confidence["items[1].sku"] == 0.6
    assert merged.windows["items[1].sku"] == 1


def test_spans_become_offsets_into_the_whole_document():
    merged = merge([out(W0, {"a": None}), out(W2, {"a": "x"}, {"a": 0.5}, {"a": [(3, 4), (10, 11)]})])
    assert merged.spans == {"a": [(1903, 1904), (1910, 1911)]}


def test_a_value_that_is_only_its_fields_name_loses_to_any_other():
    # window 0 copied the label `Jurisdiction:` with more confidence than window 1 read the state
    merged = merge([out(W0, {"jurisdiction": "Jurisdiction"}, {"jurisdiction": 0.9}),
                    out(W1, {"jurisdiction": "California"}, {"jurisdiction": 0.2})])
    assert merged.record == {"jurisdiction": "California"} and merged.windows == {"jurisdiction": 1}


def test_a_fields_name_stays_where_no_window_gives_another_value():
    merged = merge([out(W0, {"jurisdiction": "the Jurisdiction"}, {"jurisdiction": 0.9}),
                    out(W1, {"jurisdiction": None})])
    assert merged.record == {"jurisdiction": "the Jurisdiction"}


def test_a_list_item_that_is_only_its_fields_name_is_dropped_while_others_remain():
    first = out(W0, {"party": ["Parties", "Acme Inc."]}, spans={"party[1]": [(10, 19)]})
    second = out(W1, {"party": ["party"]})
    assert merge([first, second]).record == {"party": ["Acme Inc."]}
    assert merge([out(W0, {"party": ["Parties"]})]).record == {"party": ["Parties"]}


def test_label_only_reads_words_case_and_number():
    from workers.merge import label_only

    assert label_only("Terms", "contract_term") and label_only("the JURISDICTION", "jurisdiction")
    assert not label_only("California", "jurisdiction") and not label_only("2 years", "term")
    assert not label_only("Company", "party[0]") and not label_only(12, "term")


def test_with_defined_terms_a_list_item_the_document_defines_as_a_term_is_dropped_while_names_remain():
    from workers.merge import DefinedTerms

    text = "This Agreement is made by the parties listed below (the “Company”) and Oakfield Securities LLC. " * 3
    terms = DefinedTerms(text)  # the term's name is not found: dropped
    first = out(W0, {"party": ["the Company", "Oakfield Securities LLC"]})
    second = out(W1, {"party": ["Company"]})
    assert merge([first, second], terms).record == {"party": ["Oakfield Securities LLC"]}
    assert merge([first, second]).record == {"party": ["the Company", "Oakfield Securities LLC", "Company"]}
    assert merge([out(W0, {"party": ["Company"]})], terms).record == {"party": ["Company"]}


def test_with_defined_terms_a_defined_term_is_replaced_once_by_the_name_it_stands_for():
    from workers.merge import DefinedTerms

    text = ("This Agreement is between Umbrella Footwear, Inc. (the “Company”) and Oakfield Securities LLC. "
            "The Company shall keep the information secret. ")
    first = out(W0, {"party": ["the Company", "Oakfield Securities LLC"]})
    second = out(W1, {"party": ["Company"]})
    merged = merge([first, second], DefinedTerms(text))
    assert merged.record == {"party": ["Oakfield Securities LLC", "Umbrella Footwear Inc."]}
    start = text.index("Umbrella")
    assert merged.spans["party[1]"] == [(start, text.index(" (the"))]
