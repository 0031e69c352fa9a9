"""The logic that isolates poison documents, without an engine or Ray: the character bound that refuses a text too
long for the context before tokenizing it, the crash journal's bookkeeping and the actor's gate.
(tests/integration/test_poison_documents.py runs the same on a real cluster and engine, with a real process death.)"""

from __future__ import annotations

import json
import threading
import time

import pyarrow as pa
from tokenizers import Tokenizer, models
from transformers import PreTrainedTokenizerFast

from schemas.contract import SchemaContract
from workers.crashes import Gate, Journal, batch_key, crash_outcome
from workers.engine import Generation, longest_token_chars
from workers.engine.contract import Engine
from workers.extractor import BatchExtractor
from workers.spec import ExtractionSpec

GOOD = {"customer": {"name": "Ann"}, "product": "Kettle", "priority": "low", "summary": "Broken"}


class CountingEngine(Engine):
    """Tokenizes by whitespace, counting the characters it was asked to tokenize; answers every prompt with GOOD."""

    max_chars_per_token = 4

    def __init__(self) -> None:
        self.tokenized_chars = 0

    def prompt_token_ids(self, text: str) -> list[int]:
        self.tokenized_chars += len(text)
        return list(range(len(text.split())))

    def warm(self, json_schema) -> float:
        return 0.0

    def generate(self, prompts, json_schemas, max_tokens, temperature):
        return [Generation(json.dumps(GOOD), "stop", len(p), 12) for p in prompts]


def _spec() -> ExtractionSpec:
    return ExtractionSpec(run_id="r", id_column="id", text_column="text", prompt_template="{document}",
                          contract=SchemaContract.from_model_ref("tests.fixtures.models:Ticket"), model_path="m",
                          model_name="m", max_tokens=50, temperature=0.0, max_model_len=100)


def test_a_text_past_max_model_len_times_the_longest_token_is_input_too_long_untokenized():
    engine = CountingEngine()
    huge = "word " * 1_000_000  # 5 MB: 100 tokens × 4 characters is the most the context could hold
    out = BatchExtractor(engine, _spec(), 100)(pa.table({"id": [1, 2], "text": ["a b c", huge]}))
    assert out.column("_reason").to_pylist() == [None, "input_too_long"]
    error = json.loads(out.column("_error")[1].as_py())
    assert error["characters"] == len(huge) and error["max_characters"] == 400 and "not tokenized" in error["message"]
    assert engine.tokenized_chars < 1000  # the short document's prompt only: the huge text never reached it


def test_a_text_under_the_bound_is_still_tokenized_and_checked():
    engine = CountingEngine()
    text = "w " * 150  # 300 characters (under 400), 150 tokens: past the context once tokenized
    out = BatchExtractor(engine, _spec(), 100)(pa.table({"id": [1], "text": [text]}))
    assert out.column("_reason").to_pylist() == ["input_too_long"]
    assert json.loads(out.column("_error")[0].as_py())["prompt_tokens"] == 150


def test_longest_token_chars_reads_the_whole_vocabulary_special_tokens_included():
    vocab = {"<unk>": 0, "a": 1, "bb": 2, "Ġccc": 3}
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=Tokenizer(models.WordLevel(vocab, unk_token="<unk>")),
                                        unk_token="<unk>")
    assert longest_token_chars(tokenizer) == 5  # "<unk>"
    tokenizer.add_special_tokens({"additional_special_tokens": ["<|a_long_special|>"]})
    assert longest_token_chars(tokenizer) == len("<|a_long_special|>")
    assert longest_token_chars(object()) is None  # no vocabulary to read: no bound, documents are tokenized


def test_the_journal_counts_a_crash_when_an_attempt_never_ended_and_names_the_document_alone_at_it():
    journal = Journal()
    assert journal.begin("b1", "actor-1") == (0, {})
    assert journal.begin("b2", "actor-1") == (0, {})
    journal.end("b2")  # b2 finished; b1 was in flight when actor-1 died
    assert journal.suspect("b1") and not journal.suspect("b2") and not journal.suspect("b3")
    assert journal.begin("b1", "actor-1b") == (1, {})  # a crash with its batch: no document named yet
    journal.alone("b1", 0, {"document_id": "d0"})
    journal.alone("b1", None)  # d0 done
    journal.alone("b1", 1, {"document_id": "d1", "stage": "generating"})  # the process dies with d1 alone in it
    crashes, poison = journal.begin("b1", "actor-1c")
    assert crashes == 2 and list(poison) == [1]
    assert poison[1]["document_id"] == "d1" and poison[1]["actor"] == "actor-1b" and poison[1]["crashes"] == 2
    journal.end("b1")
    assert journal.begin("b2", "actor-1c") == (0, {})  # an ended batch that comes again counts no crash
    outcome = crash_outcome(poison[1])
    assert outcome.reason == "actor_crash" and "died twice" in outcome.error["message"]
    assert "while generating" in outcome.error["message"] and outcome.error["stage"] == "generating"


def test_a_batch_key_is_its_units_and_ids_in_order():
    a = pa.table({"id": [1, 2], "_unit": ["u", "u"], "text": ["x", "y"]})
    assert batch_key(a, "id", "_unit") == batch_key(a.set_column(2, "text", pa.array(["p", "q"])), "id", "_unit")
    assert batch_key(a, "id", "_unit") != batch_key(a.slice(0, 1), "id", "_unit")
    assert batch_key(a, "id", "_unit") != batch_key(a.set_column(1, "_unit", pa.array(["v", "v"])), "id", "_unit")


def test_the_gate_runs_an_exclusive_holder_alone():
    gate, events, lock = Gate(), [], threading.Lock()

    def shared(name: str) -> None:
        with gate.shared():
            with lock:
                events.append(f"{name}+")
            time.sleep(0.05)
            with lock:
                events.append(f"{name}-")

    def exclusive() -> None:
        with gate.exclusive():
            with lock:
                events.append("X+")
            time.sleep(0.05)
            with lock:
                events.append("X-")

    threads = [threading.Thread(target=shared, args=("a",)), threading.Thread(target=exclusive),
               threading.Thread(target=shared, args=("b",))]
    for t in threads:
        t.start()
        time.sleep(0.01)
    for t in threads:
        t.join()
    start, end = events.index("X+"), events.index("X-")
    assert end == start + 1  # nothing began or ended while the exclusive holder ran
    assert set(events) == {"a+", "a-", "b+", "b-", "X+", "X-"}
