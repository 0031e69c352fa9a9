"""The sample contract: an invoice, with validators that check it against itself and its document."""

from __future__ import annotations

import re
from datetime import date
from typing import Literal

from pydantic import BaseModel, Field, ValidationInfo, field_validator, model_validator

from schemas.registry import register

TOLERANCE = 0.011


def _squash(text: str) -> str:
    return re.sub(r"\s+", "", text).lower()


class LineItem(BaseModel):
    description: str = Field(min_length=1, max_length=200)
    quantity: float = Field(gt=0)
    unit_price: float = Field(ge=0)
    amount: float = Field(ge=0)

    @model_validator(mode="after")
    def amount_is_quantity_times_price(self) -> LineItem:
        expected = round(self.quantity * self.unit_price, 2)
        if abs(expected - self.amount) > TOLERANCE:
            raise ValueError(f"amount {self.amount} != quantity {self.quantity} x unit_price {self.unit_price}")
        return self


@register("invoice", "1")
class Invoice(BaseModel):
    invoice_number: str = Field(min_length=1, max_length=40)
    vendor: str = Field(min_length=1, max_length=120)
    customer: str | None = Field(default=None, max_length=120)
    issue_date: date
    due_date: date | None = None
    currency: Literal["USD", "EUR", "GBP", "CHF", "JPY", "CAD", "AUD"]
    line_items: list[LineItem] = Field(max_length=20)
    subtotal: float = Field(ge=0)
    tax: float = Field(default=0.0, ge=0)
    total: float = Field(ge=0)

    @field_validator("invoice_number")
    @classmethod
    def number_appears_in_document(cls, value: str, info: ValidationInfo) -> str:
        document = (info.context or {}).get("document")
        if document is not None and _squash(value) not in _squash(document):
            raise ValueError("invoice_number does not appear in the document")
        return value

    @model_validator(mode="after")
    def totals_add_up(self) -> Invoice:
        if self.due_date is not None and self.due_date < self.issue_date:
            raise ValueError(f"due_date {self.due_date} is before issue_date {self.issue_date}")
        if abs(self.subtotal + self.tax - self.total) > TOLERANCE:
            raise ValueError(f"subtotal {self.subtotal} + tax {self.tax} != total {self.total}")
        items_sum = round(sum(item.amount for item in self.line_items), 2)
        if self.line_items and abs(items_sum - self.subtotal) > TOLERANCE:
            raise ValueError(f"line items sum to {items_sum}, not the subtotal {self.subtotal}")
        return self
