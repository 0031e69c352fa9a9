"""Long documents in windows (workers.windows, workers.windowed, the extractor): where windows fall, that each
fits, that they overlap, and that a document's windows make one outcome whatever a window does."""

import json

import pyarrow as pa
import pytest

from schemas.contract import SchemaContract
from workers.engine import Generation
from workers.engine.contract import Engine
from workers.extractor import BatchExtractor
from workers.spec import ExtractionSpec
from workers.windows import Splitter, TooManyWindows, WindowPolicy, paragraphs, sentences, window_policy

PARAGRAPH = "The parties agree to keep the information secret. Each party shall protect it with care."


def by_words(text: str) -> int:
    return len(text.split())


def split(text, budget, overlap=0.0, max_windows=64):
    return Splitter(text, budget, WindowPolicy(overlap=overlap, max_windows=max_windows), by_words,
                    lambda a, b: by_words(text[a:b]) <= budget).windows()


def test_paragraphs_and_sentences_cover_the_text_contiguously():
    text = "First one. Second one.\n\n  Next paragraph here.\n\n\nLast."
    spans = paragraphs(text)
    assert spans[0][0] == 0 and spans[-1][1] == len(text)
    assert all(a[1] == b[0] for a, b in zip(spans, spans[1:], strict=False)) and len(spans) == 3
    cut = sentences(text, 0, spans[0][1])
    assert [text[a:b].strip() for a, b in cut] == ["First one.", "Second one."]
    assert cut[0][0] == 0 and cut[-1][1] == spans[0][1]


def test_a_sentence_splitter_keeps_abbreviations_whole():
    text = "Acme Inc. and Mr. Smith signed on Jan. 5. The term is two years."
    assert [text[a:b].strip() for a, b in sentences(text, 0, len(text))] == [
        "Acme Inc. and Mr. Smith signed on Jan. 5.", "The term is two years."]


def test_windows_fit_end_at_paragraphs_and_cover_the_document():
    text = "\n\n".join(f"{i}. {PARAGRAPH}" for i in range(20))  # 16 words a paragraph
    windows = split(text, 50)
    assert all(by_words(text[w.start:w.end]) <= 50 for w in windows)
    assert windows[0].start == 0 and windows[-1].end == len(text)
    assert all(text[w.end - 2:w.end] == "\n\n" for w in windows[:-1])  # each ends at a paragraph's end
    assert [w.index for w in windows] == list(range(len(windows)))


def test_a_paragraph_longer_than_a_window_is_cut_at_sentences():
    text = " ".join([PARAGRAPH] * 10)  # one paragraph of 160 words, 20 sentences of 8
    windows = split(text, 40)
    assert len(windows) >= 4 and all(by_words(text[w.start:w.end]) <= 40 for w in windows)
    assert all(text[w.start:w.end].rstrip().endswith(".") for w in windows)


def test_neighbouring_windows_overlap_by_about_the_share_asked():
    text = "\n\n".join(f"{i}. {PARAGRAPH}" for i in range(20))
    plain, overlapping = split(text, 64), split(text, 64, overlap=0.3)
    assert all(a.end <= b.start for a, b in zip(plain, plain[1:], strict=False))
    shared = [by_words(text[b.start:a.end]) for a, b in zip(overlapping, overlapping[1:], strict=False)]
    assert all(0 < n <= 0.3 * 64 for n in shared)


def test_past_max_windows_the_document_is_too_long():
    text = "\n\n".join([PARAGRAPH] * 40)
    with pytest.raises(TooManyWindows, match="max_windows 3"):
        split(text, 40, max_windows=3)


def test_window_policy_reads_the_input_keys():
    class Input:
        window_tokens, window_overlap, max_windows = "auto", 0.2, 9

    assert window_policy(Input()) == WindowPolicy(None, 0.2, 9)


# -- through the extractor -------------------------------------------------------------------------------------


class WindowEngine(Engine):
    """Tokenizes by whitespace; answers each window with the facts its text writes; `fail_on` ends the request of
    a window holding that word with an engine error (vLLM's finish_reason "error")."""

    max_chars_per_token = 20

    def __init__(self, fail_on: str | None = None) -> None:
        self.fail_on = fail_on
        self.calls: list[int] = []
        self.texts: dict[int, str] = {}

    def prompt_token_ids(self, prompt) -> list[int]:
        text = prompt if isinstance(prompt, str) else prompt.messages[-1]["content"]
        key = len(self.texts) + 1
        self.texts[key] = text
        return [key] + [0] * max(0, len(text.split()) - 1)

    def warm(self, json_schema) -> float:
        return 0.0

    def generate(self, prompts, json_schemas, max_tokens, temperature):
        self.calls.append(len(prompts))
        return [self.answer(self.texts[p[0]], len(p)) for p in prompts]

    def answer(self, text: str, tokens: int) -> Generation:
        if self.fail_on and self.fail_on in text:
            return Generation("", "error", tokens, 3, error="boom")
        record = {"effective_date": "2020-03-04" if "2020-03-04" in text else None,
                  "jurisdiction": "Ohio" if "Ohio" in text else None,
                  "parties": [p for p in ("Acme Inc.", "Beta LLC") if p in text], "term_years": None}
        return Generation(json.dumps(record), "stop", tokens, 20)


