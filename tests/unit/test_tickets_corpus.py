"""The support-ticket corpus (jobs/tickets): the generator re-makes the committed files exactly, and its gold is
honest: every record fits the job's plain SupportTicket schema, and every value a model must copy is written in
its ticket."""

from __future__ import annotations

import importlib.util
import json
import re
from datetime import date
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from schemas.registry import import_model

ROOT = Path(__file__).resolve().parents[2]
TICKETS = ROOT / "jobs" / "tickets"
# Usual ways of writing a date (day and month with and without a leading zero).
DATE_FORMATS = ("%Y-%m-%d", "%B %d, %Y", "%b %d, %Y", "%d %B %Y", "%d %b %Y", "%d.%m.%Y", "%d/%m/%Y", "%m/%d/%Y",
                "%B %-d, %Y", "%b %-d, %Y", "%-d %B %Y", "%-d %b %Y", "%-d/%-m/%Y", "%-m/%-d/%Y")
COPIED = ("customer_name", "customer_email", "order_number", "product")


def _generator():
    spec = importlib.util.spec_from_file_location("make_tickets", TICKETS / "make_tickets.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _gold(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@pytest.fixture(scope="module")
def corpus() -> list[tuple[str, dict]]:
    table = pq.read_table(TICKETS / "tickets.parquet")
    texts = dict(zip(table.column("ticket_id").to_pylist(), table.column("text").to_pylist(), strict=True))
    return [(texts[entry["ticket_id"]], entry["record"]) for entry in _gold(TICKETS / "tickets_gold.jsonl")]


def test_generator_is_deterministic_and_matches_the_committed_files(tmp_path):
    _generator().write_corpus(tmp_path)
    assert (tmp_path / "tickets_gold.jsonl").read_bytes() == (TICKETS / "tickets_gold.jsonl").read_bytes()
    assert pq.read_table(tmp_path / "tickets.parquet").equals(pq.read_table(TICKETS / "tickets.parquet"))


def test_corpus_shape(corpus):
    table = pq.read_table(TICKETS / "tickets.parquet")
    assert table.column_names == ["ticket_id", "text"]
    assert len(corpus) == table.num_rows == 40
    words = [len(text.split()) for text, _ in corpus]
    assert sum(300 <= n <= 600 for n in words) == 4
    categories = {record["issue_category"] for _, record in corpus}
    assert len(categories) == 7  # every category is asked for
    for field in ("customer_name", "order_number", "product", "order_date", "amount"):  # gold has nulls
        assert any(record[field] is None for _, record in corpus), field


def test_gold_validates_against_the_schema(corpus):
    model = import_model("ticket:SupportTicket", TICKETS)
    for _, record in corpus:
        assert model.model_validate(record).model_dump(mode="json") == record


def test_gold_strings_are_written_in_their_ticket(corpus):
    for text, record in corpus:
        for field in COPIED:
            if record[field] is not None:
                assert record[field] in text, (field, record[field])


def test_gold_dates_and_amounts_are_written_in_their_ticket(corpus):
    for text, record in corpus:
        if record["order_date"] is not None:
            day = date.fromisoformat(record["order_date"])
            assert any(re.search(rf"(?<![\w/.-]){re.escape(day.strftime(f))}(?![\w/-])", text)
                       for f in DATE_FORMATS), (record["order_date"], text)
        if record["amount"] is not None:
            assert f"{record['amount']:,.2f}" in text, (record["amount"], text)
