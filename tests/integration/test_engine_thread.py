"""`EngineThread` on a real vLLM engine: concurrent callers share one running engine and each gets its own outputs."""

from __future__ import annotations

import json
import subprocess
import sys
import threading

import pytest

from workers.bundled_model import resolve_model_path
from workers.engine import EngineThread, engine_arguments

CONST = {"type": "object", "properties": {"who": {"type": "string", "enum": ["{name}"]},
                                          "n": {"type": "integer", "minimum": 0, "maximum": 9}},
         "required": ["who", "n"], "additionalProperties": False}
# vLLM refuses multipleOf on a number for the XGrammar backend, at request time
REFUSED = {"type": "object", "properties": {"x": {"type": "number", "multipleOf": 0.5}}, "required": ["x"]}


def schema_for(name: str) -> dict:
    return json.loads(json.dumps(CONST).replace("{name}", name))


def records_of(out) -> list[dict | None]:
    """Each row's record in its JSON form, from the outcome table's `_typed` column (typed on the actor): dates
    as ISO text, decimals as floats, as the model wrote them."""
    import datetime
    import decimal

    def plain(value):
        if isinstance(value, dict):
            return {key: plain(item) for key, item in value.items()}
        if isinstance(value, list):
            return [plain(item) for item in value]
        if isinstance(value, datetime.date):
            return value.isoformat()
        return float(value) if isinstance(value, decimal.Decimal) else value

    return [plain(record) for record in out.column("_typed").to_pylist()]


HOG_BYTES = 4 << 30