def nda_spec(long_documents="windows") -> ExtractionSpec:
    contract = SchemaContract.from_model_ref("jobs.contracts.nda:NDA")
    return ExtractionSpec(run_id="r", id_column="id", text_column="text", prompt_template="{document}",
                          contract=contract, model_path="m", model_name="m", max_tokens=20, temperature=0.0,
                          max_model_len=120, constrained=False, long_documents=long_documents,
                          windows=WindowPolicy(overlap=0.1))


def long_nda(fail_word: str = "") -> str:
    filler = "\n\n".join(f"Clause {i}. {PARAGRAPH} {fail_word if i == 12 else ''}" for i in range(20))
    return (f"Made on 2020-03-04 by Acme Inc. and Beta LLC.\n\n{filler}\n\nGoverned by the laws of Ohio.\n\n"
            "Signed: Acme Inc.")


def table(texts):
    return pa.table({"id": pa.array(range(len(texts)), pa.int64()), "text": pa.array(texts, pa.string())})


def test_a_long_document_is_one_row_merged_from_its_windows():
    engine = WindowEngine()
    text = long_nda()
    out = BatchExtractor(engine, nda_spec(), 120)(table(["short: Acme Inc. 2020-03-04", text]))
    rows = out.to_pylist()
    assert [r["_kind"] for r in rows] == ["row", "row"] and [r["_windows"] for r in rows][0] == 1
    windows = rows[1]["_windows"]
    assert windows > 3 and engine.calls == [1 + windows]  # the document's windows go to the engine together
    record = rows[1]["_typed"]  # typed on the actor (workers.outcome.typed_column)
    assert str(record["effective_date"]) == "2020-03-04" and record["jurisdiction"] == "Ohio"
    assert record["parties"] == ["Acme Inc.", "Beta LLC", "Acme Inc."]  # named again at the end: kept
    which = dict(rows[1]["_window_of"])
    assert which["jurisdiction"] == windows - 1 and which["effective_date"] == 0
    for path, places in rows[1]["_spans"]:  # offsets into the whole document
        value = str(record[path]) if "[" not in path else record["parties"][int(path[8:-1])]
        assert all(text[p["start"]:p["end"]] == value for p in places)
    assert len(json.loads(rows[1]["_raw_output"])) == windows  # every window's output is kept


def test_a_windows_engine_error_fails_its_document_not_its_batch():
    out = BatchExtractor(WindowEngine(fail_on="POISON"), nda_spec(), 120)(table([long_nda("POISON"), long_nda()]))
    rows = out.to_pylist()
    assert [(r["_kind"], r["_reason"]) for r in rows] == [("dead_letter", "engine_error"), ("row", None)]
    error = json.loads(rows[0]["_error"])
    assert error["windows"] == rows[0]["_windows"] and "window" in error["message"]
    assert len(json.loads(rows[0]["_raw_output"])) == rows[0]["_windows"]


def test_long_documents_dead_letter_refuses_as_before():
    out = BatchExtractor(WindowEngine(), nda_spec("dead_letter"), 120)(table([long_nda()]))
    assert out.column("_reason").to_pylist() == ["input_too_long"]


def test_a_document_past_max_windows_is_refused_before_tokenizing():
    engine = WindowEngine()
    huge = "word " * (64 * 120 * 20 // 5 + 10)  # past max_windows × max_model_len × the longest token
    out = BatchExtractor(engine, nda_spec(), 120)(table([huge]))
    assert out.column("_reason").to_pylist() == ["input_too_long"] and engine.texts == {}


def test_a_merged_record_that_fails_the_schema_is_a_dead_letter_holding_every_windows_output():
    schema = {"type": "object", "properties": {
        "effective_date": {"type": ["string", "null"]}, "jurisdiction": {"type": ["string", "null"]},
        "parties": {"type": "array", "items": {"type": "string"}, "maxItems": 2},
        "term_years": {"type": ["integer", "null"]}}, "required": ["parties"]}
    contract = SchemaContract.from_dict(schema, default_name="nda", source="test")
    spec = nda_spec()
    spec = ExtractionSpec(**{**spec.__dict__, "contract": contract})
    out = BatchExtractor(WindowEngine(), spec, 120)(table([long_nda()])).to_pylist()[0]
    assert (out["_kind"], out["_reason"]) == ("dead_letter", "schema_violation")  # three parties merged, two allowed
    error, windows = json.loads(out["_error"]), json.loads(out["_raw_output"])
    assert error["merged_record"]["parties"] == ["Acme Inc.", "Beta LLC", "Acme Inc."]
    assert len(windows) == error["windows"] == out["_windows"] and all(w["reason"] is None for w in windows)
    assert [json.loads(w["output"])["jurisdiction"] for w in windows][-1] == "Ohio"


def test_the_model_limit_is_read_from_its_config(tmp_path):
    from workers.model_limit import FALLBACK, limit_of, model_limit

    (tmp_path / "config.json").write_text(json.dumps({"max_position_embeddings": 8192}))
    assert model_limit(str(tmp_path)) == (8192, "the model's config")
    assert limit_of({"text_config": {"max_position_embeddings": 32768}}) == 32768
    assert limit_of({"vocab_size": 5}) is None
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "config.json").write_text("{}")
    limit, source = model_limit(str(tmp_path / "empty"))
    assert limit == FALLBACK and "states no context length" in source
    assert model_limit("simulated")[0] == FALLBACK


