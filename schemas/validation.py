"""The full post-check: every emitted record is validated against the *whole* JSON Schema.

Grammar engines enforce only part of a schema (see `workers/compiler.py` for what each one leaves
out), so the grammar is a shape guarantee, not a compliance guarantee. This module is the check that
makes compliance hold anyway: a complete validator (`jsonschema`) for the schema's own draft, with
format assertion on, that never touches the network, and whose regex work is bounded: `pattern`,
`patternProperties` (and the `additionalProperties`/`unevaluatedProperties` that consult them) run
through `schemas.patterns.bounded_search` while `schema_errors` validates.
"""

from __future__ import annotations

import contextvars
import ipaddress
import re
from datetime import date
from typing import Any

import jsonschema
import jsonschema._keywords
import jsonschema._legacy_keywords
import jsonschema._utils
import referencing
import referencing.exceptions
from jsonschema import FormatChecker
from jsonschema.exceptions import ValidationError, best_match

from schemas.patterns import PatternBudgetExceeded, bounded_search
from schemas.pointer import pointer
from schemas.refs import NO_REMOTE_REGISTRY, SchemaRefError, graph_for, unresolvable_message

__all__ = ["NO_REMOTE_REGISTRY", "PatternBudgetExceeded", "SchemaRefError"]

_BOUNDED: contextvars.ContextVar[bool] = contextvars.ContextVar("bounded_patterns", default=False)


class _BoundedRe:
    """Stands in for `re` in jsonschema's keyword modules, whose `re.search(pattern, value)` is every place
    a schema pattern meets a value. While `schema_errors` runs, `search` is `bounded_search`; anywhere else
    (another validator in the process) it is plain `re.search`."""

    def __getattr__(self, name: str) -> Any:
        return getattr(re, name)

    @staticmethod
    def search(pattern: Any, string: Any, flags: int = 0) -> Any:
        if _BOUNDED.get() and not flags and isinstance(pattern, str) and isinstance(string, str):
            return True if bounded_search(pattern, string) else None
        return re.search(pattern, string, flags)


PATTERN_MODULES = (jsonschema._keywords, jsonschema._utils, jsonschema._legacy_keywords)
for _module in PATTERN_MODULES:
    _module.re = _BoundedRe()  # type: ignore[attr-defined]

DEFAULT_DRAFT = jsonschema.Draft202012Validator

# Formats that `jsonschema` checks loosely (email: any '@'; uuid; time without leap seconds) or only
# when optional packages (rfc3986-validator, fqdn, isoduration) are installed. The grammar engines
# constrain these formats, so the post-check must not be weaker than the engine: small stdlib
# checkers follow the RFCs instead (they agree with the official JSON Schema Test Suite).
_HOSTNAME_LABEL = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?")
# RFC 3986 appendix B splits any string into scheme, authority, path, query and fragment.
_URI_SPLIT = re.compile(r"(?:([^:/?#]+):)?(?://([^/?#]*))?([^?#]*)(?:\?([^#]*))?(?:#(.*))?", re.DOTALL)
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*")
_PCT = r"%[0-9A-Fa-f]{2}"
_UNRESERVED_SUB = r"A-Za-z0-9\-._~!$&'()*+,;="
_PCHARS = re.compile(rf"(?:[{_UNRESERVED_SUB}:@/]|{_PCT})*")  # path segments with their slashes
_QUERY = re.compile(rf"(?:[{_UNRESERVED_SUB}:@/?]|{_PCT})*")
_USERINFO = re.compile(rf"(?:[{_UNRESERVED_SUB}:]|{_PCT})*")
_REG_NAME = re.compile(rf"(?:[{_UNRESERVED_SUB}]|{_PCT})*")
_IPV_FUTURE = re.compile(rf"v[0-9A-Fa-f]+\.[{_UNRESERVED_SUB}:]+")
# RFC 3339 Appendix A, exactly: year [month [day]] | month [day] | day, then an optional time part
# hour [minute [second]] | minute [second] | second; or weeks alone. ASCII digits only.
_DUR_TIME = r"T(?:[0-9]+H(?:[0-9]+M(?:[0-9]+S)?)?|[0-9]+M(?:[0-9]+S)?|[0-9]+S)"
_DUR_DATE = r"(?:[0-9]+Y(?:[0-9]+M(?:[0-9]+D)?)?|[0-9]+M(?:[0-9]+D)?|[0-9]+D)"
_DURATION = re.compile(rf"P(?:{_DUR_DATE}(?:{_DUR_TIME})?|{_DUR_TIME}|[0-9]+W)")


def _is_a_label(label: str) -> bool:
    """An IDNA A-label (`xn--...`) that decodes to a valid U-label."""
    import idna

    try:
        idna.decode(label)
    except (idna.IDNAError, UnicodeError, ValueError):
        return False
    return True


