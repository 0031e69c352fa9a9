"""An invoice or receipt in any language, written the way a user would write a first schema: eight plain fields
with descriptions, no grounding marks, no examples, and checks of each value's form (and the dates' order)."""

from __future__ import annotations

from datetime import date

from pydantic import BaseModel, Field, model_validator

from schemas.registry import register


@register("multilingual_invoice", "1")
class MultilingualInvoice(BaseModel):
    vendor: str = Field(min_length=1, description="the name of the business that issued the document")
    invoice_number: str | None = Field(description="the invoice or receipt number as printed; null if none")
    issue_date: date = Field(description="the date the document was issued")
    due_date: date | None = Field(description="the date payment is due; null if the document gives none")
    currency: str = Field(pattern=r"^[A-Z]{3}$", description="the currency as an ISO 4217 code (EUR, CHF, BRL, ...)")
    net: float | None = Field(description="the amount before tax; null if not stated")
    vat: float | None = Field(description="the tax amount (VAT, MwSt., TVA, IVA, BTW, ICMS); null if not stated")
    total: float = Field(gt=0, description="the total amount to pay, tax included")

    # No check that net + vat equals the total: on the first 17 documents under today's finders it dead-lettered
    # 15 rows (semantic_invalid), the amounts grounding forced never adding up, so F1 measured the check rather
    # than the values (the job measures grounding's reach and the values the rows hold).
    @model_validator(mode="after")
    def consistent(self) -> MultilingualInvoice:
        if self.due_date is not None and self.due_date < self.issue_date:
            raise ValueError("the due date is before the issue date")
        return self
