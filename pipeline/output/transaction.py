"""One partition's commit transaction (`Commit`): the only way a run or `extract retry` publishes a partition.

    commit = Commit(storage, layout, partition, run_id, guard=lease.ensure, hook=hook)  # begun: its id recorded
    with commit.files() as targets:   # temporary paths of its two data files, each put in place on success
        ...write targets["rows"] and targets["dead_letters"]...
    commit.publish(manifest)          # the lease confirmed, one manifest write (the commit point), the sweep

The steps, and what a kill at each leaves, are in `pipeline.output.commit`'s docstring.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import structlog

from pipeline.output.layout import KINDS, OutputLayout
from pipeline.output.links import refuse_links
from pipeline.output.manifest import (
    FORMAT,
    LeaseLostError,
    ManifestError,
    PartitionManifest,
    file_hash,
    read_manifest,
    relative,
)
from pipeline.partition import Partition
from pipeline.storage import Storage, StorageError

log = structlog.get_logger(__name__)

Hook = Callable[[str], None]  # called with a step name as a commit passes it (tests kill the process there)


def new_commit_id(run_id: str) -> str:
    """Names one commit's files: the run id (lineage) and a token (a run may commit a partition again)."""
    return f"{run_id}-{secrets.token_hex(3)}"


def begin_commit(storage: Storage, layout: OutputLayout, p: Partition, run_id: str) -> str:
    """A new commit id, recorded under the partition's staging before any of its files is written: the sweep
    deletes a dead commit's files only if its id is recorded there."""
    commit_id = new_commit_id(run_id)
    storage.write_text(layout.commit_marker(p, commit_id), "")
    return commit_id


def _commit_of(name: str) -> str | None:
    """The commit id in a data file's name (`part-<id>.parquet`, or its temporary `.part-<id>.parquet.<pid>.tmp`)."""
    name = name[1:] if name.startswith(".") else name
    if not name.startswith("part-") or ".parquet" not in name:
        return None
    return name[len("part-"):name.index(".parquet")]


def _linked(storage: Storage, root: str, folder: str) -> bool:
    """Whether `folder` or a folder between it and the output root is a symbolic link."""
    path = folder
    while len(path) > len(root.rstrip("/")):
        if storage.is_link(path):
            return True
        path = path.rsplit("/", 1)[0]
    return False


def file_facts(storage: Storage, files: dict[str, str]) -> tuple[dict[str, int], dict[str, str]]:
    """Each written file's size and content hash, for the manifest."""
    sizes, hashes = {}, {}
    for kind, uri in files.items():
        size = storage.size(uri)
        if size is None:
            raise StorageError(f"{uri}: written, but not found when read back")
        sizes[kind], hashes[kind] = size, file_hash(storage, uri)
    return sizes, hashes


def sweep(storage: Storage, layout: OutputLayout, p: Partition, manifest: PartitionManifest | None,
          superseded: set[str] | None = None) -> list[str]:
    """Delete the partition's data files (and their temporaries) of the `superseded` commit and of every commit
    recorded by `begin_commit`, except the files `manifest` names; then the records, and a format-1 `_SUCCESS`
    marker. A file whose name carries no such commit id, and a table folder reached through a symbolic link (which a
    commit refuses to write through), are
    left alone. Only a lease holder may call it: it would delete a running commit's files."""
    refuse_links(layout.root, layout.commits_root(p), write=True)
    named = manifest.uris(layout.root) if manifest else set()
    markers = storage.list_files(layout.commits_root(p))
    own = {m.rsplit("/", 1)[1] for m in markers} | (superseded or set())
    removed = []
    for kind in KINDS:
        folder = layout.folder(kind, p)
        if _linked(storage, layout.root, folder):
            log.warning("partition.sweep_skipped", folder=folder, reason="a symbolic link: not this output's folder")
            continue
        for path in storage.list_files(folder):
            parent, name = path.rsplit("/", 1)
            if parent == folder and path not in named and _commit_of(name) in own and not storage.is_link(path):
                storage.delete(path)
                removed.append(path)
    for marker in markers:
        storage.delete(marker)
    if manifest and storage.exists(layout.success(p)):
        storage.delete(layout.success(p))
    if removed:
        log.info("partition.swept", partition=p.label, files=len(removed))
    return removed


