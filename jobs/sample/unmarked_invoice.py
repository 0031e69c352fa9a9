"""The sample Invoice with every `x-grounded` mark removed: the schema as a user would write it.

Its fields, validators and examples are the sample's; only the JSON Schema loses its marks, so what grounds
its fields is `schema_policy.grounding: auto` (the default), not hand-tuning. Measure it against the marked
schema with `extract eval jobs/extract.yaml --gold jobs/sample/invoices_gold.jsonl
--set schema=sample.unmarked_invoice:UnmarkedInvoice` (docs/quality.md).
"""

from __future__ import annotations

from typing import Any

from schemas.grounding import KEY
from schemas.invoice import Invoice
from schemas.limits import iter_subschemas
from schemas.registry import register


def without_marks(json_schema: dict[str, Any]) -> dict[str, Any]:
    """`json_schema` with every `x-grounded` key taken out (in place; returned)."""
    for _, node in iter_subschemas(json_schema):
        node.pop(KEY, None)
    return json_schema


@register("invoice_unmarked", "1")
class UnmarkedInvoice(Invoice):
    @classmethod
    def model_json_schema(cls, *args: Any, **kwargs: Any) -> dict[str, Any]:
        return without_marks(super().model_json_schema(*args, **kwargs))
