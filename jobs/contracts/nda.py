"""A non-disclosure agreement's key facts, as a new user would write the model: four plain fields."""

from __future__ import annotations

from datetime import date

from pydantic import BaseModel, Field

from schemas.registry import register


@register("nda", "1")
class NDA(BaseModel):
    effective_date: date | None = Field(description="the date the agreement takes effect; null if not stated")
    jurisdiction: str | None = Field(description="the state or country whose law governs the agreement")
    parties: list[str] = Field(description="the names of the companies or people that sign the agreement")
    term_years: int | None = Field(description="how many years the agreement lasts; null if not stated")
