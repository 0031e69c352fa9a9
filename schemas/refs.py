"""The schema graph: `$ref` resolution inside one schema document, never fetching anything, and the one view of
references every schema walker reads.

`RefIndex` knows the document's resources (the root and every subschema with an `$id`, or a draft-4 `id`) and
anchors; `#/pointer`, `#anchor` and `$id`-relative references resolve against them, anything else is remote.
`SchemaGraph` (one per document: `graph_for`, `SchemaContract.graph`) follows a node's references by one rule for
siblings and cycles (`SchemaGraph.expand`); the column layout, the prompt's field list, the examples' key order,
grammar bounds, decoding levers, the linter, grounding, the simulated engine, eval's schema view and `extract tune`
all walk references through it. The validator resolves with jsonschema's `referencing`, through the registry here
that refuses anything remote; the hostile-schema limits (`schemas.limits`) use the index to find remote
references and to measure depth with references inlined. No other module names the `$ref` keyword
(`tests/unit/test_architecture.py`)."""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any
from urllib.parse import urldefrag, urljoin

import referencing

from schemas.pointer import follow_pointer, pointer
from schemas.walk import iter_subschemas


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
        self.path_of: dict[int, tuple[Any, ...]] = {}
        self._index(root, "")

    def _own_id(self, node: dict[str, Any]) -> str | None:
        value = node.get("$id", node.get("id") if self.draft4 else None)
        return value if isinstance(value, str) else None

    def _index(self, root: dict[str, Any], root_base: str) -> None:
        """Every subschema's base URI and path, the resources and the anchors. A subschema's base is its own `$id`
        against the root's base, else the root's: an `$id` nested in another resource is read against the root,
        as the house always has (a draft-4 schema's `$id`, which is no keyword there, then moves nothing below)."""
        for path, node in iter_subschemas(root):
            base = root_base
            own = self._own_id(node)
            if own is not None:
                url, fragment = urldefrag(join_ref(root_base, own))
                base = url
                self.resources.setdefault(url, node)
                if fragment and not fragment.startswith("/"):
                    self.anchors[(url, fragment)] = node  # draft-4/7 style "$id": "#name"
            if node is root:
                self.resources.setdefault(base, node)
                root_base = base
            if isinstance(node.get("$anchor"), str):
                self.anchors[(base, node["$anchor"])] = node
            self.base_of.setdefault(id(node), base)
            self.path_of.setdefault(id(node), path)

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


# -- the graph: the one view of a document's references every walker reads ----------------------------------

REF = "$ref"  # the keyword; only this module and the hostile-schema limits (`schemas.limits`) name it


@dataclass(frozen=True)
class View:
    """A schema node as the walkers read it: its reference chain followed, each target's keywords with the
    referring node's own keywords over them (the one rule for siblings, as in JSON Schema 2019-09 and later,
    where a `$ref` applies beside its siblings).

    `node` is that merged schema (the node itself when it refers to nothing), or None when the chain runs into
    a cycle or a reference that does not resolve (`problem`: "cycle" or "unresolved", `why` says which, naming
    the reference). `origin` is the document node the view stands for (the last target, or the node itself),
    and `trail` the targets being expanded on the walker's path, to pass to the next `expand` below this one."""

    node: Any
    origin: Any
    trail: frozenset[int]
    problem: str | None = None
    why: str = ""


