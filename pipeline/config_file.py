"""The config file itself, read within limits before it is built into Python objects: its size, how deep its
mappings and lists nest, and how many values its aliases expand to. Each limit is one `ConfigError` line."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml


class ConfigError(ValueError):
    """The job configuration is wrong; the message is one line naming the key or column."""


# Limits on the config file itself, checked before it is built into Python objects: a config is a few KB of
# keys a few levels deep, so none of these stops a real job, and each stops a file that would take the loader's
# stack (nesting) or memory without bound (aliases that expand to copies of copies, "billion laughs").
MAX_CONFIG_BYTES = 1 << 20  # 1 MiB
MAX_CONFIG_DEPTH = 64  # mappings and lists inside each other
MAX_CONFIG_NODES = 100_000  # scalars and collections, each alias counted as all the nodes it stands for


class _Expansion:
    """The YAML parser's events, counted: how deep collections nest, and how many nodes the document stands for
    once each alias is counted as a copy of the node it names."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.open: list[list[Any]] = []  # per open collection: [its anchor, its expanded node count]
        self.sizes: dict[str, int] = {}  # anchor: the expanded node count of the node it names
        self.total = 0

    def add(self, count: int) -> None:
        self.total += count
        if self.open:
            self.open[-1][1] += count
        if self.total > MAX_CONFIG_NODES:
            raise ConfigError(f"{self.source}: the config expands to more than {MAX_CONFIG_NODES:,} values (its "
                              "aliases counted as copies of what they name); a config is a few keys, so this is "
                              "refused before it is loaded")

    def event(self, event: yaml.Event) -> None:
        if isinstance(event, yaml.ScalarEvent):
            if event.anchor:
                self.sizes[event.anchor] = 1
            self.add(1)
        elif isinstance(event, yaml.AliasEvent):
            if any(anchor == event.anchor for anchor, _ in self.open):
                raise ConfigError(f"{self.source}: alias *{event.anchor} names a mapping or list it is inside of "
                                  "(a value that contains itself)")
            self.add(self.sizes.get(event.anchor, 1))  # an unknown anchor is the loader's error, raised later
        elif isinstance(event, yaml.CollectionStartEvent):
            self.add(1)
            self.open.append([event.anchor, 1])
            if len(self.open) > MAX_CONFIG_DEPTH:
                line = event.start_mark.line + 1 if event.start_mark else "?"
                raise ConfigError(f"{self.source}: line {line}: the config nests more than {MAX_CONFIG_DEPTH} "
                                  "mappings or lists deep; a config is a few levels of keys, so this is refused "
                                  "before it is loaded")
        elif isinstance(event, yaml.CollectionEndEvent):
            anchor, count = self.open.pop()
            if anchor:
                self.sizes[anchor] = count
            if self.open:
                self.open[-1][1] += count - 1  # its own start was counted already


def check_yaml_limits(text: str, source: str) -> None:
    """Raise `ConfigError` (one line) when YAML `text` nests deeper than `MAX_CONFIG_DEPTH` or expands, its aliases
    counted as copies of what they name, to more than `MAX_CONFIG_NODES` nodes. Walks the parser's events (a
    loop, not a recursion), so neither a deep nor a bomb file is ever composed."""
    counted = _Expansion(source)
    for event in yaml.parse(text, Loader=yaml.SafeLoader):
        counted.event(event)


def read_yaml(path: Path) -> Any:
    """The YAML document at `path`, within the limits above; `ConfigError` in one line otherwise."""
    try:
        with path.open("rb") as handle:
            data = handle.read(MAX_CONFIG_BYTES + 1)
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the config: {exc.strerror}") from None
    if len(data) > MAX_CONFIG_BYTES:
        raise ConfigError(f"{path}: the config is over {MAX_CONFIG_BYTES:,} bytes; a config is a few KB "
                          "(put long prompts or tables in files it names)")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: the config is not UTF-8 text (byte {exc.start}: {exc.reason})") from None
    try:
        check_yaml_limits(text, str(path))
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML: {str(exc).splitlines()[0]}") from None


def nesting_depth(value: Any) -> int:
    """How many mappings and lists `value` nests (a loop, not a recursion)."""
    deepest, todo = 0, [(value, 1)]
    while todo:
        node, depth = todo.pop()
        if isinstance(node, dict | list):
            deepest = max(deepest, depth)
            if depth <= MAX_CONFIG_DEPTH:
                todo.extend((child, depth + 1) for child in (node.values() if isinstance(node, dict) else node))
    return deepest
