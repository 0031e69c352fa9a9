"""Prompts: the job's template, the schema presented to the model, few-shot examples, as chat messages.

`{document}` and `{schema}` in a template are replaced literally, in one pass; other braces stay.

When the template has no `{schema}`, the schema is presented by the tool (`prompt_schema`): as the JSON
Schema (`json`), as a compact field list (`fields`), or not at all (`none`). It goes in the system
message with the optional `system` prompt, then come the few-shot examples as earlier user/assistant
turns, then the document. Everything before the document is the same for every document of a schema,
so vLLM's prefix cache holds it once.
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass
from typing import Any

from schemas.refs import graph_for
from workers.spec import PromptSpec

PLACEHOLDER = re.compile(r"\{(document|schema)\}")
PROMPT_SCHEMA_MODES = ("auto", "json", "fields", "none")
# What `auto` resolves to, with and without few-shot examples: measured on the sample gold set with the bundled
# model (docs/quality.md). Examples show every field, in the grammar's order, already.
AUTO_MODE = {True: "none", False: "json"}
JSON_INTRO = "Answer with one JSON object that follows this JSON Schema:"
FIELDS_INTRO = "Answer with one JSON object with these fields, in this order:"


def render_prompt(template: str, document: str, schema_json: str) -> str:
    values = {"document": document, "schema": schema_json}
    return PLACEHOLDER.sub(lambda match: values[match.group(1)], template)


@dataclass(frozen=True)
class Chat:
    """A prompt as chat messages, and the chat template to render them with (None: the tokenizer's)."""

    messages: tuple[dict[str, str], ...]
    chat_template: str | None = None


def resolve_mode(mode: str, has_examples: bool = False) -> str:
    if mode not in PROMPT_SCHEMA_MODES:
        raise ValueError(f"prompt_schema: {mode!r} is not one of {', '.join(PROMPT_SCHEMA_MODES)}")
    return AUTO_MODE[has_examples] if mode == "auto" else mode


def presented_schema(json_schema: dict[str, Any], mode: str) -> str | None:
    """The schema as the model is shown it, or None for `none`."""
    mode = resolve_mode(mode)
    if mode == "none":
        return None
    if mode == "json":
        shown = {k: v for k, v in json_schema.items() if k != "examples"}  # few-shot pairs are shown as turns
        return f"{JSON_INTRO}\n{json.dumps(shown, ensure_ascii=False, separators=(',', ':'))}"
    return f"{FIELDS_INTRO}\n" + "\n".join(_FieldLister(json_schema).lines(json_schema, 0))


def system_message(template: str, json_schema: dict[str, Any], mode: str, system: str | None,
                   has_examples: bool = False) -> str | None:
    """The system message: the `system` prompt, then the schema unless the template places it itself."""
    parts = [system.strip()] if system and system.strip() else []
    mode = resolve_mode(mode, has_examples)
    if "{schema}" not in template and mode != "none":
        parts.append(_presented(json.dumps(json_schema, ensure_ascii=False), mode))
    return "\n\n".join(parts) or None


@functools.lru_cache(maxsize=256)
def _presented(schema_json: str, mode: str) -> str:
    return presented_schema(json.loads(schema_json), mode) or ""


def build_chat(template: str, document: str, json_schema: dict[str, Any], schema_json: str, *, mode: str = "none",
               system: str | None = None, examples: tuple[tuple[str, str], ...] = (),
               chat_template: str | None = None) -> str | Chat:
    """The prompt for one document. A lone user message with no template is returned as plain text."""
    head = system_message(template, json_schema, mode, system, bool(examples))
    if head is None and not examples and chat_template is None:
        return render_prompt(template, document, schema_json)
    messages: list[dict[str, str]] = [{"role": "system", "content": head}] if head else []
    for example_document, output in examples:
        messages.append({"role": "user", "content": render_prompt(template, example_document, schema_json)})
        messages.append({"role": "assistant", "content": output})
    messages.append({"role": "user", "content": render_prompt(template, document, schema_json)})
    return Chat(tuple(messages), chat_template)


def prompt_for(spec: PromptSpec, document: str, json_schema: dict[str, Any], schema_json: str) -> str | Chat:
    """`build_chat` with a job's prompting settings (`ExtractionSpec.prompt`)."""
    return build_chat(spec.prompt_template, document, json_schema, schema_json, mode=spec.prompt_schema,
                      system=spec.system, examples=spec.examples, chat_template=spec.chat_template)


# -- another attempt (model.retry.feedback) ---------------------------------------------------------------

FEEDBACK = "Your answer failed validation: {errors}. Answer again."
TRUNCATED_FEEDBACK = "Your answer was cut off at the token limit. Answer again, shorter."
MAX_FEEDBACK_ERRORS = 5
MAX_FEEDBACK_MESSAGE = 200


def feedback_text(reason: str | None, error: dict[str, Any] | None) -> str:
    """The user turn after a refused output: each error as `field: message` (Pydantic's "Value error, "
    prefix dropped, repeats once, at most five), or, for a cut-off output, that it was cut off."""
    if reason == "truncated":
        return TRUNCATED_FEEDBACK
    parts: list[str] = []
    errors = (error or {}).get("errors") or [{"loc": [], "msg": (error or {}).get("message") or reason or "refused"}]
    for err in errors:
        message = str(err.get("msg") or "").removeprefix("Value error, ").strip()
        message = message[:MAX_FEEDBACK_MESSAGE]
        field_path = ".".join(str(part) for part in err.get("loc") or [])
        part = f"{field_path}: {message}" if field_path and not message.startswith(field_path) else message
        if part and part not in parts:
            parts.append(part)
    shown = parts[:MAX_FEEDBACK_ERRORS]
    if len(parts) > len(shown):
        shown.append(f"and {len(parts) - len(shown)} more")
    return FEEDBACK.format(errors="; ".join(shown) or reason or "refused")


def with_feedback(prompt: str | Chat, answer: str, feedback: str) -> Chat:
    """`prompt` continued: the refused `answer` as the assistant's turn, then `feedback` as the user's."""
    chat = prompt if isinstance(prompt, Chat) else Chat(({"role": "user", "content": prompt},))
    turns = ({"role": "assistant", "content": answer}, {"role": "user", "content": feedback})
    return Chat(chat.messages + turns, chat.chat_template)


def plain_transcript(messages: list[dict[str, str]]) -> str:
    """Messages as plain text, for a tokenizer with no chat template. One user message is its own text."""
    if len(messages) == 1 and messages[0]["role"] == "user":
        return messages[0]["content"]
    turns = [f"{m['role'].capitalize()}: {m['content']}" for m in messages]
    return "\n\n".join(turns) + "\n\nAssistant: "


# -- the field list ----------------------------------------------------------------------------------


class _FieldLister:
    """A JSON Schema as an indented list: each field's type, whether it may be null, bounds, enum,
    format and description. References are followed (`schemas.refs.SchemaGraph`: recursion is cut)."""

    def __init__(self, root: dict[str, Any]) -> None:
        self.root = root
        self.graph = graph_for(root)

    def resolve(self, node: Any, seen: frozenset[int] = frozenset()) -> tuple[Any, frozenset[int]]:
        if not self.graph.refers(node):
            return node, seen
        view = self.graph.expand(node, seen)
        if view.problem == "cycle":
            return {"description": "(recursive)"}, seen
        return (view.node if view.node is not None else {}), view.trail

    def lines(self, node: Any, depth: int, seen: frozenset[int] = frozenset()) -> list[str]:
        node, seen = self.resolve(node, seen)
        properties = node.get("properties") if isinstance(node, dict) else None
        if not isinstance(properties, dict):
            return []
        required = set(node.get("required") or [])
        out = []
        for name, sub in properties.items():
            resolved, sub_seen = self.resolve(sub, seen)
            kind, inner = self.describe(resolved, sub_seen)
            need = "required" if name in required else "optional"
            text = f"{'  ' * depth}- {name}: {kind}, {need}"
            description = resolved.get("description") if isinstance(resolved, dict) else None
            if description:
                text += f". {description}"
            out.append(text)
            if inner is not None:
                out += self.lines(inner, depth + 1, sub_seen)
        return out

    def describe(self, node: Any, seen: frozenset[int]) -> tuple[str, Any]:
        """(a short type description, the object schema whose fields go below it, or None)."""
        if not isinstance(node, dict):
            return "any value", None
        alternatives = node.get("anyOf") or node.get("oneOf")
        if isinstance(alternatives, list):
            kinds, inner = [], None
            for alternative in alternatives:
                resolved, _ = self.resolve(alternative, seen)
                kind, nested = self.describe(resolved, seen)
                kinds.append(kind)
                inner = inner or nested
            return " or ".join(dict.fromkeys(kinds)), inner
        if "const" in node:
            return f"always {json.dumps(node['const'], ensure_ascii=False)}", None
        if isinstance(node.get("enum"), list):
            return "one of " + ", ".join(json.dumps(v, ensure_ascii=False) for v in node["enum"]), None
        types = node.get("type")
        types = [types] if isinstance(types, str) else list(types or [])
        if "array" in types:
            item, item_seen = self.resolve(node.get("items") or {}, seen)
            kind, inner = self.describe(item, item_seen)
            return f"list of ({kind}){_bounds(node, 'minItems', 'maxItems', 'items')}", inner
        if "object" in types or "properties" in node:
            return "object", node
        shown = " or ".join(types) if types else "any value"
        if node.get("format"):
            shown += f" ({node['format']}{', YYYY-MM-DD' if node['format'] == 'date' else ''})"
        if node.get("pattern"):
            shown += f" matching {node['pattern']}"
        return shown + _bounds(node, "minLength", "maxLength", "characters") + _number_bounds(node), None


def _bounds(node: dict[str, Any], low: str, high: str, unit: str) -> str:
    lo, hi = node.get(low), node.get(high)
    if lo is not None and hi is not None:
        return f", {lo}-{hi} {unit}"
    if hi is not None:
        return f", at most {hi} {unit}"
    if lo:
        return f", at least {lo} {unit}"
    return ""


def _number_bounds(node: dict[str, Any]) -> str:
    marks = {"minimum": ">=", "exclusiveMinimum": ">", "maximum": "<=", "exclusiveMaximum": "<"}
    return "".join(f", {sign} {node[key]}" for key, sign in marks.items() if isinstance(node.get(key), int | float))
