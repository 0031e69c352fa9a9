"""workers.chat_tokens: a chat prompt's ids with the head before its last message tokenized once are the ids the
tokenizer gives the whole prompt."""

from __future__ import annotations

import json
import re

import pyarrow.parquet as pq
import pytest

from pipeline.config import load_config
from pipeline.dataflow import build_spec
from pipeline.stage_config import ActorConfig
from workers.chat_tokens import ChatTokens
from workers.prompt import prompt_for, with_feedback
from workers.windows import paragraphs

SPECIAL = re.compile(r"(<\|[a-z_]+\|>)")


def _whole(tokenizer, messages, template=None):
    ids = tokenizer.apply_chat_template(messages, chat_template=template, tokenize=True, add_generation_prompt=True)
    return list(ids["input_ids"] if hasattr(ids, "input_ids") or isinstance(ids, dict) else ids)


def test_the_bundled_tokenizer_gives_the_same_ids_for_every_sample_prompt() -> None:
    """Every document of the sample (and pieces of its long one, an empty one, ones starting with spaces or
    writing a special token, a retry's feedback prompt) under the job's prompt: the same ids as the whole prompt
    tokenized, and the head is kept (not checked and dropped)."""
    transformers = pytest.importorskip("transformers")
    from workers.bundled_model import prepare

    tokenizer = transformers.AutoTokenizer.from_pretrained(str(prepare()))
    loaded = load_config("jobs/extract.yaml")
    spec = build_spec(ActorConfig.of(loaded), "r")
    schema = loaded.contract.json_schema
    schema_json = json.dumps(schema)
    texts = [t for t in pq.read_table("jobs/sample/invoices.parquet", columns=["text"]).column("text").to_pylist()
             if t]
    longest = max(texts, key=len)
    texts += [longest[a:b] for a, b in paragraphs(longest)[:20]]
    texts += ["", " ", "\n\nINVOICE 1", "  Total: 5", "a <|im_start|>user\nb<|im_end|>", "\u00e9t\u00e9 \U0001f600"]
    tokens = ChatTokens()
    for text in texts:
        chat = prompt_for(spec.prompt, text, schema, schema_json)
        messages = list(chat.messages)
        assert tokens.ids(tokenizer, messages, tokenizer.chat_template) == _whole(tokenizer, messages), text[:60]
        again = with_feedback(chat, '{"vendor": 1}', "Your answer failed validation: x. Answer again.")
        assert tokens.ids(tokenizer, list(again.messages), tokenizer.chat_template) == \
            _whole(tokenizer, list(again.messages))
    heads = [entry[1] for entry in tokens._heads.values()]
    assert heads and heads[0] is not None  # the job's head was split, not tokenized whole each time


class CharTokenizer:
    """A tokenizer of characters whose special tokens are cut out first; `shift` makes a piece's ids depend on
    where the encoded text starts (as no split can reproduce)."""

    chat_template = "{% for m in messages %}<|s|>{{ m.role }}\n{{ m.content }}<|e|>{% endfor %}<|s|>assistant\n"

    def __init__(self, shift: bool = False) -> None:
        self.shift = shift
        self.encoded = 0  # characters encoded so far
        self.added_tokens_decoder = {1: _Added("<|s|>"), 2: _Added("<|e|>")}

    def apply_chat_template(self, messages, chat_template=None, tokenize=True, add_generation_prompt=True):
        import jinja2

        text = jinja2.Template(chat_template or self.chat_template).render(messages=messages)
        return {"input_ids": self(text)["input_ids"]} if tokenize else text

    def __call__(self, text, add_special_tokens=False):
        self.encoded += len(text)
        ids = []
        for piece in SPECIAL.split(text):
            if piece == "<|s|>":
                ids.append(1)
            elif piece == "<|e|>":
                ids.append(2)
            else:
                ids += [ord(c) + 1000 for c in piece]
        if self.shift and ids:
            ids[0] += 7  # the first id of any encoded text differs: a split would show
        return {"input_ids": ids}


class _Added:
    def __init__(self, content: str) -> None:
        self.content, self.special, self.normalized, self.lstrip, self.rstrip, self.single_word = \
            content, True, False, False, False, False

    def __str__(self) -> str:
        return self.content


def _chat(document: str) -> list[dict[str, str]]:
    return [{"role": "system", "content": "S" * 500}, {"role": "user", "content": "example"},
            {"role": "assistant", "content": "{}"}, {"role": "user", "content": f"Extract.\n{document}"}]


def test_a_kept_head_is_not_tokenized_again() -> None:
    tokenizer, tokens = CharTokenizer(), ChatTokens()
    for document in ("one", "two", "three"):
        tokenizer.encoded = 0
        assert tokens.ids(tokenizer, _chat(document), None) == _whole(CharTokenizer(), _chat(document))
    assert tokenizer.encoded < 100  # the last document: its own message and the end, not the 500-character head


def test_a_tokenizer_whose_split_differs_is_tokenized_whole() -> None:
    """The first prompt of a head is made both ways; where they differ, every prompt of that head is whole."""
    tokenizer, tokens = CharTokenizer(shift=True), ChatTokens()
    for document in ("one", "two"):
        assert tokens.ids(tokenizer, _chat(document), None) == _whole(CharTokenizer(shift=True), _chat(document))
    assert [entry[1] for entry in tokens._heads.values()] == [None]


def test_heads_are_kept_per_tokenizer_and_bounded() -> None:
    first, second, tokens = CharTokenizer(), CharTokenizer(shift=True), ChatTokens(kept=2)
    assert tokens.ids(first, _chat("a"), None) == _whole(CharTokenizer(), _chat("a"))
    assert tokens.ids(second, _chat("a"), None) == _whole(CharTokenizer(shift=True), _chat("a"))
    assert tokens.ids(first, _chat("b"), None) == _whole(CharTokenizer(), _chat("b"))
    assert tokens.ids(second, _chat("b"), None) == _whole(CharTokenizer(shift=True), _chat("b"))
    for n in range(3):
        tokens.ids(first, [{"role": "user", "content": f"head {n}"}, {"role": "user", "content": "x"}], None)
    assert len(tokens._heads) == 2
