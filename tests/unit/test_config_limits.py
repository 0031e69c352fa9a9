"""Issue 23 item 5: the config file itself is bounded before it is loaded: its size, how deep it nests, and how
far its aliases expand (a "billion laughs" bomb). Each refusal is one line (`ConfigError`, exit 2)."""

from __future__ import annotations

import pytest
import yaml

from pipeline import config, config_file
from pipeline.config import ConfigError, load_config
from tests.conftest import DELETE, ROOT, write_config


def bomb(levels: int = 9, width: int = 9) -> str:
    """YAML of about 1 KB whose aliases stand for width**levels strings (9**9: 387 million)."""
    lines = ["x0: &x0 [" + ", ".join(['"lol"'] * width) + "]"]
    for level in range(1, levels):
        lines.append(f"x{level}: &x{level} [" + ", ".join([f"*x{level - 1}"] * width) + "]")
    return "\n".join(lines)


def error_of(path) -> str:
    with pytest.raises(ConfigError) as info:
        load_config(path)
    message = str(info.value)
    assert "\n" not in message
    return message


def test_a_config_nested_20000_deep_is_one_line_not_a_recursion_error(tmp_path):
    path = tmp_path / "extract.yaml"
    path.write_text("name: x\nmodel:\n  engine_kwargs:\n    deep: " + "[" * 20_000 + "]" * 20_000 + "\n")
    message = error_of(path)
    assert "nests more than 64" in message and str(path) in message


def test_a_yaml_bomb_is_refused_before_it_expands(tmp_path):
    text = bomb()
    assert len(text.encode()) < 1100  # the 1 KB file
    config = yaml.safe_load((ROOT / "jobs" / "extract.yaml").read_text())
    config["input"]["uri"], config["output"]["uri"] = str(ROOT / "jobs" / "sample" / "invoices.parquet"), "out"
    body = yaml.safe_dump(config, sort_keys=False).replace("  engine_kwargs:\n",
                                                          "  engine_kwargs:\n    laughs: *x8\n")
    path = tmp_path / "extract.yaml"
    path.write_text(text + "\n" + body)
    assert "laughs: *x8" in path.read_text()
    assert "expands to more than 100,000 values" in error_of(path)


def test_a_value_that_contains_itself_is_refused(tmp_path):
    path = tmp_path / "extract.yaml"
    path.write_text("name: &a [1, *a]\n")
    assert "contains itself" in error_of(path)


def test_a_config_over_the_size_limit_is_refused_unread(tmp_path, monkeypatch):
    monkeypatch.setattr(config_file, "MAX_CONFIG_BYTES", 1000)
    path = tmp_path / "extract.yaml"
    path.write_text("prompt: '" + "x" * 2000 + "'\n")
    assert "over 1,000 bytes" in error_of(path)


def test_a_config_that_is_not_utf8_is_one_line(tmp_path):
    path = tmp_path / "extract.yaml"
    path.write_bytes(b"name: \xff\xfe\n")
    assert "not UTF-8" in error_of(path)


def test_aliases_within_the_limits_still_load(tmp_path):
    """A config that reuses a value through an anchor is a real config: it loads."""
    path = write_config(tmp_path)
    text = path.read_text().replace("  max_tokens: 512\n", "  max_tokens: &budget 512\n", 1)
    path.write_text(text.replace("  sampling:\n", "  sampling:\n    seed: *budget\n", 1))
    assert load_config(path).config.model.sampling.seed == 512
    config.check_yaml_limits(bomb(levels=4, width=9), "x")  # 9**4 = 6,561 strings: within the limit
    config.check_yaml_limits("a: " + "[" * 60 + "]" * 60, "x")  # 61 deep: within


def test_a_set_value_nested_past_the_limit_is_one_line(tmp_path):
    deep: list = []
    for _ in range(70):
        deep = [deep]
    with pytest.raises(ConfigError, match=r"^--set model.engine_kwargs.x: the value nests more than 64"):
        load_config(write_config(tmp_path), {"model.engine_kwargs.x": deep})


def test_a_per_row_schema_nested_thousands_deep_is_unusable_not_a_traceback(tmp_path):
    """A row's own schema (input.schema_column) of JSON 20,000 deep: the driver's routing calls it unusable (the
    actor dead-letters the row), instead of the decoder's RecursionError ending `extract validate`/`run`."""
    from pipeline.routing import _row_contract
    from pipeline.stage_config import RoutingConfig

    loaded = load_config(write_config(tmp_path, schema=DELETE, **{"input.schema_column": "text"}))
    assert _row_contract('{"a": ' * 20_000 + "1" + "}" * 20_000, RoutingConfig.of(loaded)) is None
