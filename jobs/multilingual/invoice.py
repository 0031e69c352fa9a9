"""An invoice or receipt in any language, written the way a user would write a first schema: eight plain fields
with descriptions, no grounding marks, no examples, and the checks an accountant would make."""

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

    @model_validator(mode="after")
    def consistent(self) -> MultilingualInvoice:
        if self.due_date is not None and self.due_date < self.issue_date:
            raise ValueError("the due date is before the issue date")
        if self.net is not None and self.vat is not None and abs(self.net + self.vat - self.total) > 0.02:
            raise ValueError("net plus tax is not the total")
        return self
