"""The grounding policy's keys (issue 54), checked for `pipeline.config`: `input.locale`, and
`schema_policy.grounding` as a mode or a mapping `{mode, locale, screens}`."""

from __future__ import annotations

from typing import Any

DEFAULT_SCREENS = ["placeholders", "sent", "labels", "concepts"]  # schemas.grounding.screens.DEFAULT_SCREENS


def checked_locale(value: str | None) -> str | None:
    """`auto` (or None) or a locale such as de_DE (schemas.grounding.locale.parse_locale), else a one-line error."""
    from schemas.grounding.locale import parse_locale

    if value is not None:
        parse_locale(value)  # raises ValueError naming the value
    return value


def checked_screens(value: list[str]) -> list[str]:
    """Screen names that `schemas.grounding.screens` knows, else a one-line error naming the unknown ones."""
    from schemas.grounding.screens import SCREENS, unknown_screens

    unknown = unknown_screens(value)
    if unknown:
        raise ValueError(f"grounding screens: {', '.join(unknown)} is no screen (known: {', '.join(SCREENS)})")
    return value


def split_grounding(data: Any) -> Any:
    """`grounding: {mode, locale, screens}` → grounding, grounding_locale, grounding_screens."""
    if not (isinstance(data, dict) and isinstance(data.get("grounding"), dict)):
        return data
    data = dict(data)
    given = dict(data.pop("grounding"))
    unknown = set(given) - {"mode", "locale", "screens"}
    if unknown:
        raise ValueError(f"grounding: unknown key(s) {', '.join(sorted(map(str, unknown)))} "
                         "(it takes mode, locale and screens)")
    data["grounding"] = given.get("mode", "auto")
    for key in ("locale", "screens"):
        if key in given:
            data[f"grounding_{key}"] = given[key]
    return data