def _prior(storage: Storage, layout: OutputLayout, p: Partition) -> PartitionManifest | None:
    """The manifest a publish replaces; one that does not parse is replaced (with --force), its files left."""
    try:
        return read_manifest(storage, layout, p, check=False)
    except ManifestError as exc:
        log.warning("partition.unreadable_manifest", partition=p.label, error=str(exc))
        return None


def publish(storage: Storage, layout: OutputLayout, p: Partition, manifest: PartitionManifest,
            hook: Hook | None = None, generation: int | None = None) -> None:
    """The commit point: one write of the manifest, stamped with the writer's lease `generation` and the size and
    hash of each file it names (read back from the store, after they were fsynced); then the
    superseded commit's files and those of dead commits are deleted. A manifest published under a newer
    generation than this writer's is not overwritten: `LeaseLostError` (this writer's lease was taken over)."""
    prior = _prior(storage, layout, p)
    if generation is not None:
        newer = prior.lease_generation if prior and prior.lease_generation is not None else None
        if newer is not None and newer > generation:
            raise LeaseLostError(f"partition {p.label} of {layout.root} was published by lease generation {newer}; "
                                 f"this writer's generation {generation} is stale, so it publishes nothing")
        manifest.lease_generation = generation
    manifest.sizes, manifest.hashes = file_facts(storage, {kind: manifest.uri(kind, layout.root) for kind in KINDS})
    manifest.format = FORMAT
    superseded = {_commit_of(f.rsplit("/", 1)[-1]) for f in prior.files.values()} if prior else set()
    for commit_id in {c for c in superseded if c} - {manifest.commit_id}:  # a kill after the publish: still swept
        storage.write_text(layout.commit_marker(p, commit_id), "")
    refuse_links(layout.root, layout.manifest(p), write=True)
    storage.write_text(layout.manifest(p), manifest.to_json())
    if hook:
        hook("manifest_written")
    sweep(storage, layout, p, manifest)
    if hook:
        hook("swept")


class Commit:
    """One partition's commit: begun (its id recorded, so a sweep knows its files as this output's) when made, its
    two data files written under names no other commit uses (`files`), then published (`publish`). `guard`
    confirms with the store that the writer still holds the lease and returns its generation; `hook` is called
    with each step's name (tests kill the process there)."""

    def __init__(self, storage: Storage, layout: OutputLayout, p: Partition, run_id: str,
                 guard: Callable[[], int | None] | None = None, hook: Hook | None = None) -> None:
        self.storage = storage
        self.layout = layout
        self.partition = p
        self.guard = guard
        self.hook = hook
        self.id = begin_commit(storage, layout, p, run_id)
        self.paths = {kind: layout.data_file(kind, p, self.id) for kind in KINDS}

    def step(self, name: str) -> None:
        if self.hook:
            self.hook(name)

    @property
    def named(self) -> dict[str, str]:
        """The manifest's `files`: each data file relative to the output root."""
        return {kind: relative(self.layout.root, path) for kind, path in self.paths.items()}

    @contextmanager
    def files(self) -> Iterator[dict[str, str]]:
        """Temporary paths of the two data files; both are put in place (fsynced, renamed) only if the block
        succeeds, so a check that raises inside it leaves no data file of this commit."""
        scratch = self.layout.scratch(self.partition)
        for path in (*self.paths.values(), scratch):  # a linked table folder would put the files elsewhere
            refuse_links(self.layout.root, path, write=True)
        with self.storage.atomic_output(self.paths["rows"], scratch) as rows_tmp, \
                self.storage.atomic_output(self.paths["dead_letters"], scratch) as dead_tmp:
            yield {"rows": rows_tmp, "dead_letters": dead_tmp}
        self.step("files_written")

    def publish(self, manifest: PartitionManifest) -> None:
        """The commit point: the lease confirmed (`LeaseLostError`: nothing is published), then `publish`."""
        generation = self.guard() if self.guard else None
        publish(self.storage, self.layout, self.partition, manifest, self.hook,
                generation if isinstance(generation, int) else None)
