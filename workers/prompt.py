"""Prompt templates: `{document}` and `{schema}` are replaced literally, in one pass; other braces stay."""

from __future__ import annotations

import re

PLACEHOLDER = re.compile(r"\{(document|schema)\}")


def render_prompt(template: str, document: str, schema_json: str) -> str:
    values = {"document": document, "schema": schema_json}
    return PLACEHOLDER.sub(lambda match: values[match.group(1)], template)
