"""The sample contract: an invoice summary, with validators that check it against itself and its document.

Every field says what it is (the model is shown the descriptions), every string and list is bounded (a
run-on value cannot reach max_tokens), and every field a document may lack is nullable: the model has an
honest way to say "not stated" instead of inventing a value. What the document must contain is checked
against it: the invoice number, the vendor's name, the dates (as the document writes them, in a
plausible year range) and the total. A value not found there makes the output a `semantic_invalid`
dead letter instead of a row that looks right. Those values are also grounded (`x-grounded`,
schemas/grounding.py): the grammar offers, per document, only values that document writes, so the model
cannot invent one; the validators stay, for outputs decoded without grounding.
"""

from __future__ import annotations

import re
from datetime import date
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

from schemas.invoice_examples import EXAMPLES
from schemas.registry import register

# Grounded fields (schemas.grounding): the grammar offers only values this document writes.
TEXT, CELL, DATE, WORD, NUMBER = ({"x-grounded": kind} for kind in ("text", "cell", "date", "word", "number"))
AMOUNT = re.compile(r"\d[\d,]*(?:\.\d+)?")
YEARS = (1990, 2100)  # a plausible invoice date; 0477-04-20 or 9000-09-01 are generation artefacts
# The ways a document may write a date, as strftime formats (day and month with and without a leading 0).
DATE_FORMATS = ("%Y-%m-%d", "%B %d, %Y", "%b %d, %Y", "%d %B %Y", "%d %b %Y", "%d.%m.%Y", "%d/%m/%Y", "%m/%d/%Y",
                "%B %-d, %Y", "%b %-d, %Y", "%-d %B %Y", "%-d %b %Y", "%-d.%-m.%Y", "%-d/%-m/%Y", "%-m/%-d/%Y")


def _written_in(value: str, text: str) -> bool:
    """`value` stands in `text` as a whole word (not inside a longer code or number), case-insensitively. The
    look-behind is made after the value's first character (`(?<![\\w-])v` is `v(?<![\\w-].)`), so that `re` looks
    for the value's first characters before trying it: a document of 20,000 characters is read 15 times a date."""
    stripped = value.strip()
    if not stripped:
        return re.search(r"(?<![\w-])(?![\w-])", text, flags=re.IGNORECASE) is not None
    pattern = re.escape(stripped[0]) + r"(?<![\w-](?s:.))" + re.escape(stripped[1:]) + r"(?![\w-])"
    return re.search(pattern, text, flags=re.IGNORECASE) is not None


def _amounts(text: str) -> set[float]:
    """Every number written in the text, thousands separators removed."""
    return {float(m.replace(",", "")) for m in AMOUNT.findall(text)}


def _date_written_in(value: date, text: str) -> bool:
    return any(_written_in(value.strftime(fmt), text) for fmt in DATE_FORMATS)


def _document(info: ValidationInfo) -> str | None:
    return (info.context or {}).get("document")


def _check_date(value: date | None, info: ValidationInfo) -> date | None:
    if value is None:
        return None
    if not YEARS[0] <= value.year <= YEARS[1]:
        raise ValueError(f"{info.field_name} {value} is outside the plausible years {YEARS[0]}-{YEARS[1]}")
    document = _document(info)
    if document is not None and not _date_written_in(value, document):
        raise ValueError(f"{info.field_name} {value} is not a date the document writes")
    return value


class Party(BaseModel):
    name: str | None = Field(max_length=120, description="the company's name exactly as written; null if not stated",
                             json_schema_extra=TEXT)
    address: str | None = Field(default=None, max_length=200, description="its postal address as written, or null",
                                json_schema_extra=TEXT)

    @field_validator("name")
    @classmethod
    def name_appears_in_document(cls, value: str | None, info: ValidationInfo) -> str | None:
        document = _document(info)
        if value is not None and document is not None and not _written_in(value, document):
            raise ValueError("vendor name does not appear in the document")
        return value


@register("invoice", "1")
class Invoice(BaseModel):
    # Three {document, output} pairs: shown to the model as earlier chat turns (few-shot), checked before a job.
    model_config = ConfigDict(json_schema_extra={"examples": EXAMPLES})

    invoice_number: str | None = Field(
        max_length=40, description="the invoice's own number or code as printed (not a name or a date); null if none",
        json_schema_extra=WORD)
    vendor: Party = Field(description="who issued the invoice (usually named at the top)")
    customer: str | None = Field(default=None, max_length=120, description="who is billed ('Bill to'), or null",
                                 json_schema_extra=TEXT)
    issue_date: date | None = Field(description="the date of issue, as YYYY-MM-DD; null if not stated",
                                    json_schema_extra=DATE)
    due_date: date | None = Field(default=None, description="the payment due date, as YYYY-MM-DD; null if not stated",
                                  json_schema_extra=DATE)
    currency: Literal["USD", "EUR", "GBP", "CHF", "JPY", "CAD", "AUD"] | None = Field(
        description="ISO code of the invoice's currency; null if not stated", json_schema_extra=WORD)
    items: list[Annotated[str, Field(max_length=80, json_schema_extra=CELL)]] = Field(
        default_factory=list, max_length=6, description="each line item's description, in table order")
    total: float | None = Field(ge=0, description="the total due (the last, largest amount), a plain number; "
                                "null if not stated", json_schema_extra=NUMBER)

    @field_validator("invoice_number")
    @classmethod
    def number_appears_in_document(cls, value: str | None, info: ValidationInfo) -> str | None:
        document = _document(info)
        if value is not None and document is not None and not _written_in(value, document):
            raise ValueError("invoice_number does not appear in the document")
        return value

    @field_validator("issue_date", "due_date")
    @classmethod
    def date_appears_in_document(cls, value: date | None, info: ValidationInfo) -> date | None:
        return _check_date(value, info)

    @field_validator("total")
    @classmethod
    def total_appears_in_document(cls, value: float | None, info: ValidationInfo) -> float | None:
        document = _document(info)
        if value is not None and document is not None and not any(abs(value - a) < 0.005 for a in _amounts(document)):
            raise ValueError(f"total {value} does not appear in the document")
        return value

    @model_validator(mode="after")
    def dates_in_order(self) -> Invoice:
        if self.due_date is not None and self.issue_date is not None and self.due_date < self.issue_date:
            raise ValueError(f"due_date {self.due_date} is before issue_date {self.issue_date}")
        return self
