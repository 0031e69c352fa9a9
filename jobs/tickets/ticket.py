"""A customer support ticket, written the way a user would write a first schema: plain fields with
descriptions, no grounding marks, no examples, no validators that look at the document."""

from __future__ import annotations

from datetime import date
from typing import Literal

from pydantic import BaseModel, Field

from schemas.registry import register


@register("support_ticket", "1")
class SupportTicket(BaseModel):
    customer_name: str | None = Field(description="the customer's full name; null if the message does not give it")
    customer_email: str | None = Field(description="the customer's email address; null if not given")
    order_number: str | None = Field(description="the order number the ticket is about; null if none")
    product: str | None = Field(description="the name of the product the ticket is about; null if not named")
    issue_category: Literal["damaged", "wrong_item", "not_delivered", "defective", "billing", "account", "other"] = (
        Field(description="what the problem is: damaged in transit, wrong item sent, not delivered, defective "
                          "product, a billing or payment problem, a problem with the customer's account, or other"))
    order_date: date | None = Field(description="the date the order was placed; null if not stated")
    amount: float | None = Field(description="the price the customer paid, as a number; null if not stated")
    refund_requested: bool = Field(description="true if the customer asks for their money back")
