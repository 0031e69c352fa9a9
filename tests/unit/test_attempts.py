"""`model.retry`: more attempts for a refused output, in the same batch, and exactly one outcome per document.

Pure logic (the feedback turn, the choice among attempts, the seeds, the config) and the batch bookkeeping
with an engine double that answers from what the prompt holds; the real engine runs the same loop in
test_engine_thread.py.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pyarrow as pa
import pytest
import yaml

from pipeline.config import ConfigError, load_config
from pipeline.dataflow import build_spec
from pipeline.stage_config import ActorConfig
from schemas.contract import SchemaContract
from workers.classify import Outcome, dead_letter, settle
from workers.engine import Generation
from workers.engine.contract import Engine
from workers.extractor import BatchExtractor, retry_seed
from workers.prompt import Chat, feedback_text, with_feedback
from workers.spec import ExtractionSpec, RetryPolicy

ROOT = Path(__file__).resolve().parents[2]
GOOD = {"customer": {"name": "Ann"}, "product": "Kettle", "priority": "low", "summary": "Broken"}
BAD = {**GOOD, "priority": "urgent"}  # not in the enum: schema_violation


# -- the feedback turn ------------------------------------------------------------------------------------


def test_feedback_names_each_field_and_its_message_once_and_the_field_once() -> None:
    error = {"message": "x", "errors": [
        {"loc": ["total"], "msg": "Value error, total 12.0 does not appear in the document", "type": "value_error"},
        {"loc": ["vendor", "name"], "msg": "Value error, vendor name does not appear in the document"},
        {"loc": ["total"], "msg": "Value error, total 12.0 does not appear in the document"},
        {"loc": [], "msg": "Value error, due_date 2026-01-01 is before issue_date 2026-02-01"},
    ]}
    assert feedback_text("semantic_invalid", error) == (
        "Your answer failed validation: total 12.0 does not appear in the document; vendor.name: vendor "
        "name does not appear in the document; due_date 2026-01-01 is before issue_date 2026-02-01. Answer again.")


def test_feedback_is_bounded_and_says_so() -> None:
    error = {"errors": [{"loc": [f"f{i}"], "msg": "m" * 500} for i in range(8)]}
    text = feedback_text("schema_violation", error)
    assert "f4: " in text and "f5: " not in text and text.endswith("; and 3 more. Answer again.")
    assert "m" * 201 not in text


def test_feedback_for_a_cut_off_output_and_for_an_error_without_details() -> None:
    assert "cut off" in feedback_text("truncated", {"message": "output hit the token limit after 512 tokens"})
    assert feedback_text("invalid_json", {"message": "Expecting value at char 0"}) == \
        "Your answer failed validation: Expecting value at char 0. Answer again."


def test_feedback_continues_the_chat_with_the_refused_answer_then_the_errors() -> None:
    chat = Chat(({"role": "system", "content": "s"}, {"role": "user", "content": "doc"}), "tmpl")
    out = with_feedback(chat, '{"a":1}', "Your answer failed validation: a: no. Answer again.")
    assert [m["role"] for m in out.messages] == ["system", "user", "assistant", "user"]
    assert out.messages[2]["content"] == '{"a":1}' and out.chat_template == "tmpl"
    plain = with_feedback("doc", "{}", "again")
    assert plain.messages == ({"role": "user", "content": "doc"}, {"role": "assistant", "content": "{}"},
                              {"role": "user", "content": "again"})


# -- choosing among attempts ------------------------------------------------------------------------------


def test_the_first_row_wins() -> None:
    row1, row2 = Outcome(record={"a": 1}), Outcome(record={"a": 2})
    assert settle([dead_letter("semantic_invalid", "no"), row1, row2]) is row1
    assert settle([row2]) is row2


def test_a_document_that_fails_every_attempt_is_one_dead_letter_naming_the_last_errors_and_the_count() -> None:
    attempts = [dead_letter("semantic_invalid", "total 1 does not appear", errors=[{"loc": ["total"]}]),
                dead_letter("truncated", "output hit the token limit"),
                dead_letter("semantic_invalid", "total 2 does not appear", errors=[{"loc": ["total"], "msg": "t2"}])]
    out = settle(attempts)
    assert out.reason == "semantic_invalid"
    assert out.error == {"message": "after 3 attempts: total 2 does not appear", "errors": [{"loc": ["total"],
                                                                                              "msg": "t2"}],
                         "attempts": 3, "attempt_reasons": ["semantic_invalid", "truncated", "semantic_invalid"]}
    assert attempts[-1].error["message"] == "total 2 does not appear"  # the attempts themselves are left as they were
    single = dead_letter("semantic_invalid", "no")
    assert settle([single]) is single and "attempts" not in single.error  # one attempt: today's dead letter


def test_seeds_are_stable_and_differ_per_document_and_attempt() -> None:
    assert retry_seed(0, "inv-1", 2) == retry_seed(0, "inv-1", 2)
    seeds = {retry_seed(0, d, a) for d in ("inv-1", "inv-2") for a in (2, 3)} | {retry_seed(7, "inv-1", 2)}
    assert len(seeds) == 5 and all(0 <= s < 2**31 for s in seeds)


# -- the config -------------------------------------------------------------------------------------------


def config(tmp_path: Path, **model) -> Path:
    raw = yaml.safe_load((ROOT / "jobs/extract.yaml").read_text())
    raw["input"]["uri"] = str(ROOT / "jobs/sample/invoices.parquet")
    raw["model"].update(model)
    path = tmp_path / "extract.yaml"
    path.write_text(yaml.safe_dump(raw))  # schemas.invoice is imported as the repository's own (no job copy)
    return path


def test_retry_settings_reach_the_spec(tmp_path: Path) -> None:
    path = config(tmp_path, retry={"attempts": 3, "temperature": 0.7, "on": ["semantic_invalid", "truncated"]},
                  sampling={"seed": 11})
    spec = build_spec(ActorConfig.of(load_config(path)), "r")
    assert spec.retry == RetryPolicy(attempts=3, feedback=True, temperature=0.7, on=("semantic_invalid", "truncated"),
                                     seed=11)


def test_retry_temperature_defaults_to_the_models(tmp_path: Path) -> None:
    spec = build_spec(ActorConfig.of(load_config(config(tmp_path, retry={"attempts": 2}, temperature=0.3))), "r")
    assert spec.retry.temperature == 0.3 and spec.retry.feedback


@pytest.mark.parametrize("model, message", [
    ({"retry": {"attempts": 0}}, "model.retry.attempts: Input should be greater than or equal to 1"),
    ({"retry": {"attempts": 2, "on": ["engine_error"]}}, "model.retry.on.0: Input should be"),
    ({"retry": {"attempts": 2, "on": []}}, "needs at least one reason"),
    ({"retry": {"attempts": 2, "feedback": False}}, "repeats the same output"),
    ({"retry": {"attempts": 2, "mode": "repair"}}, "model.retry.mode: unknown key"),
])
def test_a_retry_that_cannot_work_fails_before_ray_starts(tmp_path: Path, model: dict, message: str) -> None:
    with pytest.raises(ConfigError) as err:
        load_config(config(tmp_path, **model))
    assert message in str(err.value) and "\n" not in str(err.value)


def test_resampling_without_feedback_is_allowed(tmp_path: Path) -> None:
    loaded = load_config(config(tmp_path, retry={"attempts": 2, "feedback": False, "temperature": 0.8}))
    spec = build_spec(ActorConfig.of(loaded), "r")
    assert spec.retry.attempts == 2 and not spec.retry.feedback


# -- the batch --------------------------------------------------------------------------------------------


class ChatEngine(Engine):
    """Tokenizes a prompt (text or chat) by characters, and answers from `answer(document, turns, seed)`:
    `turns` is how many feedback turns the prompt carries."""

    def __init__(self, answer) -> None:
        self.answer = answer
        self.calls: list[dict] = []
        self.fail_on_call: int | None = None

    def prompt_token_ids(self, prompt) -> list[int]:
        return [ord(c) for c in json.dumps(prompt.messages if isinstance(prompt, Chat) else prompt)]

    def warm(self, json_schema) -> float:
        return 0.0

    def generate(self, prompts, json_schemas, max_tokens, temperature, seeds=None):
        self.calls.append({"n": len(prompts), "temperature": temperature, "seeds": seeds})
        if self.fail_on_call == len(self.calls):
            raise RuntimeError("a request failed")
        out = []
        for i, ids in enumerate(prompts):
            messages = json.loads("".join(chr(c) for c in ids))
            messages = [{"role": "user", "content": messages}] if isinstance(messages, str) else messages
            document = messages[0]["content"]
            turns = [m["content"] for m in messages if m["role"] == "user"][1:]
            text = self.answer(document, turns, seeds[i] if seeds else None)
            out.append(Generation(json.dumps(text) if isinstance(text, dict) else text, "stop", len(ids), 9))
        return out


def spec(**retry) -> ExtractionSpec:
    contract = SchemaContract.from_model_ref("tests.fixtures.models:Ticket")
    return ExtractionSpec(run_id="r", id_column="id", text_column="text", prompt_template="{document}",
                          contract=contract, model_path="m", model_name="m", max_tokens=50, temperature=0.0,
                          max_model_len=100_000, retry=RetryPolicy(**retry))


def run(engine, policy_spec, texts):
    table = pa.table({"id": pa.array([f"d{i}" for i in range(len(texts))]), "text": pa.array(texts, pa.string())})
    return BatchExtractor(engine, policy_spec, policy_spec.max_model_len)(table)


def errors(out) -> list:
    return [json.loads(e) if e else None for e in out.column("_error").to_pylist()]


def test_a_refused_output_gets_the_errors_back_and_the_first_passing_attempt_is_the_row() -> None:
    seen: list[list[str]] = []

    def answer(document, turns, seed):
        seen.append(turns)
        if document == "fixable" and turns:
            return GOOD
        return {**BAD, "summary": f"try {len(turns)}"} if document != "fine" else GOOD  # a new refused answer each time

    engine = ChatEngine(answer)
    out = run(engine, spec(attempts=3), ["fine", "fixable", "hopeless", "   "])
    assert out.column("id").to_pylist() == ["d0", "d1", "d2", "d3"]
    assert out.column("_kind").to_pylist() == ["row", "row", "dead_letter", "dead_letter"]
    assert out.column("_reason").to_pylist() == [None, None, "schema_violation", "empty_input"]
    # attempt 1: three documents; attempt 2: the two refused ones; attempt 3: only the one still refused
    assert [c["n"] for c in engine.calls] == [3, 2, 1]
    assert all(c["temperature"] == 0.0 and c["seeds"] is None for c in engine.calls)
    assert seen[3][0].startswith("Your answer failed validation: priority: ") and seen[3][0].endswith("Answer again.")
    hopeless = errors(out)[2]
    assert hopeless["attempts"] == 3 and hopeless["message"].startswith("after 3 attempts: ")
    assert hopeless["attempt_reasons"] == ["schema_violation"] * 3


def test_one_attempt_is_todays_behaviour() -> None:
    engine = ChatEngine(lambda document, turns, seed: BAD)
    out = run(engine, spec(), ["a", "b"])
    assert [c["n"] for c in engine.calls] == [1 * 2]
    assert out.column("_reason").to_pylist() == ["schema_violation"] * 2
    assert all("attempts" not in e for e in errors(out))


def test_only_the_reasons_asked_for_are_tried_again() -> None:
    engine = ChatEngine(lambda document, turns, seed: "{not json" if document == "j" else BAD)
    out = run(engine, spec(attempts=2, on=("invalid_json",)), ["j", "v"])
    assert [c["n"] for c in engine.calls] == [2, 1]
    assert errors(out)[0]["attempts"] == 2 and "attempts" not in errors(out)[1]


def test_resampling_seeds_each_document_and_attempt_and_stops_repeating_itself_at_temperature_0() -> None:
    engine = ChatEngine(lambda document, turns, seed: BAD)
    run(engine, spec(attempts=3, feedback=False, temperature=0.9, seed=5), ["a", "b"])
    assert [c["n"] for c in engine.calls] == [2, 2, 2] and engine.calls[0]["seeds"] is None
    assert engine.calls[1]["seeds"] == [retry_seed(5, "d0", 2), retry_seed(5, "d1", 2)]
    assert engine.calls[2]["seeds"] == [retry_seed(5, "d0", 3), retry_seed(5, "d1", 3)]
    assert {c["temperature"] for c in engine.calls[1:]} == {0.9}
    # greedy feedback: attempt 3's prompt would be attempt 2's (the same refused answer), so it is not sent
    engine = ChatEngine(lambda document, turns, seed: BAD)
    out = run(engine, spec(attempts=3), ["a"])
    assert [c["n"] for c in engine.calls] == [1, 1] and errors(out)[0]["attempts"] == 2


def test_a_prompt_grown_past_the_context_is_not_tried_again() -> None:
    engine = ChatEngine(lambda document, turns, seed: BAD)
    tight = dataclasses.replace(spec(attempts=3), max_model_len=len(ChatEngine(None).prompt_token_ids("a")) + 60)
    out = run(engine, tight, ["a"])
    assert [c["n"] for c in engine.calls] == [1]
    assert out.column("_reason").to_pylist() == ["schema_violation"]


def test_a_failed_later_attempt_keeps_each_documents_outcome_so_far() -> None:
    engine = ChatEngine(lambda document, turns, seed: GOOD if document == "ok" else BAD)
    engine.fail_on_call = 2
    out = run(engine, spec(attempts=3), ["ok", "bad"])
    assert out.column("_reason").to_pylist() == [None, "schema_violation"]
    assert "attempts" not in errors(out)[1]
    engine = ChatEngine(lambda document, turns, seed: GOOD)
    engine.fail_on_call = 1
    out = run(engine, spec(attempts=3), ["ok", "bad"])
    assert out.column("_reason").to_pylist() == ["engine_error", "engine_error"] and len(engine.calls) == 1


def test_one_attempt_keeps_the_output_hash_from_before_retry_and_more_attempts_change_it(tmp_path: Path) -> None:
    loaded = load_config(config(tmp_path, retry={"attempts": 1}))
    assert "retry" not in loaded.decisive["model"]
    one = loaded.output_hash
    (tmp_path / "b").mkdir()
    assert load_config(config(tmp_path / "b", retry={"attempts": 1, "temperature": 0.5})).output_hash == one
    (tmp_path / "c").mkdir()
    assert load_config(config(tmp_path / "c", retry={"attempts": 3})).output_hash != one
