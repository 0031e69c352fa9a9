"""`RecordLayout.from_json`: the records' columns read from their JSON texts by Arrow's JSON reader when every field
is Arrow-built, the same columns (or the same exception) as `json.loads` and `to_columns` give, on the actors'
texts and on texts the two parsers read differently (NaN, Inf, -0, line breaks, repeated keys...)."""

from __future__ import annotations

import json
import random
import struct
from typing import Any

import pyarrow as pa
import pytest

from schemas.arrow import parse_records, record_layout

FLAT = {"type": "object", "required": ["vendor", "total", "items", "due", "currency"], "properties": {
    "vendor": {"type": "string"}, "total": {"type": "number"}, "items": {"type": "integer"},
    "due": {"type": "string", "format": "date"}, "currency": {"enum": ["EUR", "USD"]}, "paid": {"type": "boolean"},
    "note": {"type": ["string", "null"]}, "ratio": {"anyOf": [{"type": "integer"}, {"type": "number"}]}}}


def python_columns(layout: Any, texts: list[str | None]) -> dict[str, pa.Array]:
    return layout.to_columns(parse_records(texts))


def same(texts: list[str | None], schema: dict[str, Any] = FLAT, arrow: bool = False) -> None:
    """`from_json` gives what Python gives: the same columns, bit for bit, or raises the same exception type.
    `arrow`: and it read them with Arrow's reader, not with Python."""
    layout = record_layout(schema)
    try:
        expected = python_columns(layout, texts)
    except Exception as exc:  # noqa: BLE001  (whatever Python raised, Arrow's path raises too)
        with pytest.raises(type(exc)):
            layout.from_json(pa.array(texts, pa.string()))
        return
    if arrow:
        got = layout._read_json(pa.array(texts, pa.string()))
        assert got is not None
    else:
        got = layout.from_json(pa.array(texts, pa.string()))
    assert list(got) == list(expected)
    for name in expected:
        assert got[name].type == expected[name].type, name
        assert got[name].to_string() == expected[name].to_string(), name
        if pa.types.is_floating(expected[name].type):  # bit for bit: -0.0 is not 0.0
            assert got[name].view(pa.int64()).equals(expected[name].view(pa.int64())), name
        else:
            assert got[name].equals(expected[name]), name


def record(rng: random.Random) -> dict[str, Any]:
    total = rng.choice([rng.random() * 10 ** rng.randint(-30, 30), rng.randint(-2**63, 2**63), -1.5, 0.0, 0,
                        struct.unpack("d", struct.pack("Q", rng.getrandbits(62)))[0], 1e308, 5e-324, 2**70])
    return {"vendor": rng.choice(["a", "é\u00a0\u2028日本", "q\"\\/\b\f\t", "\U0001F600", "x" * 300]),
            "total": total, "items": rng.randint(-2**63, 2**63 - 1),
            "due": f"20{rng.randint(10, 99)}-0{rng.randint(1, 9)}-1{rng.randint(0, 9)}",
            "currency": rng.choice(["EUR", "USD"]), "paid": rng.choice([True, False, None]),
            **({"note": None} if rng.random() < 0.3 else {}), "extra": {"nested": [1, {"k": "v"}]},
            "ratio": rng.choice([1, 2.5, None])}


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("ascii_only", [False, True])
def test_actors_texts_give_python_s_columns(seed: int, ascii_only: bool) -> None:
    rng = random.Random(seed)
    records = [record(rng) for _ in range(300)]
    same([json.dumps(r, ensure_ascii=ascii_only, separators=rng.choice([(",", ":"), (", ", ": ")])) for r in records],
         arrow=True)


def test_the_arrow_path_is_taken_for_plain_texts(monkeypatch) -> None:
    """(so that the tests above compare Arrow's reader with Python, not Python with itself)"""
    layout = record_layout(FLAT)
    monkeypatch.setattr("schemas.arrow.parse_records", lambda texts: pytest.fail("parsed in Python"))
    columns = layout.from_json(pa.array([ok('"total":1.5')]))
    assert columns["due"].to_pylist()[0].isoformat() == "2026-01-02"


OK = '"vendor":"a","items":1,"due":"2026-01-02","currency":"EUR"'


def ok(rest: str) -> str:
    """A record of `OK`'s fields and `rest`."""
    return "{" + OK + "," + rest + "}"


@pytest.mark.parametrize("odd", [
    ok('"total":NaN'), ok('"total":Infinity'), ok('"total":-Infinity'), ok('"total":-NaN'), ok('"total":Inf'),
    ok('"total":-0'), ok('"total":-0.0'), ok('"total":1e400'), ok('"total":true'), ok('"total":"1.5"'),
    ok('"total":1,"total":2'), ok('"total":1') + "\n", ok('"total":1') + ok('"total":2'), "", "   ", "[1]", "5",
    "null", ok('"total":1') + " junk", ok('"total":1,'), "\ufeff" + ok('"total":1'), ok('"total":1') + "\r",
    ok('"total":1,\r"paid":true'), ok('"total":1,\n"paid":true'), ok('"total":1') + "\n" + ok('"total":2'),
    ok('"total":1') + "\n   ", ok('"total":1') + "\n\n",
    '{"vendor":"a","items":1.0,"due":"2026-01-02","currency":"EUR","total":1}',
    '{"vendor":"a","items":2e3,"due":"2026-01-02","currency":"EUR","total":1}',
    '{"vendor":"a","items":99999999999999999999,"due":"2026-01-02","currency":"EUR","total":1}',
    '{"vendor":5,"items":1,"due":"2026-01-02","currency":"EUR","total":1}',
    '{"vendor":"a","items":1,"due":"20260102","currency":"EUR","total":1}',
    '{"vendor":"a","items":1,"due":"2026-02-30","currency":"EUR","total":1}',
    '{"vendor":"a","items":1,"due":20260102,"currency":"EUR","total":1}',
    '{"vendor":"a","items":1,"due":null,"currency":"EUR","total":1}',
    '{"vendor":"\\ud800","items":1,"due":"2026-01-02","currency":"EUR","total":1}',
    '{"\\u0076endor":"a","items":1,"due":"2026-01-02","currency":"EUR","total":1,"paid":1}',
    ok('"total":1,"paid":"true"'), ok('"total":1,"note":{"a":1}'), "{}", '{"vendor":"a\tb"}', None,
])
def test_texts_the_parsers_read_differently_give_python_s_answer(odd: str | None) -> None:
    good = ok('"total":2.5')
    same([good, odd, good])
    same([odd])
    same([good, good], arrow=True)


def test_a_layout_with_a_field_arrow_does_not_build_reads_in_python() -> None:
    schema = {**FLAT, "properties": {**FLAT["properties"], "at": {"type": "string", "format": "date-time"}}}
    same([ok('"total":2.5,"at":"2026-01-02T03:04:05Z"')], schema)


def test_no_texts() -> None:
    assert all(len(c) == 0 for c in record_layout(FLAT).from_json(pa.array([], pa.string())).values())