def _is_hostname(value: object) -> bool:
    """RFC 1123 host name: dot-separated labels of 1-63 letters, digits and inner hyphens, 253 chars
    in all; a label with `--` in 3rd-4th position must be a valid IDNA A-label (RFC 5890)."""
    if not isinstance(value, str):
        return True
    if not value or len(value) > 253:
        return False
    for label in value.split("."):
        if not _HOSTNAME_LABEL.fullmatch(label):
            return False
        if label[2:4] == "--" and not (label[:4].lower() == "xn--" and _is_a_label(label)):
            return False
    return True


def _is_host(host: str) -> bool:
    if host.startswith("[") and host.endswith("]"):
        literal = host[1:-1]
        if _IPV_FUTURE.fullmatch(literal):
            return True
        try:
            ipaddress.IPv6Address(literal)
        except ValueError:
            return False
        return True
    return _REG_NAME.fullmatch(host) is not None


def _is_authority(authority: str) -> bool:
    userinfo, at, hostport = authority.rpartition("@")
    if at and not _USERINFO.fullmatch(userinfo):
        return False
    host, colon, port = hostport.rpartition(":") if not hostport.endswith("]") else (hostport, "", "")
    if not colon:
        host = hostport
    elif not port.isascii() or not (port == "" or port.isdigit()):
        return False
    return _is_host(host)


def _uri_parts_ok(value: str, need_scheme: bool) -> bool:
    """RFC 3986 syntax of a URI (`need_scheme`) or of a URI reference."""
    match = _URI_SPLIT.fullmatch(value)
    if match is None:
        return False
    scheme, authority, path, query, fragment = match.groups()
    if scheme is None and need_scheme:
        return False
    if scheme is not None and not _SCHEME.fullmatch(scheme):
        return False
    if authority is not None and not _is_authority(authority):
        return False
    if not _PCHARS.fullmatch(path):
        return False
    if scheme is None and authority is None and ":" in path.split("/", 1)[0]:
        return False  # path-noscheme: a colon in the first segment would read as a scheme
    return all(part is None or _QUERY.fullmatch(part) for part in (query, fragment))


def _is_uri(value: object) -> bool:
    """RFC 3986 absolute URI: a scheme, then a well-formed hierarchical part, query and fragment."""
    return not isinstance(value, str) or _uri_parts_ok(value, need_scheme=True)


def _is_uri_reference(value: object) -> bool:
    """RFC 3986 URI reference: a URI or a relative reference."""
    return not isinstance(value, str) or _uri_parts_ok(value, need_scheme=False)


_TIME = re.compile(r"([0-9]{2}):([0-9]{2}):([0-9]{2})(?:\.[0-9]+)?(?:[Zz]|([+-])([0-9]{2}):([0-9]{2}))")
_DATE = re.compile(r"([0-9]{4})-([0-9]{2})-([0-9]{2})")
_EMAIL_ATOM = r"[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+"
_EMAIL_LOCAL = re.compile(rf'{_EMAIL_ATOM}(?:\.{_EMAIL_ATOM})*|"(?:[^"\\\r\n]|\\.)*"')
_UUID = re.compile(r"[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}")
_RELATIVE_POINTER = re.compile(r"(?:0|[1-9][0-9]*)(?:#|(?:/(?:[^~/]|~[01])*)*)", re.DOTALL)


def _is_time(value: object) -> bool:
    """RFC 3339 full-time: two-digit fields, an offset, and second 60 only at 23:59 UTC (leap second)."""
    if not isinstance(value, str):
        return True
    match = _TIME.fullmatch(value)
    if match is None:
        return False
    hour, minute, second = (int(g) for g in match.group(1, 2, 3))
    sign, off_hour, off_minute = match.group(4), int(match.group(5) or 0), int(match.group(6) or 0)
    if hour > 23 or minute > 59 or second > 60 or off_hour > 23 or off_minute > 59:
        return False
    if second == 60:
        offset = (off_hour * 60 + off_minute) * (-1 if sign == "-" else 1)
        return (hour * 60 + minute - offset) % 1440 == 23 * 60 + 59
    return True


def _is_date_text(text: str) -> bool:
    match = _DATE.fullmatch(text)
    if match is None:
        return False
    try:
        date(*(int(g) for g in match.groups()))
    except ValueError:
        return False
    return True


def _is_date_time(value: object) -> bool:
    """RFC 3339 date-time: a full-date, `T` (either case), a full-time."""
    if not isinstance(value, str):
        return True
    day, sep, time_part = value.partition("T") if "T" in value else value.partition("t")
    return bool(sep) and _is_date_text(day) and _is_time(time_part)


def _is_email(value: object) -> bool:
    """RFC 5321 mailbox: a dot-atom or quoted local part, then a host name or an address literal."""
    if not isinstance(value, str):
        return True
    local, at, domain = value.rpartition("@")
    if not at or not _EMAIL_LOCAL.fullmatch(local):
        return False
    if domain.startswith("[") and domain.endswith("]"):
        literal = domain[1:-1]
        try:
            if literal[:5].lower() == "ipv6:":
                ipaddress.IPv6Address(literal[5:])
            else:
                ipaddress.IPv4Address(literal)
        except ValueError:
            return False
        return True
    return _is_hostname(domain)


