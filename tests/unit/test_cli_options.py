"""The command line's shared options: `--set` values typed by their key, paths on the command line relative to the
working directory (a path in the YAML stays relative to the file), flags that read alike across commands."""

from __future__ import annotations

import argparse

import pytest

from pipeline.cli.main import parser
from pipeline.cli.options import from_working_dir, overrides, set_items, typed_value
from pipeline.config import ConfigError, load_config
from tests.conftest import write_config


def _args(*sets: str, **more) -> argparse.Namespace:
    return argparse.Namespace(set=list(sets), **more)


def test_set_values_take_the_type_of_their_key():
    assert typed_value("name", "2026") == "2026"  # a text field: the text, not the number
    assert typed_value("model.max_tokens", "256") == 256
    assert typed_value("model.temperature", "0.5") == 0.5
    assert typed_value("examples", "false") is False
    assert typed_value("system", "null") is None
    assert typed_value("model.sampling.stop", '["\\n\\n"]') == ["\n\n"]
    assert typed_value("model.engine_kwargs.enforce_eager", "true") is True  # inside a free mapping: JSON
    assert typed_value("schema", "schemas.invoice:Invoice") == "schemas.invoice:Invoice"  # an alias
    assert typed_value("schema_policy.grounding", "false") is False  # its own validator reads false as off


def test_a_set_value_its_key_cannot_take_names_the_set_not_the_file():
    with pytest.raises(ConfigError) as caught:
        typed_value("model.max_tokens", "many")
    assert str(caught.value).startswith("--set model.max_tokens=many: ")
    with pytest.raises(ConfigError, match=r"^--set model.max_tokens=0: .*greater than 0"):
        typed_value("model.max_tokens", "0")
    with pytest.raises(ConfigError, match=r"^--set prompt_schema=xml: "):
        typed_value("prompt_schema", "xml")
    with pytest.raises(ConfigError, match=r"^--set model.max_token=9: .*not a key.*did you mean model.max_tokens\?"):
        typed_value("model.max_token", "9")  # the user's --set is named, not the file


def test_set_name_2026_loads(tmp_path):
    loaded = load_config(write_config(tmp_path), overrides(_args("name=2026")))
    assert loaded.config.name == "2026"


def test_paths_on_the_command_line_follow_the_working_directory(tmp_path, monkeypatch):
    jobs = tmp_path / "jobs"
    jobs.mkdir()
    config = write_config(jobs, **{"output.uri": "../out/from-yaml"})
    monkeypatch.chdir(tmp_path / "jobs")
    assert load_config(config).output_uri == str(tmp_path / "out" / "from-yaml")  # the YAML's own: its folder
    monkeypatch.chdir(tmp_path)
    found = overrides(_args("output.uri=out/invoices", "model.max_tokens=64", output=None, limit=None))
    assert found["output.uri"] == str(tmp_path / "out" / "invoices")
    assert overrides(_args("examples=ex.jsonl"))["examples"] == str(tmp_path / "ex.jsonl")
    assert load_config(config, found).output_uri == str(tmp_path / "out" / "invoices")
    dotted = overrides(_args(output="./out/x", limit=None))
    assert dotted["output.uri"] == str(tmp_path / "out" / "x")
    assert from_working_dir("output.uri", "s3://b/p") == "s3://b/p"
    assert from_working_dir("output.uri", "/abs/p") == "/abs/p"
    assert from_working_dir("model.path", "Qwen/Qwen2.5-0.5B") == "Qwen/Qwen2.5-0.5B"  # no such folder: a hub id
    (tmp_path / "models" / "m").mkdir(parents=True)
    assert from_working_dir("model.path", "models/m") == str(tmp_path / "models" / "m")
    assert from_working_dir("prompt", "a/b") == "a/b"  # not a path key
    assert set_items(_args("output.uri=out/y", "model.max_tokens=8")) == [
        f"output.uri={tmp_path / 'out' / 'y'}", "model.max_tokens=8"]


def test_flags_read_alike_across_commands():
    top = parser()
    sub = next(a for a in top._actions if isinstance(a, argparse._SubParsersAction))

    def option(command: argparse.ArgumentParser, flag: str) -> argparse.Action | None:
        return next((a for a in command._actions if flag in a.option_strings), None)

    for name in ("query", "report", "eval"):
        assert "json" in option(sub.choices[name], "--format").choices
    for name in ("query", "eval"):  # a command with a table offers it as CSV too
        assert option(sub.choices[name], "--format").choices == ["table", "csv", "json"]
    for name in ("check", "lint"):
        schemas = next(a for a in sub.choices["schemas"]._actions if isinstance(a, argparse._SubParsersAction))
        command = schemas.choices[name]
        assert option(command, "--format").choices == ["table", "csv", "json"]
        assert command.parse_args(["x.json", "--json"]).format == "json"  # the old spelling still works
    assert option(sub.choices["report"], "--run").metavar == option(sub.choices["eval"], "--run").metavar == "RUN_ID"
    bench = sub.choices["bench"].parse_args(["my.yaml"])
    assert bench.config == "my.yaml" and bench.config_flag is None
    assert sub.choices["bench"].parse_args(["--config", "old.yaml"]).config_flag == "old.yaml"
    assert option(sub.choices["retry"], "--set") is not None
    assert "model" not in option(sub.choices["query"], "--set").help.split("e.g.")[1].split()[1]
    assert "commits" not in option(sub.choices["validate"], "--max-dead-letter-rate").help.split(":")[0]
    assert "only checks" in option(sub.choices["validate"], "--max-dead-letter-rate").help


def test_tune_levers_read_their_values_as_set_does(tmp_path, monkeypatch):
    from pipeline.cli.tune import parse_levers

    monkeypatch.chdir(tmp_path)
    levers = parse_levers(["name=2026,x", "examples=false,ex.jsonl", "model.sampling.presence_penalty=0,1.5"])
    assert levers == {"name": ("2026", "x"), "examples": (False, str(tmp_path / "ex.jsonl")),
                      "model.sampling.presence_penalty": (0, 1.5)}
    with pytest.raises(ConfigError, match=r"^--lever model.max_tokens=many: "):
        parse_levers(["model.max_tokens=256,many"])  # before any engine starts


def test_a_set_that_clashes_with_the_file_is_named_beside_the_file(tmp_path):
    """`--set model.path=simulated` on a job with engine_kwargs: the file is not blamed alone."""
    import pytest

    from pipeline.config import ConfigError, load_config
    from tests.conftest import write_config

    cfg = write_config(tmp_path)
    with pytest.raises(ConfigError, match=r"simulated engine takes none .*\(with --set model\.path\)$"):
        load_config(cfg, {"model.path": "simulated"})