def test_max_model_len_auto_is_resolved_when_the_job_is_loaded(tmp_path):
    import yaml

    from pipeline.config import load_config

    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({"max_position_embeddings": 2048}))
    (tmp_path / "extract.yaml").write_text(yaml.safe_dump({
        "name": "j", "input": {"uri": "d.parquet"}, "schema": "jobs.contracts.nda:NDA", "prompt": "{document}",
        "output": {"uri": "out"}, "model": {"path": str(model)}}))
    loaded = load_config(tmp_path / "extract.yaml")
    assert loaded.config.model.max_model_len == 2048 and loaded.max_model_len_source == "the model's config"
    assert loaded.config.input.long_documents == "windows"
    fixed = load_config(tmp_path / "extract.yaml", {"model.max_model_len": 1024})
    assert fixed.config.model.max_model_len == 1024 and fixed.output_hash != loaded.output_hash



def test_a_set_window_size_windows_a_document_that_fits_and_auto_leaves_it_whole():
    text = "Made on 2020-03-04 by Acme Inc.\n\n" + "\n\n".join(f"Clause {i}. {PARAGRAPH}" for i in range(4))
    whole = BatchExtractor(WindowEngine(), nda_spec(), 400)(table([text])).to_pylist()[0]
    assert whole["_windows"] == 1 and whole["_window_of"] is None
    small = ExtractionSpec(**{**nda_spec().__dict__, "windows": WindowPolicy(window_tokens=30)})
    cut = BatchExtractor(WindowEngine(), small, 400)(table([text])).to_pylist()[0]
    assert cut["_kind"] == "row" and cut["_windows"] > 1
    assert str(cut["_typed"]["effective_date"]) == "2020-03-04"


def test_validate_says_which_window_it_will_use(tmp_path):
    import yaml

    from pipeline.cli.validate import window_line
    from pipeline.config import load_config

    (tmp_path / "extract.yaml").write_text(yaml.safe_dump({
        "name": "j", "input": {"uri": "d.parquet", "window_tokens": 1024}, "schema": "jobs.contracts.nda:NDA",
        "prompt": "{document}", "output": {"uri": "out"},
        "model": {"path": "simulated", "simulated": {"allow": True}}}))
    line = window_line(load_config(tmp_path / "extract.yaml"))
    assert "max_model_len 4096 (the simulated engine" in line and "windows of up to 1024 document tokens" in line
    refusing = window_line(load_config(tmp_path / "extract.yaml", {"input.long_documents": "dead_letter",
                                                                    "model.max_model_len": 2048}))
    assert "max_model_len 2048 (model.max_model_len)" in refusing and "input_too_long" in refusing


def test_a_piece_the_document_writes_again_is_counted_once_and_the_windows_do_not_change():
    """A repeated paragraph (a footer, a table's header line, a clause written again) is counted once per document:
    the same windows as a splitter that counts every piece."""
    footer = "Acme Corp, 1 Main St. Page footer written on every page."
    text = "\n\n".join(f"{PARAGRAPH} Item {i}.\n\n{footer}" for i in range(12)) + "\n\n" + " ".join([PARAGRAPH] * 6)
    counted: list[str] = []

    def count(piece: str) -> int:
        counted.append(piece)
        return by_words(piece)

    class EveryPiece(Splitter):  # counts each piece every time it meets it
        def tokens(self, start: int, end: int) -> int:
            return self.count(self.text[start:end])

    policy = WindowPolicy(overlap=0.1)
    fits = lambda a, b: by_words(text[a:b]) <= 40  # noqa: E731
    windows = Splitter(text, 40, policy, count, fits).windows()
    assert len(counted) == len(set(counted))  # each distinct piece once
    assert sum(p.startswith(footer[:10]) for p in counted) == 1  # the footer's paragraph once, not 12 times
    assert windows == EveryPiece(text, 40, policy, by_words, fits).windows() and len(windows) > 5
