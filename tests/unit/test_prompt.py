"""The rendered prompt: the schema is presented when the template has no {schema}; examples come first."""

from __future__ import annotations

import json

import pytest

from pipeline.config import load_config
from pipeline.dataflow import build_spec
from pipeline.stage_config import ActorConfig
from schemas.invoice import Invoice
from workers.prompt import Chat, build_chat, plain_transcript, presented_schema, prompt_for, render_prompt

SCHEMA = Invoice.model_json_schema()
TEMPLATE = "Extract the invoice from this document.\n{document}"


def test_fields_mode_lists_every_field_with_type_bounds_enum_and_description() -> None:
    text = presented_schema(SCHEMA, "fields")
    assert text.splitlines()[0].startswith("Answer with one JSON object")
    assert "- invoice_number: string, at most 40 characters or null, required." in text
    assert "  - name: string, at most 120 characters or null, required." in text  # vendor's field, nested
    assert '"USD", "EUR"' in text and "string (date, YYYY-MM-DD)" in text
    assert "at most 6 items" in text and ">= 0" in text
    assert "who is billed" in text  # the description


def test_json_mode_shows_the_json_schema_itself() -> None:
    text = presented_schema(SCHEMA, "json")
    assert json.loads(text.split("\n", 1)[1])["properties"].keys() == SCHEMA["properties"].keys()


def test_a_prompt_without_schema_gets_it_in_the_system_message_before_the_document() -> None:
    chat = build_chat(TEMPLATE, "INVOICE X-1", SCHEMA, json.dumps(SCHEMA), mode="auto", system="Be exact.")
    assert isinstance(chat, Chat)
    system, user = chat.messages
    assert system["role"] == "system" and system["content"].startswith("Be exact.\n\nAnswer with one JSON object")
    assert "invoice_number" in system["content"]
    assert user == {"role": "user", "content": "Extract the invoice from this document.\nINVOICE X-1"}


def test_a_prompt_with_schema_keeps_todays_behaviour() -> None:
    template = "Schema: {schema}\nDocument: {document}"
    out = build_chat(template, "doc", SCHEMA, '{"type":"object"}', mode="fields")
    assert out == render_prompt(template, "doc", '{"type":"object"}') == 'Schema: {"type":"object"}\nDocument: doc'


def test_none_mode_is_the_bare_prompt() -> None:
    assert build_chat(TEMPLATE, "doc", SCHEMA, "{}", mode="none") == "Extract the invoice from this document.\ndoc"


def test_examples_are_earlier_turns_with_compact_outputs_then_the_document() -> None:
    chat = build_chat(TEMPLATE, "THE DOC", SCHEMA, "{}", mode="none",
                      examples=(("doc one", '{"a":1}'), ("doc two", '{"a":2}')))
    assert [m["role"] for m in chat.messages] == ["user", "assistant", "user", "assistant", "user"]
    assert chat.messages[1]["content"] == '{"a":1}'
    assert chat.messages[0]["content"].endswith("doc one") and chat.messages[-1]["content"].endswith("THE DOC")


def test_plain_transcript_without_a_chat_template() -> None:
    assert plain_transcript([{"role": "user", "content": "hi"}]) == "hi"
    text = plain_transcript([{"role": "system", "content": "S"}, {"role": "user", "content": "U"}])
    assert text == "System: S\n\nUser: U\n\nAssistant: "


def test_auto_shows_the_json_schema_without_examples_and_lets_examples_show_the_fields_otherwise() -> None:
    examples = (("doc", '{"invoice_number":"A"}'),)
    alone = build_chat(TEMPLATE, "d", SCHEMA, "{}", mode="auto")  # the JSON Schema, as a system turn
    assert alone.messages[0]["content"].startswith("Answer with one JSON object that follows this JSON Schema:")
    with_examples = build_chat(TEMPLATE, "d", SCHEMA, "{}", mode="auto", examples=examples)
    assert with_examples.messages[0]["role"] == "user"  # measured: the list on top of examples cost F1
    assert build_chat(TEMPLATE, "d", SCHEMA, "{}", mode="fields", examples=examples).messages[0]["role"] == "system"


def test_sample_job_spec_renders_its_examples_through_the_bundled_chat_template() -> None:
    """The shipped job (no {schema} in its prompt, the model's three examples): the tokenizer's template
    shows each example's document and compact output as earlier turns, and the document last."""
    transformers = pytest.importorskip("transformers")
    from workers.bundled_model import prepare

    loaded = load_config("jobs/extract.yaml")
    spec = build_spec(ActorConfig.of(loaded), "r")
    assert "{schema}" not in spec.prompt_template
    chat = prompt_for(spec.prompt, "INVOICE ZZZ-1", loaded.contract.json_schema, "{}")
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(prepare()))
    text = tokenizer.apply_chat_template(list(chat.messages), tokenize=False, add_generation_prompt=True)
    assert len(spec.examples) == 3
    for document, output in spec.examples:
        assert text.index(document) < text.index(output) < text.index("INVOICE ZZZ-1")
    assert text.count("<|im_start|>assistant") == len(spec.examples) + 1
    assert text.rstrip().endswith("<|im_start|>assistant")