class SchemaGraph:
    """The resolved view of one schema document: `$ref`, `$anchor` and `$id` followed by one rule for siblings
    (`View`) and one for cycles (a reference to a target already being expanded on the walker's path, its
    `trail`, is a cycle). Built once per document (`graph_for`; `SchemaContract.graph`); its index is made the
    first time a reference is followed, so a document without references costs nothing."""

    def __init__(self, root: Any) -> None:
        self.root = root
        self._index: RefIndex | None = None

    @property
    def index(self) -> RefIndex:
        if self._index is None:
            self._index = RefIndex(self.root if isinstance(self.root, dict) else {})
        return self._index

    @staticmethod
    def refers(node: Any) -> bool:
        """Whether `node` holds a reference (whatever its value: one that is not text never resolves)."""
        return isinstance(node, dict) and REF in node

    @staticmethod
    def siblings(node: dict[str, Any]) -> dict[str, Any]:
        """`node`'s own keywords beside its reference."""
        return {k: v for k, v in node.items() if k != REF}

    def target(self, node: Any) -> Any:
        """The schema `node`'s reference points to (one hop), or None. The walkers read every reference against the
        document's base, as the house always has: an `$id` inside the document (no keyword at all in a draft-4
        schema, where such files often carry one) does not move it. The validator, through jsonschema, reads
        each against its own resource (`_hop`)."""
        ref = node.get(REF) if isinstance(node, dict) else None
        if not isinstance(ref, str):
            return None
        return self.index.resolve_from_root(ref)

    def _hop(self, node: dict[str, Any]) -> Any:
        return self.index.resolve(node[REF], self.index.base(node))

    def expand(self, node: Any, trail: frozenset[int] = frozenset()) -> View:
        """`node` as a `View`: its chain of references followed, siblings merged over each target."""
        merged, holder, origin = node, node, node
        while self.refers(holder):
            ref = holder[REF]
            target = self.target(holder)
            if not isinstance(target, dict):
                return View(None, origin, trail, "unresolved", f"{REF} {ref!r} does not resolve")
            if id(target) in trail:
                return View(None, target, trail, "cycle", f"{REF} {ref} is a cycle")
            trail = trail | {id(target)}
            merged = {**target, **self.siblings(merged)}
            holder = origin = target
        return View(merged, origin, trail)

    def path_of(self, node: Any) -> tuple[Any, ...] | None:
        """Where `node` is in the document (the path `schemas.walk.iter_subschemas` gives it), or None."""
        return self.index.path_of.get(id(node))

    def keyword_location(self, parts: list[Any]) -> str:
        """The location of a keyword reached along the schema path `parts` from the root, with a `$ref` segment
        wherever the path went through a reference (the spec's keywordLocation): jsonschema leaves those out."""
        node, out = self.root, []
        for part in parts:
            chain: set[int] = set()  # a chain of references that comes back on itself is a cycle: cut there
            while isinstance(node, dict) and part not in node and isinstance(node.get(REF), str) \
                    and id(node) not in chain:
                chain.add(id(node))
                out.append(REF)
                node = self._hop(node)
            out.append(part)
            if part == REF and isinstance(node, dict) and isinstance(node.get(REF), str):
                node = self._hop(node)
            elif isinstance(node, dict):
                node = node.get(part)
            elif isinstance(node, list) and isinstance(part, int) and part < len(node):
                node = node[part]
            else:
                node = None
        return pointer(out)


_CACHE: OrderedDict[int, tuple[Any, SchemaGraph]] = OrderedDict()
_CACHE_SIZE = 64
_CACHE_LOCK = threading.Lock()  # actors resolve from several threads


def graph_for(root: Any) -> SchemaGraph:
    """The `SchemaGraph` of `root`, built once per document for the last few documents walked (the cache holds
    the document itself, so an id is never reused while it is cached)."""
    with _CACHE_LOCK:
        entry = _CACHE.get(id(root))
        if entry is not None and entry[0] is root:
            _CACHE.move_to_end(id(root))
            return entry[1]
    graph = SchemaGraph(root)
    with _CACHE_LOCK:
        _CACHE[id(root)] = (root, graph)
        if len(_CACHE) > _CACHE_SIZE:
            _CACHE.popitem(last=False)
    return graph


def index_for(root: dict[str, Any]) -> RefIndex:
    """The `RefIndex` of `root` (its graph's)."""
    return graph_for(root).index


# -- the validator's side: jsonschema's `referencing`, never fetching -----------------------------------------


class SchemaRefError(ValueError):
    """A `$ref` that cannot be resolved inside the schema document (remote refs are never fetched)."""

    keyword = REF  # the keyword a report names for it


def _refuse_remote(uri: str) -> referencing.Resource:
    raise SchemaRefError(f"remote {REF} {uri!r} is not fetched (no network): a schema must be self-contained")


# The JSON Schema meta-schemas are combined in by jsonschema itself; anything else is refused.
NO_REMOTE_REGISTRY: referencing.Registry = referencing.Registry(retrieve=_refuse_remote)  # type: ignore[call-arg]


def unresolvable_message(exc: BaseException) -> str:
    """The refusal of a remote fetch if that is what failed, else which `$ref` does not resolve."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, SchemaRefError):
            return str(seen)
        seen = seen.__cause__ or seen.__context__
    return f"{REF} {getattr(exc, 'ref', exc)!r} does not resolve inside the schema"
