"""The sample contract: an invoice summary, with validators that check it against itself and its document."""

from __future__ import annotations

import re
from datetime import date
from typing import Literal

from pydantic import BaseModel, Field, ValidationInfo, field_validator, model_validator

from schemas.registry import register

AMOUNT = re.compile(r"\d[\d,]*(?:\.\d+)?")


def _written_in(value: str, text: str) -> bool:
    """`value` stands in `text` as a whole word (not inside a longer code or number), case-insensitively."""
    pattern = r"(?<![\w-])" + re.escape(value.strip()) + r"(?![\w-])"
    return re.search(pattern, text, flags=re.IGNORECASE) is not None


def _amounts(text: str) -> set[float]:
    """Every number written in the text, thousands separators removed."""
    return {float(m.replace(",", "")) for m in AMOUNT.findall(text)}


def _document(info: ValidationInfo) -> str | None:
    return (info.context or {}).get("document")


class Party(BaseModel):
    name: str = Field(min_length=1, max_length=120)
    address: str | None = Field(default=None, max_length=200)


@register("invoice", "1")
class Invoice(BaseModel):
    invoice_number: str = Field(min_length=1, max_length=40)
    vendor: Party
    customer: str | None = Field(default=None, max_length=120)
    issue_date: date
    due_date: date | None = None
    currency: Literal["USD", "EUR", "GBP", "CHF", "JPY", "CAD", "AUD"]
    items: list[str] = Field(default_factory=list, max_length=6, description="line item descriptions")
    total: float = Field(ge=0)

    @field_validator("invoice_number")
    @classmethod
    def number_appears_in_document(cls, value: str, info: ValidationInfo) -> str:
        document = _document(info)
        if document is not None and not _written_in(value, document):
            raise ValueError("invoice_number does not appear in the document")
        return value

    @field_validator("total")
    @classmethod
    def total_appears_in_document(cls, value: float, info: ValidationInfo) -> float:
        document = _document(info)
        if document is not None and not any(abs(value - amount) < 0.005 for amount in _amounts(document)):
            raise ValueError(f"total {value} does not appear in the document")
        return value

    @model_validator(mode="after")
    def dates_in_order(self) -> Invoice:
        if self.due_date is not None and self.due_date < self.issue_date:
            raise ValueError(f"due_date {self.due_date} is before issue_date {self.issue_date}")
        return self