@pytest.fixture(scope="module")
def engine(monkeypatch_module):
    """The module's engine, started while another process holds 4 GiB, with the budget our CPU default sizes
    from the job (8 sequences of 1024 tokens), not a fixed one: it must start whatever else holds memory."""
    monkeypatch_module.setenv("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    monkeypatch_module.setenv("TOKENIZERS_PARALLELISM", "false")
    hog = subprocess.Popen([sys.executable, "-c", f"b = bytearray({HOG_BYTES}); b[::4096] = b'x' * len(b[::4096]); "
                            "print('held', flush=True); import sys; sys.stdin.read()"],
                           stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert hog.stdout is not None and hog.stdout.readline().strip() == "held"
        args = engine_arguments(resolve_model_path("bundled"), 1024, 1, {"enforce_eager": True}, False, sequences=8)
        width = 4 if args.get("dtype") == "float32" else 2  # float32 where bfloat16 is not native (precision.py)
        assert args["kv_cache_memory_bytes"] == 8 * 1024 * 30 * 3 * 64 * 2 * width  # what 8 sequences need: it fits
        shared = EngineThread(**args)
    finally:
        hog.kill()
        hog.wait()
    yield shared
    shared.close()


@pytest.fixture(scope="module")
def monkeypatch_module():
    with pytest.MonkeyPatch.context() as patch:
        yield patch


def test_concurrent_callers_each_get_their_own_outputs_in_order(engine):
    callers = ["alpha", "beta", "gamma"]
    results: dict[str, list] = {}
    errors: list[BaseException] = []

    def call(name: str) -> None:
        try:
            prompts = [engine.prompt_token_ids(f"Write {name} and the digit {i}.") for i in range(4)]
            results[name] = engine.generate(prompts, schema_for(name), 32, 0.0)
        except BaseException as exc:  # noqa: BLE001 - surfaced by the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=call, args=(name,)) for name in callers]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert not errors
    for name in callers:
        outputs = results[name]
        assert len(outputs) == 4
        for g in outputs:
            # each caller's grammar admits only its own name: a crossed wire would show here
            assert json.loads(g.text)["who"] == name, g.text
            assert g.finish_reason == "stop" and g.output_tokens > 0 and g.prompt_tokens > 0


def test_the_tokens_of_every_step_are_counted_before_the_requests_finish(engine):
    steps: list[int] = []
    finished: list[int] = []
    engine.on_tokens = steps.append
    engine.on_request_done = lambda output: finished.append(sum(len(c.token_ids) for c in output.outputs))
    try:
        prompts = [engine.prompt_token_ids(f"Write count and the digit {i}.") for i in range(3)]
        outputs = engine.generate(prompts, schema_for("count"), 32, 0.0)
    finally:
        engine.on_tokens = None
        engine.on_request_done = None
    made = sum(g.output_tokens for g in outputs)
    assert len(finished) == 3 and sum(finished) == made
    # the steps' counts add up to the tokens the requests kept, and came in more than one step each
    assert sum(steps) == made and len(steps) > 1, (steps, made)


def test_a_refused_request_fails_alone(engine):
    good: list = []

    def call_good() -> None:
        good.extend(engine.generate([engine.prompt_token_ids("Write delta and 3.")], schema_for("delta"), 32, 0.0))

    t = threading.Thread(target=call_good)
    t.start()
    mixed = engine.generate([engine.prompt_token_ids("x")] * 2, [REFUSED, schema_for("delta")], 32, 0.0)
    t.join(timeout=300)
    # the refused request comes back as such, with vLLM's reason; the one beside it and the other caller's run
    assert mixed[0].finish_reason == "refused" and mixed[0].output_tokens == 0
    assert "multipleOf" in mixed[0].error or "not supported" in mixed[0].error, mixed[0].error
    assert json.loads(mixed[1].text)["who"] == "delta" and mixed[1].error is None
    assert [json.loads(g.text)["who"] for g in good] == ["delta"]
    # a call whose every request is refused returns rather than waiting
    assert [g.finish_reason for g in engine.generate([engine.prompt_token_ids("y")], REFUSED, 8, 0.0)] == ["refused"]
    # the engine is still serving after the refusals
    assert json.loads(engine.generate([engine.prompt_token_ids("again")], schema_for("eps"), 32, 0.0)[0].text)["who"] \
        == "eps"


def test_compile_runs_beside_a_busy_engine_and_the_request_finds_it_ready(engine):
    from workers import vllm_compat

    # a first request builds the backend and caches kappa's grammar: the busy requests below add nothing to it
    engine.generate([engine.prompt_token_ids("Write kappa and 0.")], schema_for("kappa"), 4, 0.0)
    cache = vllm_compat.grammar_backend(engine._engine.llm).compiler  # XGrammar's compiler, with vLLM's cache
    busy: list = []
    t = threading.Thread(target=lambda: busy.extend(engine.generate(
        [engine.prompt_token_ids(f"Write kappa and {i}.") for i in range(6)], schema_for("kappa"), 32, 0.0)))
    t.start()
    before = cache.get_cache_size_bytes()
    seconds = engine.compile(schema_for("lambda"))  # on this thread, while the engine thread decodes
    assert seconds is not None and seconds > 0
    compiled = cache.get_cache_size_bytes()
    assert compiled > before  # it landed in the backend's cache (a timing says nothing: a tiny grammar takes ms)
    assert engine.compile(schema_for("lambda")) is not None
    assert cache.get_cache_size_bytes() == compiled  # found there: nothing compiled again
    out = engine.generate([engine.prompt_token_ids("Write lambda and 1.")], schema_for("lambda"), 32, 0.0)
    t.join(timeout=300)
    assert json.loads(out[0].text)["who"] == "lambda" and len(busy) == 6
    with pytest.raises(Exception):  # noqa: B017 - XGrammar's own error type: a reference to nothing
        engine.compile({"type": "object", "properties": {"x": {"$ref": "#/$defs/missing"}}})


def test_warm_compiles_and_free_text_needs_no_grammar(engine):
    assert engine.warm(schema_for("zeta")) > 0
    free = engine.generate([engine.prompt_token_ids("Say hi.")], None, 5, 0.0)[0]
    assert free.output_tokens == 5 and free.finish_reason == "length"


def test_the_engine_masks_logits_with_the_fast_kernel(engine, monkeypatch):
    from workers import bitmask

    assert engine._engine.mask_kernel == "fast"
    calls = []
    kernel = bitmask.apply_token_bitmask_inplace_cpu

    def counting(*args, **kwargs):
        calls.append(args[0].shape)
        return kernel(*args, **kwargs)

    monkeypatch.setattr(bitmask, "apply_token_bitmask_inplace_cpu", counting)
    out = engine.generate([engine.prompt_token_ids("Name?")], schema_for("mu"), 24, 0.0)[0]
    assert json.loads(out.text)["who"] == "mu"
    # Every sampled position is masked: one row a decode step, or several when the step verifies a draft.
    assert sum(shape[0] for shape in calls) >= out.output_tokens - 1  # the grammar may end the last


def test_drafts_from_the_prompt_are_verified_under_the_grammar(engine, monkeypatch):
    """On CPU the engine speculates from the prompt (`PROMPT_LOOKUP`): a step whose sequence has a
    draft masks the draft's positions too, so a lone sequence copying a code shows steps of several rows."""
    from workers import bitmask

    rows = []
    kernel = bitmask.apply_token_bitmask_inplace_cpu

    def counting(*args, **kwargs):
        rows.append(args[0].shape[0])
        return kernel(*args, **kwargs)

    monkeypatch.setattr(bitmask, "apply_token_bitmask_inplace_cpu", counting)
    code = "QX7-ALPHA-2291-BRAVO-8834-CHARLIE-5510-DELTA-7702-ECHO"
    schema = {"type": "object", "properties": {"code": {"type": "string", "maxLength": 80}}, "required": ["code"],
              "additionalProperties": False}
    prompt = f"The code is {code}. The code is {code}. Copy the code exactly into JSON."
    out = engine.generate([engine.prompt_token_ids(prompt)], schema, 60, 0.0)[0]
    assert set(json.loads(out.text)) == {"code"}
    assert max(rows) > 1, rows  # some step verified a draft
    assert len(rows) < out.output_tokens, (len(rows), out.output_tokens)  # fewer steps than tokens


def test_a_refused_output_is_tried_again_on_the_real_engine_and_settles_to_one_outcome(engine):
    """`model.retry` through the real engine: the refused output and its errors go back as chat turns, each
    later attempt is sampled with a seed of its own, and every document ends as exactly one outcome. A
    REJECT-ME document cannot pass (its validator refuses any output), so it uses every attempt."""
    import pyarrow as pa

    from schemas.contract import SchemaContract
    from workers.extractor import BatchExtractor
    from workers.spec import ExtractionSpec, RetryPolicy

    spec = ExtractionSpec(
        run_id="r", id_column="id", text_column="text", contract=SchemaContract.from_model_ref(
            "tests.fixtures.models:Ticket"), prompt_template="Extract the support ticket as JSON.\n{document}",
        model_path="m", model_name="m", max_tokens=96, temperature=0.0, max_model_len=1024,
        retry=RetryPolicy(attempts=3, temperature=0.8, on=("semantic_invalid", "schema_violation", "truncated")))
    out = BatchExtractor(engine, spec, 1024)(pa.table({"id": ["ok", "rejected"], "text": [
        "From Ann: my Kettle is broken, low priority.", "REJECT-ME. From Bob: the Toaster smokes, high priority."]}))
    assert out.column("id").to_pylist() == ["ok", "rejected"]
    kind, reason, error = (out.column(c).to_pylist()[1] for c in ("_kind", "_reason", "_error"))
    error = json.loads(error)
    assert kind == "dead_letter" and reason in ("semantic_invalid", "truncated"), error
    assert error["attempts"] == 3 and len(error["attempt_reasons"]) == 3, error
    assert error["message"].startswith("after 3 attempts: ")
    assert out.column("_kind").to_pylist()[0] == "row" or out.column("_reason").to_pylist()[0] is not None


def test_each_document_decodes_under_its_own_grounded_grammar_in_one_batch(engine):
    """`x-grounded` fields on the real engine: documents of one batch each get the enum of their own values,
    so every row's amount and code are ones its own document writes (a grammar shared across the batch, or
    one from another document, would show here)."""
    import pyarrow as pa

    from schemas.contract import SchemaContract
    from schemas.grounding import words
    from workers.extractor import BatchExtractor
    from workers.spec import ExtractionSpec

    schema = {"type": "object", "properties": {"amount": {"type": "number", "x-grounded": "number"},
                                               "code": {"type": "string", "x-grounded": "word"}},
              "required": ["amount", "code"], "additionalProperties": False}
    spec = ExtractionSpec(
        run_id="r", id_column="id", text_column="text", contract=SchemaContract.from_dict(schema, "order"),
        prompt_template="Extract the order's amount and code as JSON.\n{document}", model_path="m", model_name="m",
        max_tokens=64, temperature=0.0, max_model_len=1024)
    texts = {"a": "Order QX-11 for a kettle: 12.50 EUR.", "b": "Order ZR-73 for a toaster: 74.25 USD."}
    out = BatchExtractor(engine, spec, 1024)(pa.table({"id": list(texts), "text": list(texts.values())}))
    assert out.column("_kind").to_pylist() == ["row", "row"], out.column("_error").to_pylist()
    for doc_id, record in zip(out.column("id").to_pylist(), records_of(out), strict=True):
        assert record["amount"] in {"a": (11, 12.5), "b": (73, 74.25)}[doc_id], (doc_id, record)
        assert record["code"] in words(texts[doc_id]), (doc_id, record)


def test_auto_grounding_decodes_a_plain_schema_from_each_documents_own_values(engine):
    """`schema_policy.grounding: auto` on the real engine, with a schema nobody marked: each row's number, date
    and name are values its own document writes; the field marked `x-grounded: false` stays free."""
    import pyarrow as pa

    from schemas.contract import SchemaContract
    from schemas.grounding import dates, numbers, spans
    from workers.extractor import BatchExtractor
    from workers.spec import ExtractionSpec

    schema = {"type": "object", "properties": {
        "customer": {"type": "string", "maxLength": 40}, "amount": {"type": "number"},
        "ordered": {"anyOf": [{"type": "string", "format": "date"}, {"type": "null"}]},
        "note": {"type": "string", "maxLength": 12, "x-grounded": False}},
        "required": ["customer", "amount", "ordered", "note"], "additionalProperties": False}
    spec = ExtractionSpec(
        run_id="r", id_column="id", text_column="text", contract=SchemaContract.from_dict(schema, "order"),
        prompt_template="Extract the order as JSON.\n{document}", model_path="m", model_name="m",
        max_tokens=96, temperature=0.0, max_model_len=1024, grounding="auto")
    texts = {"a": "Order from Kestrel Logistics on 2026-03-02: 12 kettles, 412.50 EUR.",
             "b": "Customer: Northwind Traders | Date: May 7, 2026 | Toasters x 3 | 74.25 USD"}
    out = BatchExtractor(engine, spec, 1024)(pa.table({"id": list(texts), "text": list(texts.values())}))
    assert out.column("_kind").to_pylist() == ["row", "row"], out.column("_error").to_pylist()
    for doc_id, record in zip(out.column("id").to_pylist(), records_of(out), strict=True):
        text = texts[doc_id]
        assert record["customer"] in spans(text), (doc_id, record)
        assert record["amount"] in numbers(text), (doc_id, record)
        assert record["ordered"] is None or record["ordered"] in dates(text), (doc_id, record)
        assert isinstance(record["note"], str) and len(record["note"]) <= 12


def test_a_long_documents_text_field_decodes_under_the_substring_grammar(engine):
    """A document whose spans are past the enum's limit: the field is a run of words of one of its sentences,
    under the EBNF the engine sends for the substring grammar (not its schema as written)."""
    import random

    import pyarrow as pa

    from schemas.cells import sentences_of
    from schemas.contract import SchemaContract
    from schemas.grounding import MAX_CANDIDATES, ground, spans
    from schemas.substring import has_substring
    from workers.extractor import BatchExtractor
    from workers.spec import ExtractionSpec

    rng = random.Random(7)
    vocabulary = ["harbor", "ledger", "amber", "signal", "copper", "meadow", "lantern", "quartz", "willow", "falcon",
                  "ember", "cobalt", "orchid", "summit", "tundra", "velvet", "zephyr", "basalt", "cedar", "delta"]
    sentences = [" ".join(rng.choice(vocabulary) for _ in range(14)).capitalize() + "." for _ in range(40)]
    text = "Project codename: Blue Heron.\n" + " ".join(sentences)
    schema = {"type": "object", "properties": {"codename": {"type": "string", "maxLength": 60}},
              "required": ["codename"], "additionalProperties": False}
    assert len(spans(text)) > MAX_CANDIDATES and has_substring(ground(schema, text, mode="auto"))
    spec = ExtractionSpec(
        run_id="r", id_column="id", text_column="text", contract=SchemaContract.from_dict(schema, "project"),
        prompt_template="What is the project's codename? Answer as JSON.\n{document}", model_path="m",
        model_name="m", max_tokens=48, temperature=0.0, max_model_len=1024, grounding="auto")
    out = BatchExtractor(engine, spec, 1024)(pa.table({"id": ["long"], "text": [text]}))
    assert out.column("_kind").to_pylist() == ["row"], out.column("_error").to_pylist()
    value = records_of(out)[0]["codename"]
    assert 1 <= len(value.split()) <= 12 and any(value in sentence for sentence in sentences_of(text)), value


def test_auto_bounds_fit_free_strings_into_a_small_budget_on_the_real_engine(engine):
    """`max_string_length: auto` on the real engine: free strings get the bound that fits the schema's longest
    output into max_tokens, so the output closes instead of running into the limit."""
    import pyarrow as pa

    from schemas.bounds import budget_bounds
    from schemas.contract import SchemaContract
    from workers.extractor import BatchExtractor
    from workers.spec import ExtractionSpec

    schema = {"type": "object", "properties": {"tracking_id": {"type": "string"}, "note": {"type": "string"}},
              "required": ["tracking_id", "note"], "additionalProperties": False}
    max_tokens = 48
    bound = budget_bounds(schema, max_tokens).max_string
    assert bound is not None and bound < 48
    spec = ExtractionSpec(
        run_id="r", id_column="id", text_column="text", contract=SchemaContract.from_dict(schema, "parcel"),
        prompt_template="Write the parcel's tracking id as JSON.\n{document}", model_path="m", model_name="m",
        max_tokens=max_tokens, temperature=0.0, max_model_len=1024, grounding="off",
        grammar_bounds=("auto", "auto"))
    out = BatchExtractor(engine, spec, 1024)(pa.table({"id": ["p"], "text": ["Parcel UPS_M_119018_M, two boxes."]}))
    assert out.column("_kind").to_pylist() == ["row"], out.column("_error").to_pylist()
    record = records_of(out)[0]
    assert all(len(value) <= bound for value in record.values()), (bound, record)
    engine.use_sampling({}, (None, None))  # the module's later tests decode without bounds


def test_both_engines_refuse_a_request_the_same_way(engine):
    """`VllmEngine` (the tools' engine) and `EngineThread` (the actors') drive vLLM through one add/step path: a
    request the backend refuses comes back "refused", alone, from either; the one beside it runs. The direct side is
    the `VllmEngine` the module's thread holds, called from this thread while the engine thread waits for work (no
    call of it is in flight: each `generate` below returns before the next starts), so no second engine starts."""
    prompts = [engine.prompt_token_ids("x")] * 2
    threaded = engine.generate(prompts, [REFUSED, schema_for("delta")], 32, 0.0)
    direct_engine = engine._engine
    assert type(direct_engine).__name__ == "VllmEngine"
    direct = direct_engine.generate(prompts, [REFUSED, schema_for("delta")], 32, 0.0)
    assert direct_engine.warm(REFUSED) > 0  # warming a refused schema does not raise on either engine
    assert [g.finish_reason for g in direct] == [g.finish_reason for g in threaded] == ["refused", "stop"]
    assert direct[0].error == threaded[0].error and direct[0].output_tokens == 0
    assert direct[1].text == threaded[1].text  # greedy, same model and grammar: the same output
    assert engine.warm(REFUSED) > 0
    # the thread serves on after the direct calls
    assert json.loads(engine.generate([engine.prompt_token_ids("on")], schema_for("theta"), 32, 0.0)[0].text)["who"] \
        == "theta"


def test_after_close_a_caller_is_told_rather_than_left_waiting(engine):
    # runs last in this module: it closes the shared engine
    engine.close()
    with pytest.raises(RuntimeError, match="engine thread has stopped"):
        engine.generate([engine.prompt_token_ids("late")], schema_for("eta"), 8, 0.0)


