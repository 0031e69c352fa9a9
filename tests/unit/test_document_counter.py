"""A long document's pieces counted without rendering each one's prompt (workers.chat_tokens.document_counter,
issue 57 item 4): the same count as the prompt's own ids give, on the jobs' prompts and documents with the bundled
tokenizer; none where the chat template does not write the document as it is; the check made once per prompt."""

from __future__ import annotations

import dataclasses
import json

import pyarrow.parquet as pq
import pytest

from pipeline.config import load_config
from pipeline.dataflow import build_spec
from pipeline.stage_config import ActorConfig
from tests.unit.test_chat_tokens import _Added  # the fake tokenizer's special token, as in that module's
from workers import chat_tokens as chat_tokens_module
from workers.chat_tokens import document_counter
from workers.engine.vllm_engine import chat_token_ids
from workers.prompt import prompt_for
from workers.windowed import plan
from workers.windows import WindowPolicy, paragraphs, sentences

JOBS = {"jobs/extract.yaml": "jobs/sample/invoices.parquet",
        "jobs/tickets/extract.yaml": "jobs/tickets/tickets.parquet",
        "jobs/multilingual/extract.yaml": "jobs/multilingual/invoices.parquet",
        "jobs/contracts/extract.yaml": "jobs/contracts/contracts.parquet"}
EDGES = ["", " ", "\n\nINVOICE 1", "  Total: 5\n\n", "a <|im_start|>user\nb<|im_end|>", "\u00e9t\u00e9 \U0001f600",
         "{document}", "\\n\t\r\n"]


@pytest.fixture(scope="module")
def tokenizer():
    transformers = pytest.importorskip("transformers")
    from workers.bundled_model import prepare

    return transformers.AutoTokenizer.from_pretrained(str(prepare()))


def job_render(config: str):
    loaded = load_config(config)
    spec = build_spec(ActorConfig.of(loaded), "r")
    schema = loaded.contract.json_schema
    schema_json = json.dumps(schema, ensure_ascii=False)
    return loaded, lambda document: prompt_for(spec.prompt, document, schema, schema_json)


def pieces(text: str) -> list[str]:
    """The pieces a long document is counted in: its paragraphs, and a long paragraph's sentences."""
    found = []
    for a, b in paragraphs(text)[:30]:
        found.append(text[a:b])
        if b - a > 1500:
            found += [text[c:d] for c, d in sentences(text, a, b)[:40]]
    return found


@pytest.mark.parametrize("config", sorted(JOBS))
def test_a_piece_counts_as_its_prompts_own_ids_count_it(config, tokenizer):
    loaded, render = job_render(config)
    table = pq.read_table(JOBS[config])
    column = loaded.config.input.text_column
    texts = [t for t in table.column(column).to_pylist() if t]
    count = document_counter(tokenizer, render)
    assert count is not None
    empty = len(chat_token_ids(tokenizer, render("")))
    checked = 0
    for text in [*EDGES, *texts[:12], *pieces(max(texts, key=len))]:
        assert count(text) == max(0, len(chat_token_ids(tokenizer, render(text))) - empty), text[:60]
        checked += 1
    assert checked > 20


def test_windows_are_the_same_with_the_counter(tokenizer):
    _, render = job_render("jobs/extract.yaml")
    texts = pq.read_table(JOBS["jobs/extract.yaml"]).column("text").to_pylist()
    long = max(texts, key=len)[:20_000]
    joined = "\n".join(texts)[:20_000]
    for text in (long, joined):
        counted = []
        count = document_counter(tokenizer, render)

        def recording(piece, count=count, counted=counted):
            counted.append(piece)
            return count(piece)

        def ids(prompt):
            return chat_token_ids(tokenizer, prompt)

        without = plan(text, render, ids, 3584, WindowPolicy())
        with_counter = plan(text, render, ids, 3584, WindowPolicy(), recording)
        assert [(r.window, r.prompt) for r in with_counter] == [(r.window, r.prompt) for r in without]
        assert len(with_counter) > 1 and len(counted) > len(with_counter)


class Tokenizer:
    """A tokenizer of characters with special tokens cut out first, and the chat template given."""

    def __init__(self, template: str) -> None:
        self.chat_template = template
        self.rendered = 0
        self.added_tokens_decoder = {1: _Added("<|s|>"), 2: _Added("<|e|>")}

    def apply_chat_template(self, messages, chat_template=None, tokenize=True, add_generation_prompt=True):
        import jinja2

        self.rendered += 1
        text = jinja2.Template(chat_template or self.chat_template).render(messages=messages)
        return {"input_ids": self(text)["input_ids"]} if tokenize else text

    def __call__(self, text, add_special_tokens=False):
        ids = []
        for piece in text.replace("<|s|>", "\x01").replace("<|e|>", "\x02").split("\x01"):
            ids += [1] if ids or text.startswith("<|s|>") else []
            ids += [2 if c == "\x02" else ord(c) + 1000 for c in piece]
        return {"input_ids": ids[1:] if not text.startswith("<|s|>") else ids}




