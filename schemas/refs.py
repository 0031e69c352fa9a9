"""`$ref` resolution inside one schema document, never fetching anything: the house's one resolver.

`RefIndex` knows the document's resources (the root and every subschema with an `$id`, or a draft-4 `id`) and
anchors; `#/pointer`, `#anchor` and `$id`-relative references resolve against them, anything else is remote.
`resolve_ref(root, ref)` resolves a reference written against the root, through a small cache of indexes,
for the walkers that only ever follow `#...` references (column layout, prompt field list, examples'
key order, eval's schema view, grammar bounds, decoding levers)."""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from typing import Any
from urllib.parse import urldefrag, urljoin

from schemas.pointer import follow_pointer
from schemas.walk import iter_subschemas

MAX_HOPS = 32  # a chain of `$ref`s to `$ref`s longer than this is treated as unresolved (or a cycle)


def join_ref(base: str, ref: str) -> str:
    """`ref` resolved against `base`; also for URNs, which `urljoin` leaves alone."""
    if ref.startswith("#"):
        return urldefrag(base)[0] + ref
    if re.match(r"[A-Za-z][A-Za-z0-9+.\-]*:", ref):
        return ref
    return urljoin(base, ref)


class RefIndex:
    """Where each local `$ref` of one schema document points, without ever fetching anything.

    Resources are the root and every subschema with an `$id` (or a draft-4 `id`); `#/pointer`,
    `#anchor` and `$id`-relative references resolve against them. Anything else is remote.
    """

    def __init__(self, root: dict[str, Any]) -> None:
        self.root = root
        self.draft4 = "draft-04" in str(root.get("$schema", "")) or "draft-03" in str(root.get("$schema", ""))
        self.resources: dict[str, dict[str, Any]] = {}
        self.anchors: dict[tuple[str, str], dict[str, Any]] = {}
        self.base_of: dict[int, str] = {}
        self._index(root, "")

    def _own_id(self, node: dict[str, Any]) -> str | None:
        value = node.get("$id", node.get("id") if self.draft4 else None)
        return value if isinstance(value, str) else None

    def _index(self, root: dict[str, Any], root_base: str) -> None:
        pending: list[tuple[Any, str]] = [(root, root_base)]
        seen: set[int] = set()
        while pending:
            node, base = pending.pop()
            if not isinstance(node, dict) or id(node) in seen:
                continue
            seen.add(id(node))
            own = self._own_id(node)
            if own is not None:
                url, fragment = urldefrag(join_ref(base, own))
                base = url
                self.resources.setdefault(url, node)
                if fragment and not fragment.startswith("/"):
                    self.anchors[(url, fragment)] = node  # draft-4/7 style "$id": "#name"
            if node is root:
                self.resources.setdefault(base, node)
            if isinstance(node.get("$anchor"), str):
                self.anchors[(base, node["$anchor"])] = node
            self.base_of[id(node)] = base
            for _, sub in iter_subschemas(node):
                if sub is not node:
                    pending.append((sub, base))

    def base(self, node: dict[str, Any]) -> str:
        return self.base_of.get(id(node), "")

    def is_local(self, ref: str, base: str) -> bool:
        url, _ = urldefrag(join_ref(base, ref))
        return url in self.resources

    def resolve(self, ref: str, base: str) -> Any:
        """The schema `ref` points to, or None when it is remote or does not resolve."""
        url, fragment = urldefrag(join_ref(base, ref))
        node: Any = self.resources.get(url)
        if node is None:
            return None
        if not fragment:
            return node
        if not fragment.startswith("/"):
            return self.anchors.get((url, fragment))
        return follow_pointer(node, fragment)

    def resolve_from_root(self, ref: str) -> Any:
        """`ref` as written at the root of the document (a `#/$defs/x` means the root's `$defs`)."""
        return self.resolve(ref, self.base(self.root))

    def follow(self, node: Any, hops: int = MAX_HOPS) -> Any:
        """Follow a chain of `$ref`s from `node` (each against its own base) to the schema it ends at; a
        reference that does not resolve leaves the chain at the node that holds it."""
        for _ in range(hops):
            if not (isinstance(node, dict) and isinstance(node.get("$ref"), str)):
                break
            target = self.resolve(node["$ref"], self.base(node))
            if target is None:
                break
            node = target
        return node


_CACHE: OrderedDict[int, tuple[dict[str, Any], RefIndex]] = OrderedDict()
_CACHE_SIZE = 64
_CACHE_LOCK = threading.Lock()  # actors resolve from several threads


def index_for(root: dict[str, Any]) -> RefIndex:
    """The `RefIndex` of `root`, built once per document for the last few documents resolved (the cache holds
    the document itself, so an id is never reused while it is cached)."""
    with _CACHE_LOCK:
        entry = _CACHE.get(id(root))
        if entry is not None and entry[0] is root:
            _CACHE.move_to_end(id(root))
            return entry[1]
    index = RefIndex(root)
    with _CACHE_LOCK:
        _CACHE[id(root)] = (root, index)
        if len(_CACHE) > _CACHE_SIZE:
            _CACHE.popitem(last=False)
    return index


def resolve_ref(root: Any, ref: str) -> Any:
    """The schema a reference written against the document's root points to, or None (remote, or nowhere)."""
    if not isinstance(root, dict):
        return None
    return index_for(root).resolve_from_root(ref)
