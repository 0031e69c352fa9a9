"""What the commands share: the job options' parent parser, the terminal flags, `--set` overrides and `--date`.

A command module builds its parser from these and imports nothing else from the CLI, so `main` is the only
module that knows every command, and no command imports `main` back.

A path given on the command line (`--output`, `--set output.uri=...`, any `--set` of a path key) is relative to
the working directory, as a shell user expects; a path written in extract.yaml stays relative to that file.
So `overrides` turns a relative local path of a path key into an absolute one before the config is loaded.
A `--set` value is parsed by the type of the key it sets: `--set name=2026` is the text "2026", and
`--set model.max_tokens=256` the number 256; a value its key cannot take fails naming the `--set`."""

from __future__ import annotations

import argparse
import json
import os
import sys
from datetime import date
from typing import Any

from pipeline.config import ConfigError, LoadedConfig
from pipeline.partition import is_templated, parse_day


class OneLineParser(argparse.ArgumentParser):
    """An argument parser whose usage errors are one line on stderr and exit 2, as every other error of `extract`
    is (argparse's own prints the whole usage first). `--help` still prints the usage."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"error: {self.prog}: {message} (see {self.prog} --help)\n")


def config_options(config_help: str = "path to extract.yaml",
                   set_example: str = "model.max_tokens=256") -> argparse.ArgumentParser:
    """The parent parser of every command that reads a job's config: CONFIG and `--set`."""
    p = argparse.ArgumentParser(add_help=False)
    p.add_argument("config", help=config_help)
    p.add_argument("--set", action="append", metavar="KEY=VALUE",
                   help=f"override a config key, e.g. --set {set_example} (repeatable; parsed by the key's type; "
                   "a path is relative to the working directory)")
    return p


RATE_HELP = ("quality bar, 0 to 1 (overrides output.max_dead_letter_rate): a run above it still commits, records an "
             "alert and exits 4")


def job_options(rate_help: str = RATE_HELP) -> argparse.ArgumentParser:
    """The parent parser of the commands that run (or check) a job: `run`, `backfill`, `validate`."""
    p = argparse.ArgumentParser(add_help=False, parents=[config_options()])
    p.add_argument("--limit", type=int, help="process at most N documents (overrides input.limit)")
    p.add_argument("--output", help="output URI (overrides output.uri; a path is relative to the working "
                   "directory)")
    p.add_argument("--set-file", metavar="FILE", help="more --set items: a JSON list of \"KEY=VALUE\" strings")
    p.add_argument("--max-dead-letter-rate", type=float, metavar="RATE",
                   help=rate_help)
    return p


def terminal_flags(p: argparse.ArgumentParser, default: object = argparse.SUPPRESS) -> None:
    p.add_argument("-v", "--verbose", action="store_true", default=default,
                   help="show everything Ray, vLLM and torch print (default: our lines and a live display)")
    p.add_argument("--log-json", action="store_true", default=default, help="log JSON lines instead of console text")


def fail_fast_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument("--fail-fast-after", type=int, metavar="N",
                   help="stop the run when its first N outcomes are all dead letters (a bad prompt); "
                   "staged units are kept")


def parse_value(value: str) -> Any:
    """A command-line value as JSON where it parses (null, 0.5, false, [1]), else the text itself. A value nested
    too deep for the parser's stack is one `ConfigError` (the config's own nesting limit is checked later)."""
    try:
        return json.loads(value)
    except json.JSONDecodeError:
        return value
    except RecursionError:
        from pipeline.config_file import MAX_CONFIG_DEPTH

        raise ConfigError(f"the value {value[:24]}... nests too deep to parse (a config nests at most "
                          f"{MAX_CONFIG_DEPTH} levels)") from None


# Config keys that hold a path (a local one may be relative); `model.path` is a path only where one exists.
PATH_KEYS = frozenset({"input.uri", "output.uri", "input.schema_table", "schema_file", "examples",
                       "model.chat_template"})


def from_working_dir(key: str, value: Any) -> Any:
    """`value` of config key `key`, given on the command line: a relative local path made absolute against the
    working directory (a URI, an absolute path and a non-path value are returned as they are)."""
    if not isinstance(value, str) or not value or "://" in value:
        return value
    path = os.path.expanduser(value)
    if os.path.isabs(path):
        return path
    if key in PATH_KEYS or (key == "model.path" and value != "bundled" and os.path.exists(path)):
        return os.path.abspath(path)
    return value


def _field(dotted: str, flag: str) -> Any:
    """The Pydantic field of ExtractConfig that dotted key `dotted` sets, or None: a key inside a free mapping such
    as model.engine_kwargs, or a field whose own validator reads its input first (schema_policy.grounding takes
    true/false for marked/off), which only the config's validation knows. An unknown key: ConfigError naming
    `flag` (the user's own words) and the nearest known key."""
    import difflib

    from pydantic import BaseModel

    from pipeline.config import ExtractConfig

    model: Any = ExtractConfig
    info = None
    parts = dotted.split(".")
    for depth, part in enumerate(parts):
        if model is None:
            return None
        fields = model.model_fields
        name = part if part in fields else next((n for n, f in fields.items() if f.alias == part), None)
        if name is None:
            known = [f.alias or n for n, f in fields.items()]
            near = difflib.get_close_matches(part, known, n=1)
            where = ".".join(parts[:depth + 1])
            hint = f"; did you mean {'.'.join([*parts[:depth], near[0]])}?" if near else ""
            raise ConfigError(f"{flag}: {where} is not a key of extract.yaml (docs/config.md lists them){hint}")
        info = fields[name]
        if any(name in d.info.fields and d.info.mode != "after"
               for d in model.__pydantic_decorators__.field_validators.values()):
            return None
        kind = info.annotation
        model = kind if isinstance(kind, type) and issubclass(kind, BaseModel) else None
    return info