PLAIN = "{% for m in messages %}<|s|>{{ m.role }}\n{{ m.content }}<|e|>{% endfor %}<|s|>assistant\n"


def render_chat(document: str):
    from workers.prompt import Chat

    return Chat(({"role": "system", "content": "S" * 300}, {"role": "user", "content": f"Extract.\n{document}"}))


def test_a_template_that_does_not_write_the_document_as_it_is_gets_no_counter():
    assert document_counter(Tokenizer(PLAIN), render_chat) is not None
    trimmed = PLAIN.replace("{{ m.content }}", "{{ m.content | trim }}")
    assert document_counter(Tokenizer(trimmed), render_chat) is None
    assert document_counter(Tokenizer(""), render_chat) is None  # no chat template: a plain transcript


def test_the_check_is_made_once_per_prompt():
    chat_tokens_module._counters.clear()
    tokenizer = Tokenizer(PLAIN)
    first = document_counter(tokenizer, render_chat)
    checked = tokenizer.rendered
    assert checked > 2  # the placeholder document and each probe rendered, the probes' own ids made
    again = document_counter(tokenizer, render_chat)
    assert tokenizer.rendered == checked + 1  # only the placeholder document, to find the prompt's shape
    for document in ("one", "two words\n\n", ""):
        expected = max(0, len(chat_token_ids(tokenizer, render_chat(document))) -
                       len(chat_token_ids(tokenizer, render_chat(""))))
        assert first(document) == again(document) == expected
    def other(document: str):
        return dataclasses.replace(render_chat(document), messages=(
            {"role": "system", "content": "T" * 100}, {"role": "user", "content": f"Other.\n{document}"}))

    assert document_counter(tokenizer, other) is not None  # another prompt: checked on its own
    assert len(chat_tokens_module._counters) == 2


def test_the_extractor_counts_a_long_documents_pieces_with_its_engines_counter():
    from tests.unit.test_windows import WindowEngine, long_nda, nda_spec, table
    from workers.extractor import BatchExtractor

    class CountingEngine(WindowEngine):
        def __init__(self) -> None:
            super().__init__()
            self.counted: list[str] = []

        def document_counter(self, render):
            def tokens(prompt) -> int:  # as WindowEngine.prompt_token_ids counts, without keeping the text
                return max(1, len((prompt if isinstance(prompt, str) else prompt.messages[-1]["content"]).split()))

            def count(piece: str) -> int:
                self.counted.append(piece)
                return max(0, tokens(render(piece)) - tokens(render("")))

            return count

    plain, counting = WindowEngine(), CountingEngine()
    rows = [{k: v for k, v in BatchExtractor(e, nda_spec(), 120)(table([long_nda()])).to_pylist()[0].items()
             if k != "_extracted_at"} for e in (plain, counting)]
    assert rows[0]["_windows"] > 3 and rows[1] == rows[0]
    assert len(counting.counted) > rows[0]["_windows"]  # every piece, by the engine's counter
    assert len(counting.texts) < len(plain.texts) - len(counting.counted) // 2  # not each by its prompt's ids


def test_the_rust_tokenizer_encodes_without_offsets_and_gives_the_same_ids(tokenizer):
    from workers.chat_tokens import _fast_encode

    class Recording:
        """The bundled tokenizer's Rust tokenizer, its calls recorded."""

        truncation = padding = None

        def __init__(self) -> None:
            self.calls: list[str] = []

        def encode(self, text, add_special_tokens=False):
            self.calls.append("encode")
            return tokenizer._tokenizer.encode(text, add_special_tokens=add_special_tokens)

        def encode_batch_fast(self, texts, add_special_tokens=False):
            self.calls.append("encode_batch_fast")
            return tokenizer._tokenizer.encode_batch_fast(texts, add_special_tokens=add_special_tokens)

    class Wrapper:
        _tokenizer = Recording()

    texts = pq.read_table(JOBS["jobs/extract.yaml"]).column("text").to_pylist()
    for text in [*texts[:20], max(texts, key=len), "", " <|im_start|>user\n\u00e9 \U0001f600"]:
        assert _fast_encode(Wrapper(), text) == tokenizer._tokenizer.encode(text, add_special_tokens=False).ids
    assert set(Wrapper._tokenizer.calls) == {"encode_batch_fast"}


def test_the_engine_threads_counter_counts_one_caller_at_a_time():
    import threading

    from workers.engine.thread import EngineThread

    lock = threading.Lock()
    held: list[bool] = []

    class Inner:
        def document_counter(self, render):
            held.append(lock.locked())
            return None if render is None else lambda document: held.append(lock.locked()) or len(document)

    thread = EngineThread.__new__(EngineThread)  # no engine thread started: its tokenizing lock and a stand-in
    thread._tokenizing, thread._engine = lock, Inner()
    count = thread.document_counter(str)
    assert count is not None and count("four") == 4 and held == [True, True]
    assert thread.document_counter(None) is None and not lock.locked()