def _is_uuid(value: object) -> bool:
    return not isinstance(value, str) or _UUID.fullmatch(value) is not None


def _is_relative_json_pointer(value: object) -> bool:
    return not isinstance(value, str) or _RELATIVE_POINTER.fullmatch(value) is not None


def _is_duration(value: object) -> bool:
    return not isinstance(value, str) or _DURATION.fullmatch(value) is not None


_EXTRA_FORMATS = {
    "date-time": _is_date_time,
    "time": _is_time,
    "email": _is_email,
    "uuid": _is_uuid,
    "relative-json-pointer": _is_relative_json_pointer,
    "hostname": _is_hostname,
    "uri": _is_uri,
    "uri-reference": _is_uri_reference,
    "duration": _is_duration,
}


def format_checker(validator_cls: type[jsonschema.protocols.Validator]) -> FormatChecker:
    """The draft's format checker plus the stdlib checkers for formats jsonschema would skip here."""
    base = validator_cls.FORMAT_CHECKER
    checker = FormatChecker(formats=())
    checker.checkers = dict(base.checkers)
    for name, func in _EXTRA_FORMATS.items():
        checker.checkers[name] = (func, ())
    return checker


def checked_formats(json_schema: dict[str, Any] | None = None) -> list[str]:
    """The `format` values the post-check asserts for this schema's draft (others are annotations)."""
    validator_cls = jsonschema.validators.validator_for(json_schema or {}, default=DEFAULT_DRAFT)
    return sorted(format_checker(validator_cls).checkers)


def draft_name(json_schema: dict[str, Any]) -> str:
    """'Draft 2020-12', 'Draft 7', ...: the draft the post-check validates this schema under."""
    cls = jsonschema.validators.validator_for(json_schema, default=DEFAULT_DRAFT)
    label = cls.__name__.removeprefix("Draft").removesuffix("Validator")
    return "Draft " + (f"{label[:4]}-{label[4:]}" if len(label) == 6 else label)


def full_validator(json_schema: dict[str, Any]) -> jsonschema.protocols.Validator:
    """A complete validator for `json_schema`: its own draft (2020-12 unless `$schema` names another),
    format checking on, remote references refused (`schemas.refs.NO_REMOTE_REGISTRY`).

    Formats checked (Draft 2020-12): date, date-time, time, duration, email, idn-email, hostname,
    idn-hostname, ipv4, ipv6, uri, uri-reference, uuid, regex, json-pointer, relative-json-pointer
    (all but idn-hostname agree with every case of the official test suite's optional/format tests).
    Not checked (no checker installed; they stay annotations): iri, iri-reference, uri-template,
    and unknown formats. `checked_formats()` gives the exact list for a schema's draft.

    Raises `jsonschema.SchemaError` when the schema itself is not valid under its draft's meta-schema:
    such a schema cannot be enforced, so it is refused up front rather than misapplied per record.
    """
    cls = jsonschema.validators.validator_for(json_schema, default=DEFAULT_DRAFT)
    cls.check_schema(json_schema)
    return cls(json_schema, format_checker=format_checker(cls), registry=NO_REMOTE_REGISTRY)


def _sort_key(error: dict[str, Any]) -> tuple[Any, ...]:
    loc = tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in error["loc"])
    return loc, error["schema_path"]


def _describe(error: ValidationError) -> str:
    """The error's message; for anyOf/oneOf, also the branch error that best explains the failure."""
    if error.validator in ("anyOf", "oneOf") and error.context:
        # A branch of another type is the least likely intent: prefer one that failed on something else.
        relevant = [e for e in error.context if e.validator != "type"] or list(error.context)
        closest = best_match(relevant)
        where = pointer(closest.absolute_path) or "/"
        return f"{error.message} (closest branch fails at {where}: {closest.message} [{closest.validator}])"
    return error.message


def schema_errors(validator: jsonschema.protocols.Validator, instance: Any) -> list[dict[str, Any]]:
    """Every error of `instance`, sorted by location: loc, msg, type/keyword, and the schema_path of
    the failing keyword (a JSON pointer such as /properties/x/maxLength).

    Raises `SchemaRefError` when validation reaches a reference that is remote or does not resolve: that
    is a fault of the schema, not of the record, and must not be reported as a record violation.
    Raises `PatternBudgetExceeded` when a pattern RE2 cannot run takes longer than its budget on a value.
    """
    token = _BOUNDED.set(True)
    try:
        errors = list(validator.iter_errors(instance))
    except referencing.exceptions.Unresolvable as exc:
        raise SchemaRefError(unresolvable_message(exc)) from exc
    finally:
        _BOUNDED.reset(token)
    if not errors:
        return []
    graph = graph_for(validator.schema)
    found = [
        {
            "loc": [str(p) for p in error.absolute_path],
            "msg": _describe(error),
            "type": str(error.validator),
            "keyword": str(error.validator),
            "schema_path": graph.keyword_location(list(error.absolute_schema_path)),
        }
        for error in errors
    ]
    return sorted(found, key=_sort_key)
