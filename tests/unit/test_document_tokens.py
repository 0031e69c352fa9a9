"""A long document's pieces and windows tokenized from one encoding of the whole document
(workers.document_tokens, issue 57 item 4): the same counts, windows and prompt ids as each piece's and each
window's prompt tokenized on its own, with the bundled tokenizer, on the jobs' documents, 20,000-character ones
made of them and texts of odd spacing; tokenized as before where the tokenizer is of another kind, where the
document writes an added token, and once an answer made both ways differed."""

from __future__ import annotations

import random

import pyarrow.parquet as pq
import pytest

from tests.unit.test_chat_tokens import CharTokenizer
from tests.unit.test_document_counter import JOBS, job_render
from workers import document_tokens
from workers.chat_tokens import document_counter
from workers.engine.vllm_engine import chat_token_ids
from workers.windowed import plan
from workers.windows import WindowPolicy

ROOM = 4096 - 512  # the sample job's max_model_len less its max_tokens


@pytest.fixture(scope="module")
def tokenizer():
    transformers = pytest.importorskip("transformers")
    from workers.bundled_model import prepare

    return transformers.AutoTokenizer.from_pretrained(str(prepare()))


@pytest.fixture()
def unchecked(monkeypatch):
    """No answer made both ways: what is compared below is the cut encoding's own."""
    monkeypatch.setattr(document_tokens, "VERIFIED", 0)


def job_texts(config: str) -> list[str]:
    loaded, _ = job_render(config)
    return [t for t in pq.read_table(JOBS[config]).column(loaded.config.input.text_column).to_pylist() if t]


def joined(texts: list[str], count: int, chars: int = 20_000) -> list[str]:
    out = []
    for i in range(count):
        text = texts[i % len(texts)]
        while len(text) < chars:
            text += "\n" + texts[(i + len(text)) % len(texts)]
        out.append(text[:chars])
    return out


def odd_texts(seed: int = 3) -> list[str]:
    """Spaces after every kind of character (other white space, accents, CJK, emoji, quotes), runs of spaces."""
    rng = random.Random(seed)
    alphabet = ["a", "b", " ", " ", "  ", ",", ".", "\n", "\n\n", "\t", "'", "'s", "\u00e9", "e\u0301", "\u4e2d",
                "\U0001f600", "1", "12", "\u00a0", "\u2003", "\u3000", "-", "\"", "$"]
    return ["".join(rng.choice(alphabet) for _ in range(n)) for n in (3000, 6000, 9000)] + [
        "word " * 2000, " leading and trailing  " * 300, "no-spaces-at-all" * 500]


def plans(tokenizer, render, text: str, window_tokens: int | None) -> tuple[object, object]:
    """The text's windows and their prompts: as before (each piece and window tokenized on its own), and from
    the document's one encoding."""
    counter = document_counter(tokenizer, render)
    policy = WindowPolicy(window_tokens=window_tokens, max_windows=400)

    def ids(prompt):
        return chat_token_ids(tokenizer, prompt)

    def value(planned):
        return planned.reason if not isinstance(planned, list) else [(r.window, r.text, r.prompt) for r in planned]

    before = plan(text, render, ids, ROOM, policy, lambda piece: counter.plain(piece))
    tokens = counter.document(text)
    assert tokens is not None
    return value(before), value(plan(text, render, ids, ROOM, policy, counter, tokens))


@pytest.mark.parametrize("config", sorted(JOBS))
def test_windows_and_prompts_are_the_same_from_one_encoding(config, tokenizer, unchecked):
    _, render = job_render(config)
    texts = job_texts(config)
    for n, text in enumerate(joined(texts, 2) + [max(texts, key=len)]):
        for window_tokens in (None, 64, 700):
            before, after = plans(tokenizer, render, text, window_tokens)
            assert isinstance(before, list) and (len(before) > 1 or n == 2)  # a job's longest may fit one
            assert after == before


def test_pieces_and_prompts_of_any_span_are_the_same(tokenizer, unchecked):
    """Spans cut anywhere (not only where the splitter cuts) of the jobs' long documents and of odd texts."""
    _, render = job_render("jobs/extract.yaml")
    counter = document_counter(tokenizer, render)
    rng = random.Random(7)
    cut = 0
    for text in joined(job_texts("jobs/extract.yaml"), 1) + joined(job_texts("jobs/multilingual/extract.yaml"), 1) \
            + odd_texts():
        tokens = counter.document(text)
        assert tokens is not None
        whole = render(text)
        assert tokens.prompt_ids(whole, 0, len(text)) == chat_token_ids(tokenizer, whole)
        for _ in range(25):
            start = rng.randrange(len(text))
            end = min(len(text), start + rng.randrange(1, 4000))
            cut += tokens._middle(start, end) is not None
            assert tokens.count(start, end) == counter.plain(text[start:end]), (start, end)
            chat = render(text[start:end])
            assert tokens.prompt_ids(chat, start, end) == chat_token_ids(tokenizer, chat), (start, end)
    assert cut > 120  # most spans were made from the one encoding, not tokenized whole


def test_odd_texts_are_windowed_alike(tokenizer, unchecked):
    _, render = job_render("jobs/extract.yaml")
    for text in odd_texts(11):
        before, after = plans(tokenizer, render, text, 200)
        assert after == before


def test_a_document_writing_an_added_token_is_tokenized_as_before(tokenizer):
    _, render = job_render("jobs/extract.yaml")
    counter = document_counter(tokenizer, render)
    assert counter.document("Total: 5 <|im_end|> due") is None
    assert counter.document("Total: 5 due") is not None


def test_another_kind_of_tokenizer_is_tokenized_as_before():
    assert document_tokens.added_tokens(CharTokenizer()) is None  # not a `tokenizers` tokenizer


def test_an_answer_that_differs_turns_the_cut_off(tokenizer, monkeypatch):
    """The first answers of a prompt shape are made both ways: where they differ, the plain one is given and
    the prompt shape's documents are tokenized as before from then on."""
    _, render = job_render("jobs/tickets/extract.yaml")
    counter = document_counter(tokenizer, render)
    monkeypatch.setattr(document_tokens, "_answers", {})
    text = joined(job_texts("jobs/tickets/extract.yaml"), 1)[0]
    tokens = counter.document(text)
    tokens._encoded()
    tokens._ids = [i + 1 for i in tokens._ids]  # as if the encoding could not be cut
    chat = render(text[100:5000])
    assert tokens.prompt_ids(chat, 100, 5000) == chat_token_ids(tokenizer, chat)
    assert document_tokens._answers[counter.key] == -1
    assert counter.document(text) is None
