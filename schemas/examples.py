"""Few-shot examples: `{document, output}` pairs, checked before a job starts.

Examples come from a JSONL file (`examples:` in extract.yaml, `extract schemas check --examples`) or
from the Pydantic model itself: `model_config = ConfigDict(json_schema_extra={"examples": [{"document":
..., "output": {...}}]})`. Each output is shown to the model exactly as the grammar would emit it:
compact JSON, no free whitespace, keys in the schema's property order (`compact_output`).

Two checks, each failing with one line naming the example:
- `check_examples`: the output against the contract (the full JSON Schema, then the model's validators
  with the example's document as context) — an invalid example would teach the model a wrong answer;
- `check_grammar`: the compact output fed to the compiled grammar's matcher (XGrammar or llguidance,
  as vLLM builds it) — a grammar that refuses a valid output is stricter than the schema (XGrammar
  full-matches `pattern`, and closes objects without `additionalProperties`), so the model could never
  write that answer.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from schemas.contract import RecordRejected, SchemaContract
from schemas.grounding import refusal
from schemas.refs import graph_for


class ExampleError(ValueError):
    """An example is unreadable, invalid, or refused by the grammar; the message names it, on one line."""


@dataclass(frozen=True)
class Example:
    name: str  # where it came from: "examples.jsonl:3", or "Invoice examples[0]"
    document: str
    output: Any


def _example(entry: Any, name: str) -> Example:
    if not isinstance(entry, dict) or set(entry) != {"document", "output"}:
        raise ExampleError(f"example {name}: expected an object with exactly the keys 'document' and 'output'")
    if not isinstance(entry["document"], str) or not entry["document"].strip():
        raise ExampleError(f"example {name}: 'document' must be non-empty text")
    return Example(name, entry["document"], entry["output"])


def load_examples_file(path: Path) -> list[Example]:
    """The examples of a JSONL file, one `{"document": ..., "output": {...}}` per line (blank lines skipped)."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise ExampleError(f"examples {path}: cannot read: {exc.strerror}") from None
    examples = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ExampleError(f"example {path.name}:{number}: not valid JSON: {exc.msg}") from None
        examples.append(_example(entry, f"{path.name}:{number}"))
    if not examples:
        raise ExampleError(f"examples {path}: holds no examples")
    return examples


def model_examples(contract: SchemaContract) -> list[Example]:
    """The `{document, output}` pairs under the schema's top-level `examples` (a model's json_schema_extra)."""
    entries = contract.json_schema.get("examples")
    if not isinstance(entries, list):
        return []
    pairs = [e for e in entries if isinstance(e, dict) and "document" in e]
    return [_example(e, f"{contract.name} examples[{i}]") for i, e in enumerate(pairs)]


# -- canonical form ----------------------------------------------------------------------------------


def _resolve(node: Any, root: dict[str, Any]) -> Any:
    """`node` with its references followed (`schemas.refs.SchemaGraph.expand`), or None where they do not resolve."""
    return graph_for(root).expand(node).node


def _object_schema(node: Any, value: dict[str, Any], root: dict[str, Any]) -> dict[str, Any] | None:
    """The branch of `node` (through references and anyOf/oneOf) whose properties describe `value`."""
    node = _resolve(node, root)
    if not isinstance(node, dict):
        return None
    if isinstance(node.get("properties"), dict):
        return node
    for branch in (node.get("anyOf") or []) + (node.get("oneOf") or []) + (node.get("allOf") or []):
        found = _object_schema(branch, value, root)
        if found is not None:
            return found
    return None


def _items_schema(node: Any, root: dict[str, Any]) -> Any:
    node = _resolve(node, root)
    if not isinstance(node, dict):
        return None
    if "items" in node:
        return node["items"]
    for branch in (node.get("anyOf") or []) + (node.get("oneOf") or []):
        found = _items_schema(branch, root)
        if found is not None:
            return found
    return None


def in_schema_order(value: Any, node: Any, root: dict[str, Any]) -> Any:
    """`value` with every object's keys in its schema's property order (the order the grammar emits),
    keys the schema does not list after them in their own order."""
    if isinstance(value, dict):
        schema = _object_schema(node, value, root)
        order = list(schema["properties"]) if schema else []
        keys = [k for k in order if k in value] + [k for k in value if k not in order]
        props = schema["properties"] if schema else {}
        return {k: in_schema_order(value[k], props.get(k), root) for k in keys}
    if isinstance(value, list):
        items = _items_schema(node, root)
        return [in_schema_order(v, items, root) for v in value]
    return value


def compact_output(output: Any, json_schema: dict[str, Any]) -> str:
    """The output exactly as the grammar emits it: schema key order, no whitespace, UTF-8 text."""
    ordered = in_schema_order(output, json_schema, json_schema)
    return json.dumps(ordered, ensure_ascii=False, separators=(",", ":"))


# -- checks ------------------------------------------------------------------------------------------


def check_examples(examples: list[Example], contract: SchemaContract, grounding: str = "marked",
                   all_numbers: bool = False) -> list[tuple[Example, str]]:
    """Each example against the full schema and the model's validators, and (unless `grounding` is off) against
    its document's grounded grammar schema (schema_policy.grounding and ground_numbers): the model could not
    write a value the grounding leaves out; (example, compact output) pairs."""
    checked = []
    for example in examples:
        text = compact_output(example.output, contract.json_schema)
        try:
            contract.check(text, {"document": example.document, "document_id": example.name})
        except RecordRejected as exc:
            where = ".".join(exc.errors[0]["loc"]) if exc.errors and exc.errors[0].get("loc") else "(record)"
            raise ExampleError(f"example {example.name}: its output fails the schema ({exc.reason} at {where}: "
                               f"{exc.errors[0]['msg'] if exc.errors else ''})") from None
        refused = refusal(contract.json_schema, example.document, json.loads(text), grounding, all_numbers) \
            if grounding != "off" else None
        if refused:
            raise ExampleError(f"example {example.name}: grounding refuses it: {refused} (a field the model must "
                               "write in its own words: mark it x-grounded: false)")
        checked.append((example, text))
    return checked


def check_grammar(checked: list[tuple[Example, str]], json_schema: dict[str, Any], compiler: Any,
                  backend: str) -> None:
    """Feed each compact output to the compiled grammar's matcher (`SchemaCompiler.probe`); raise on the
    first it refuses, naming it. The output already passed the full schema, so the grammar is too strict."""
    rejected, accepted = compiler.probe(json_schema, backend, [text for _, text in checked])
    if len(accepted) != len(checked):
        raise ExampleError(f"examples: the {backend} grammar could not be built to check them: {rejected}")
    for (example, _), ok in zip(checked, accepted, strict=True):
        if not ok:
            raise ExampleError(
                f"example {example.name}: the {backend} grammar refuses this output although the schema accepts "
                "it, so the model could never write it: the grammar is stricter than the schema (XGrammar "
                "full-matches `pattern`; objects without `additionalProperties` are closed)")


def examples_hash(checked: list[tuple[Example, str]]) -> str:
    text = json.dumps([[e.document, out] for e, out in checked], ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()[:16]
