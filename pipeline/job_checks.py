"""Checks of a job that need its schema and settings together, made by `extract validate` and `extract run`
before anything starts (`ConfigError`: one line, exit 2).

- A schema field may not take the name of a column the pipeline writes beside it in the rows table (the
  lineage columns), of one a query view adds (`_source_file`, and `dt` for a dated input) or of one the
  pipeline uses internally on the way (`_unit`, the actors' outcome columns): it would be written twice, or
  hide the user's value, or break every query.
- `model.max_tokens` must leave room for a prompt inside `model.max_model_len`: otherwise every document
  would be dead-lettered `input_too_long`.
"""

from __future__ import annotations

from pipeline.config import ConfigError, LoadedConfig
from pipeline.output.tables import ROW_LINEAGE_COLUMNS
from pipeline.partition import DATE_TOKEN
from pipeline.reader import SLICE_COLUMN, UNIT_COLUMN
from workers.classify import INVALID_INPUT_COLUMN
from workers.extractor import BACKEND_COLUMN, OUTCOME_FIELDS

QUERY_COLUMNS = ("_source_file",)  # the file column the local query views read and drop (pipeline.output.query)
DATE_COLUMN = "dt"  # the date column a query view derives from a dated partition's folder


def reserved_columns(dated: bool) -> tuple[str, ...]:
    """Column names a schema field may not take, for a job with (`dated`) or without a `{date}` input."""
    internal = (UNIT_COLUMN, SLICE_COLUMN, INVALID_INPUT_COLUMN, BACKEND_COLUMN, *(f.name for f in OUTCOME_FIELDS))
    names = (*ROW_LINEAGE_COLUMNS, *QUERY_COLUMNS, *internal, *((DATE_COLUMN,) if dated else ()))
    return tuple(dict.fromkeys(names))


def check_reserved_fields(loaded: LoadedConfig) -> None:
    """`ConfigError` for a schema field named as one of the pipeline's own columns."""
    reserved = set(reserved_columns(DATE_TOKEN in loaded.input_uri))
    clashes = [name for name in loaded.contract.layout.schema.names if name in reserved]
    if clashes:
        shown = ", ".join(repr(name) for name in clashes)
        raise ConfigError(f"schema {loaded.contract.name}: field {shown} is a reserved output column name "
                          f"(reserved: {', '.join(sorted(reserved))}); rename the field in the schema")


def check_token_budget(loaded: LoadedConfig) -> None:
    """`ConfigError` when `model.max_tokens` leaves no room for any prompt in `model.max_model_len`."""
    model = loaded.config.model
    if model.max_tokens >= model.max_model_len:
        raise ConfigError(f"model.max_tokens ({model.max_tokens}) must be below model.max_model_len "
                          f"({model.max_model_len}): the prompt and the output share the context, so every "
                          "document would be input_too_long; lower model.max_tokens or raise model.max_model_len")
    least = prompt_tokens_at_least(loaded.config.prompt)
    if model.max_tokens + least > model.max_model_len:
        raise ConfigError(f"model.max_tokens ({model.max_tokens}) leaves {model.max_model_len - model.max_tokens} "
                          f"of model.max_model_len ({model.max_model_len}) for the prompt, but the prompt template "
                          f"alone takes at least {least} tokens, so every document would be input_too_long; lower "
                          "model.max_tokens or raise model.max_model_len")


# No tokenizer writes more than this many characters in one token of ordinary text (the bundled model's longest is a
# run of 81 spaces; its prompt text averages about 4 characters a token), so the template's length divided by it is
# a floor on its tokens that never refuses a prompt that fits.
CHARS_PER_TOKEN_CEILING = 16


def prompt_tokens_at_least(template: str) -> int:
    """A floor on the tokens of the prompt `template` without its document: its other text, runs of whitespace
    (a tokenizer may write a long run as one token) counted as one character."""
    import re

    text = re.sub(r"\s+", " ", template.replace("{document}", ""))
    return -(-len(text) // CHARS_PER_TOKEN_CEILING)


def check_job(loaded: LoadedConfig) -> None:
    check_reserved_fields(loaded)
    check_token_budget(loaded)
    check_output_outside_input(loaded)


def check_output_outside_input(loaded: LoadedConfig) -> None:
    """`ConfigError` for an output inside the folder (or prefix) its input reads every Parquet file below: the
    second run would read the first run's rows and dead letters as documents."""
    source, output = loaded.input_uri.rstrip("/"), loaded.output_uri.rstrip("/")
    if DATE_TOKEN in source:
        return
    if any(ch in source for ch in "*?["):
        if "**" not in source:
            return  # a glob without ** matches within one folder level: never the output's nested files
        source = source[:source.index("**")].rstrip("/")
    if output == source or output.startswith(source + "/"):
        raise ConfigError(f"output.uri {loaded.output_uri} is inside input.uri {loaded.input_uri}: a second run "
                          "would read the output's own Parquet files as documents; put the output elsewhere")