def typed_value(key: str, text: str, flag: str = "--set") -> Any:
    """`--set KEY=TEXT`'s value, by the type of the field KEY sets: JSON where the field takes the parsed value
    (256, 0.5, false, null, [1]), else the text itself (`name=2026` is "2026" for a text field). ConfigError
    naming the `--set` when the field takes neither, or when KEY is not a config key."""
    try:
        parsed = parse_value(text)
    except ConfigError as exc:
        raise ConfigError(f"{flag} {key}: {exc}") from None
    return checked(key, (parsed, text) if parsed is not text else (text,), f"{flag} {key}={text}")


def checked(key: str, candidates: tuple[Any, ...], flag: str) -> Any:
    """The first of `candidates` that config key `key`'s field takes, or ConfigError naming `flag` (what the user
    typed) with the field's complaint. A key inside a free mapping (model.engine_kwargs.*), or of a field the
    config's own validator reads first: the first candidate, which the config's validation then checks."""
    info = _field(key, flag)
    if info is None:
        return candidates[0]
    from typing import Annotated

    from pydantic import TypeAdapter, ValidationError

    adapter = TypeAdapter(Annotated[(info.annotation, *info.metadata)] if info.metadata else info.annotation)
    first: ValidationError | None = None
    for candidate in candidates:
        try:
            adapter.validate_python(candidate)
            return candidate
        except ValidationError as exc:
            first = first or exc
    assert first is not None
    problem = first.errors(include_url=False)[0]
    where = ".".join(str(p) for p in problem["loc"])
    raise ConfigError(f"{flag}: {problem['msg']}" + (f" (at {where})" if where else ""))


def overrides(args: argparse.Namespace) -> dict[str, Any]:
    """Dotted config keys from `--set`, `--set-file`, `--limit`, `--output` and `--max-dead-letter-rate`, each
    value typed by its key and a relative path made absolute against the working directory."""
    found: dict[str, Any] = {}
    for item in [*(args.set or []), *_set_file(args)]:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ConfigError(f"--set {item!r}: expected KEY=VALUE")
        found[key] = _with_bucket(from_working_dir(key, typed_value(key, value)), f"--set {item}")
    if getattr(args, "limit", None) is not None:
        found["input.limit"] = checked("input.limit", (args.limit,), f"--limit {args.limit}")
    if getattr(args, "output", None):
        found["output.uri"] = _with_bucket(from_working_dir("output.uri", args.output), f"--output {args.output}")
    if getattr(args, "max_dead_letter_rate", None) is not None:
        rate = args.max_dead_letter_rate
        found["output.max_dead_letter_rate"] = checked("output.max_dead_letter_rate", (rate,),
                                                       f"--max-dead-letter-rate {rate}")
    return found


def _with_bucket(value: Any, flag: str) -> Any:
    """`value`, unless it is an s3:// URI without a bucket (which the S3 client would refuse with a traceback)."""
    if isinstance(value, str) and value.startswith("s3://") and not value[len("s3://"):].split("/", 1)[0]:
        raise ConfigError(f"{flag}: an s3:// URI names a bucket, e.g. s3://my-bucket/extract/invoices")
    return value


def set_items(args: argparse.Namespace) -> list[str]:
    """The `--set` items as given, with a relative path of a path key made absolute against the working directory
    (what `extract submit` ships: on the cluster the working directory is another)."""
    items = []
    for item in args.set or []:
        key, sep, value = item.partition("=")
        fixed = from_working_dir(key, value) if sep and key in PATH_KEYS | {"model.path"} else value
        items.append(f"{key}={fixed}" if sep else item)
    return items


def _set_file(args: argparse.Namespace) -> list[str]:
    """`--set-file F`: a JSON list of KEY=VALUE items (how `extract submit` ships --set values: not on a command
    line that `ray job list` shows)."""
    path = getattr(args, "set_file", None)
    if not path:
        return []
    try:
        items = json.loads(open(path, encoding="utf-8").read())
    except (OSError, json.JSONDecodeError) as exc:
        raise ConfigError(f"--set-file {path}: {exc}") from None
    if not isinstance(items, list) or not all(isinstance(i, str) for i in items):
        raise ConfigError(f"--set-file {path}: expected a JSON list of \"KEY=VALUE\" strings")
    return items


def days(loaded: LoadedConfig, date_arg: str | None) -> list[date | None]:
    """The one partition `--date` names, or [None] for an undated input (`--date` must match the input)."""
    templated = is_templated(loaded.input_uri)
    if templated and date_arg is None:
        raise ConfigError(f"input.uri: {loaded.config.input.uri!r} has a {{date}}: give --date YYYY-MM-DD "
                          "(or yesterday)")
    if not templated and date_arg is not None:
        raise ConfigError(f"input.uri: {loaded.config.input.uri!r} has no {{date}}, so --date does not apply")
    return [parse_day(date_arg)] if date_arg is not None else [None]


# A line of an error is cut to this many characters (a 10 MB value in a message stays a readable line).
MAX_ERROR_LINE = 4000


def error_line(message: object) -> None:
    """The line a failed command ends with (`error: …`), through the one redactor (`workers.secrets`)."""
    from workers.secrets import redact_text

    lines = [line if len(line) <= MAX_ERROR_LINE else f"{line[:MAX_ERROR_LINE]}… ({len(line)} characters)"
             for line in redact_text(str(message)).split("\n")]
    print("error: " + "\n".join(lines), file=sys.stderr)
