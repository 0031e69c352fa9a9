"""Verdicts: our validator's on an instance, agreement tallies, and one generated output's (compliance before
the post-check, the pipeline's post-check, an independent re-validation of what it lets through)."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from typing import Any

from pipeline.tools.conformance.corpora import BenchSchema

# Generation statuses. The first five are outputs of the engine (they count in compliance).
GENERATED = ("valid", "schema_violation", "invalid_json", "truncated", "engine_error")
NOT_GENERATED = ("not_attempted", "not_compiled", "schema_invalid", "skipped")


def share(part: int, whole: int) -> float | None:
    return round(part / whole, 4) if whole else None


def verdict(rejected: int, checked: int) -> str:
    """How fully a check enforces a keyword category, from how many invalid instances it rejected."""
    if checked == 0:
        return "n/a"
    if rejected == checked:
        return "enforced"
    return "not enforced" if rejected == 0 else "partly"


def first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0] if text else ''}"[:300]


def compact_json(value: Any) -> str:
    """The text the engine would emit for `value`: compact JSON (the engine runs with no free whitespace)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def suite_validator(json_schema: Any, registry: Any) -> Any:
    """Our full validator, with the suite's remotes resolvable (`schemas.validation.full_validator`
    takes no registry, so it is assembled here from the same public pieces)."""
    import jsonschema

    from schemas.validation import DEFAULT_DRAFT, format_checker

    cls = jsonschema.validators.validator_for(json_schema, default=DEFAULT_DRAFT)
    cls.check_schema(json_schema)
    return cls(json_schema, format_checker=format_checker(cls), registry=registry)


def independent_validator(json_schema: Any) -> Any:
    """A second opinion for emitted rows: plain `jsonschema` for the schema's draft with its own format
    checker and no remote retrieval, built apart from `schemas.validation` and the contract."""
    import jsonschema
    import referencing

    cls = jsonschema.validators.validator_for(json_schema, default=jsonschema.Draft202012Validator)
    return cls(json_schema, format_checker=cls.FORMAT_CHECKER, registry=referencing.Registry())


def instance_verdict(validator: Any, data: Any) -> tuple[bool | None, str]:
    """(valid?, first error) under our validator; (None, reason) when the schema cannot be applied."""
    from schemas.validation import SchemaRefError, schema_errors

    try:
        errors = schema_errors(validator, data)
    except SchemaRefError as exc:
        return None, f"schema_ref_error: {exc}"
    except Exception as exc:  # noqa: BLE001 - a validator crash is a disagreement to report, not a harness crash
        return None, first_line(exc)
    return (not errors), (f"{errors[0]['keyword']} at /{'/'.join(errors[0]['loc'])}: {errors[0]['msg']}"
                          if errors else "")


def agreement_tally(verdicts: Iterable[tuple[bool, bool | None]]) -> dict[str, Any]:
    """Counts of (expected, ours) pairs: agreement overall and on valid and invalid instances apart."""
    tally = Counter()
    for expected, ours in verdicts:
        side = "valid" if expected else "invalid"
        tally["n"] += 1
        tally[f"{side}_n"] += 1
        if ours is None:
            tally["errors"] += 1
        elif ours == expected:
            tally["agree"] += 1
            tally[f"{side}_agree"] += 1
    keys = ("n", "agree", "valid_n", "valid_agree", "invalid_n", "invalid_agree", "errors")
    out: dict[str, Any] = {k: tally[k] for k in keys}
    out["share"] = share(out["agree"], out["n"])
    return out


def judge(item: BenchSchema, validator: Any, output: dict[str, Any]) -> dict[str, Any]:
    """One output's verdict: compliance under the full validator (before the post-check), then the
    pipeline's own post-check (`workers.classify.classify` with a `SchemaContract`), then an independent
    re-validation of what the post-check let through."""
    from schemas.validation import SchemaRefError, schema_errors

    gen = output.get("generation")
    result: dict[str, Any] = {k: v for k, v in output.items() if k != "generation"}
    if gen is None or isinstance(gen, Exception):
        result.setdefault("status", "engine_error")
        if isinstance(gen, Exception):
            result["error"] = f"{type(gen).__name__}: {gen}"[:500]
        result.update(emitted=False, revalidated_valid=None)
        return result
    result.update(finish_reason=gen.finish_reason, prompt_tokens=gen.prompt_tokens,
                  output_tokens=gen.output_tokens, output=gen.text)
    if gen.finish_reason == "length":
        result["status"] = "truncated"
    elif gen.finish_reason not in ("stop", None):
        result["status"] = "engine_error"
        result["error"] = f"finish_reason {gen.finish_reason!r}"
    else:
        try:
            parsed = json.loads(gen.text)
        except json.JSONDecodeError as exc:
            result.update(status="invalid_json", error=f"{exc.msg} at char {exc.pos}")
        else:
            try:
                errors = schema_errors(validator, parsed)
            except SchemaRefError as exc:
                errors = [{"keyword": exc.keyword, "loc": [], "msg": str(exc), "schema_path": ""}]
            result["status"] = "schema_violation" if errors else "valid"
            if errors:
                result["violations"] = [{"keyword": e["keyword"], "loc": "/" + "/".join(e["loc"]),
                                         "msg": e["msg"][:200]} for e in errors[:5]]
    result.update(post_check(item, gen))
    return result


def post_check(item: BenchSchema, gen: Any) -> dict[str, Any]:
    """What the pipeline does with the output: a row (emitted) or a dead letter; rows re-validated."""
    from schemas.contract import SchemaContract
    from workers.classify import classify

    try:
        contract = SchemaContract.from_dict(item.schema, default_name=item.id, source=item.key)
    except Exception as exc:  # noqa: BLE001 - a schema the pipeline refuses up front emits nothing
        return {"emitted": False, "dead_letter": "schema_refused", "revalidated_valid": None,
                "post_check_error": f"{type(exc).__name__}: {exc}"[:300]}
    outcome = classify(gen, contract, {"document": "", "document_id": item.key})
    if not outcome.is_row:
        return {"emitted": False, "dead_letter": outcome.reason, "revalidated_valid": None}
    try:
        valid = bool(independent_validator(item.schema).is_valid(outcome.record))
    except Exception as exc:  # noqa: BLE001 - an emitted row the second validator cannot judge is not proven valid
        return {"emitted": True, "revalidated_valid": False, "revalidation_error": f"{type(exc).__name__}: {exc}"}
    return {"emitted": True, "revalidated_valid": valid}



def bench_instances(item: BenchSchema, validator: Any, tests: list[dict[str, Any]]) -> dict[str, Any]:
    """Our validator on the benchmark's own instances of one schema: tally and disagreements."""
    pairs = []
    disagreements = []
    for test in tests:
        ours, why = instance_verdict(validator, test["data"]) if validator is not None else (None, "schema_invalid")
        pairs.append((bool(test["valid"]), ours))
        if ours is None or ours != bool(test["valid"]):
            disagreements.append({"schema": item.key, "description": test.get("description", ""),
                                  "expected": bool(test["valid"]), "ours": ours, "why": why[:300],
                                  "data": compact_json(test["data"])[:300]})
    return {"tally": agreement_tally(pairs), "disagreements": disagreements}
